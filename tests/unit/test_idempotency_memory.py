"""What an idempotency key costs in Redis is what docs/sending.md and docs/security.md say: measured as used_memory
per key over keys recorded by admission itself (keyed events of a user who turned the kind off: each is SUPPRESSED,
publishes nothing, and records its key, so the key is all that grows)."""

import re
import uuid

from notifications import Outcome, notify, preferences
from sluice_tools.processes import ROOT

KEYS = 5_000
KIND = "task.assigned"
# Redis's tables grow by doubling, so a key's share of their slots moves with how full they are.
TOLERANCE = 0.2


def documented(doc, pattern):
    found = re.search(pattern, (ROOT / "docs" / doc).read_text())
    assert found, f"docs/{doc} states no figure for a key"
    return int(found[1])


def test_a_recorded_key_costs_what_the_docs_say(redis_client, user, settings):
    # The key alone: the activity log's entry of each call is bounded by its own buffer (docs/activity.md).
    settings.SLUICE_ACTIVITY = {"enabled": False}
    preferences.set(user, kind=KIND, mode="off")
    preferences.write_mirror([user.pk])
    assert notify(user, KIND, entity_id="e") is Outcome.SUPPRESSED
    before = redis_client.info("memory")["used_memory"]
    for _ in range(KEYS):
        notify(user, KIND, entity_id="e", idempotency_key=uuid.uuid4().hex)
    per_key = (redis_client.info("memory")["used_memory"] - before) / KEYS
    print(f"\nFIGURES idempotency key: {per_key:.1f} bytes a key over {KEYS} keys")
    for doc, pattern in (
        ("sending.md", r"about (\d+) bytes of Redis's memory"),
        ("security.md", r"costs a fixed \*\*about (\d+) bytes\*\*"),
    ):
        figure = documented(doc, pattern)
        assert abs(figure - per_key) <= TOLERANCE * per_key, f"docs/{doc} says {figure} bytes; measured {per_key:.0f}"
