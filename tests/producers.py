"""Producer processes for concurrency tests: each sets Django up on its own and calls notify() in a loop."""

import os
import random
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


def flush_loop(seconds, lease_s=5):
    """Flush over and over for ``seconds`` in a fresh process; return how many digest messages it published."""
    import time

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
    import django

    django.setup()
    from digest.flush import run_flush

    published = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        published += run_flush("test", lease_s=lease_s)
    return published


def fold_loop(count, user_base, keys_per_user=20):
    """Fold ``count`` routine events over a few users and entities in a fresh process."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
    import django

    django.setup()
    from tests.digest_helpers import fold

    for i in range(count):
        fold(user_base + i % 5, entity_id=f"e{i % keys_per_user}", payload={"i": i})
    return count


def spread_users(count, seed=0):
    """``count`` user ids, shuffled, so that concurrent producers hit every partition at once."""
    users = list(range(1, count + 1))
    random.Random(seed).shuffle(users)
    return users


def produce_critical(count, prefix, barrier=None):
    """Call critical notify() ``count`` times over many users (a class on a cluster: every partition) in a fresh
    process; return a Counter of outcomes (and "rejected")."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model as user_model

    from notifications import Rejected as Refused
    from notifications import notify as send
    from tests.cluster_helpers import CRITICAL

    outcomes = Counter()
    users = spread_users(count, seed=prefix)
    if barrier is not None:
        barrier.wait()
    for i, pk in enumerate(users):
        try:
            outcomes[str(send(user_model()(pk=pk), CRITICAL, entity_id=f"{prefix}-{i}", payload={"i": i}))] += 1
        except Refused:
            outcomes["rejected"] += 1
    return outcomes
