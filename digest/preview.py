"""A user's pending digest as the next flush would group it (for the admin's preview), and when it is due."""

import functools
import json
import re

from digest import grouping
from digest.fold_store import fold_from
from pipeline.conf import sluice_settings
from pipeline.connections import fold_store_classes, get_redis
from pipeline.redis import keys

# A preview reads at most this many of a user's pending keys: a request's work stays bounded.
MAX_KEYS = 1000


def pending_of(user_id):
    """(the user's Groups, the soonest due time of their keys or None): their folds not yet claimed by a flush, on
    every fold store. The pending set is scanned for the user's members (an admin's request, not a hot path)."""
    conf = sluice_settings()
    prefix = "[" + json.dumps(user_id, ensure_ascii=False, separators=(",", ":")) + ","
    pattern = re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"
    groups, due = [], []
    for url, classes in fold_store_classes().items():
        client = get_redis(url)
        found = []
        for member, score in client.zscan_iter(keys.pending(), match=pattern, count=1000):
            found.append((member.decode(), score))
            if len(found) >= MAX_KEYS:
                break
        pipe = client.pipeline(transaction=False)
        for member, _score in found:
            pipe.hgetall(keys.fold(member))
        folds = [fold_from(m, fields) for (m, _s), fields in zip(found, pipe.execute(), strict=True) if fields]
        due.extend(score for _m, score in found)
        class_of = functools.partial(grouping.class_of, conf=conf, classes=classes)
        groups.extend(grouping.group_folds(folds, class_of))
    return groups, min(due) if due else None
