"""Producer processes for concurrency tests: each sets Django up on its own and calls notify() in a loop."""

import os
from collections import Counter


def produce(kind, count, user_pk, prefix, barrier=None):
    """Call notify() ``count`` times in a fresh process; return a Counter of outcomes (and "rejected")."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from notifications import Rejected, notify

    # A saved user's instance, as a web request holds it: notify() needs no query for it.
    user = get_user_model()(pk=user_pk)
    outcomes = Counter()
    if barrier is not None:
        barrier.wait()
    for i in range(count):
        try:
            outcomes[str(notify(user, kind, entity_id=f"{prefix}-{i % 50}", payload={"i": i}))] += 1
        except Rejected:
            outcomes["rejected"] += 1
    return outcomes
