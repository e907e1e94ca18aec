"""One digest per user: group a flush's claimed folds by user, and build each group's messages, one per channel.

A flush claims whole users (user_claims.claim_users). Each user's routine folds then go out as one message per
channel listing them (the kind's ``digest_group`` "user", the default), or one per kind and channel ("kind"), or
one per fold key as before ("entity"); a group of a single fold keeps the kind's own digest template. Background
folds keep one message per key: a collapse is the latest state of one thing, not a list. A user's digests (one per
channel) are published in one Lua step with the release of every key they list, and a fold's own message with its
key (user_claims.publish_group).

The ``digest`` argument of a user digest's send task is this module's wire format to the renderer
(notifications.user_digest): ``group`` ("user" or a kind's name), ``items`` (at most SLUICE_DIGEST["max_items"]:
kind, entity_id, count, payload, first_seen, last_seen, grain, entities, kinds), ``more`` (groups not listed) and
``more_events`` (their events).
"""

import hashlib
import json
from dataclasses import dataclass, field

from pipeline import activity_fields
from pipeline.broker.message import event_kwargs_json, send_message
from pipeline.conf.inbox import INBOX_BACKEND

# What the listed items' payloads may add up to in one digest message; past it, items are listed without their
# payload (by entity id). With the item bound, a digest's size stays bounded whatever the payloads.
PAYLOAD_BUDGET_BYTES = 64 * 1024
#: The most fold keys a digest's activity entry names (an entry stays small); its event count covers them all.
DIGEST_MEMBERS_LOGGED = 20


@dataclass
class Group:
    """One user's claimed folds of one class: what one Lua step publishes and releases together."""

    user_id: object
    klass: str
    folds: list = field(default_factory=list)

    @property
    def members(self):
        return [fold.member for fold in self.folds]

    @property
    def mark(self):
        """Names the group within its flush, the same whichever of its claims a takeover finds."""
        return json.dumps([self.user_id, self.klass], separators=(",", ":"), ensure_ascii=False)

    @property
    def oldest(self):
        return min(fold.first_seen for fold in self.folds)


def class_of(fold, conf, classes):
    """The class a fold's digest goes out with: its kind's, or the store's first when the kind is gone or moved to a
    class on another Redis since it folded (a digest and its claim must change together on one Redis)."""
    kind = conf.kinds.get(fold.kind)
    klass = kind.klass if kind else classes[0]
    return klass if klass in classes else classes[0]


def group_folds(folds, class_of):
    """Group ``folds`` by user and class (``class_of(fold)``), the groups whose events waited longest last."""
    groups = {}
    for fold in folds:
        klass = class_of(fold)
        groups.setdefault((json.dumps(fold.user_id), klass), Group(fold.user_id, klass)).folds.append(fold)
    return sorted(groups.values(), key=lambda g: g.oldest, reverse=True)


@dataclass(frozen=True)
class Outgoing:
    """One message a group publishes, and the events it carries."""

    message: str
    events: int
    # Its entry in the activity log (pipeline.activity_fields.Entry), written once it is published.
    activity: object = None


@dataclass(frozen=True)
class Part:
    """One message of a group's plan: a fold's own (``bucket`` None), or a digest of ``folds`` on ``channel``.

    A fold's own message on ``inboxes`` only (its kind's inbox channels) goes out with the user's digests, in their
    step: the fold is listed in a digest on its other channels, and its key is released once both went out."""

    folds: list
    bucket: str | None = None
    channel: str | None = None
    inboxes: tuple = ()


def plan(group, conf):
    """What ``group`` sends: its Parts, in a stable order (a takeover rebuilds the same messages and ids).

    The inbox folds by entity itself (one unread item per user, kind and entity), so a fold never rides in a
    user's digest on an inbox channel: a kind sent only to inboxes keeps one message per key, and a kind sent to
    an inbox and to other channels is listed in the digest on the others and sent on its own to the inbox."""
    parts = []
    buckets = {}
    for fold in group.folds:
        kind = conf.kinds.get(fold.kind)
        channels = fold.channels or (kind.channels if kind else ())
        only_inboxes = len(_inboxes(channels, conf)) == len(channels)
        if group.klass != "routine" or kind is None or kind.digest_group == "entity" or only_inboxes:
            parts.append(Part([fold]))
            continue
        bucket = "" if kind.digest_group == "user" or fold.grain == "user" else kind.name
        buckets.setdefault(bucket, []).append(fold)
    for bucket, folds in sorted(buckets.items()):
        if len(folds) == 1:
            parts.append(Part(folds))
            continue
        by_channel = {}
        for fold in folds:
            channels = fold.channels or conf.kinds[fold.kind].channels
            inboxes = _inboxes(channels, conf)
            if inboxes:
                parts.append(Part([fold], inboxes=inboxes))
            for channel in channels:
                if channel not in inboxes:
                    by_channel.setdefault(channel, []).append(fold)
        parts.extend(Part(listed, bucket, channel) for channel, listed in sorted(by_channel.items()))
    return parts


def _inboxes(channels, conf):
    """The inbox channels among ``channels``, in their order."""
    return tuple(name for name in channels if getattr(conf.channels.get(name), "backend", None) == INBOX_BACKEND)


@dataclass(frozen=True)
class Step:
    """What one Lua step publishes (``outgoing``) and releases (``members``); ``mark`` names it within its flush."""

    members: list
    mark: str
    outgoing: list


def steps_of(flush_id, group, queue_name, conf, single):
    """The publish steps of ``group``: each fold's own message alone with its key (``single(fold)`` builds it, one
    message per key as before), and the user's digests, one per channel, together with every key they list (a fold
    listed on two channels is released once both went out). Each step needs room for its messages only."""
    steps, digests, beside = [], [], []
    for part in plan(group, conf):
        if part.inboxes:
            beside.append(part)
        elif part.bucket is None:
            fold = part.folds[0]
            entry = listed(fold.notification_id(flush_id), group, [fold], "", ",".join(sorted(fold.channels or ())))
            steps.append(Step([fold.member], fold.member, [Outgoing(single(fold), fold.count, entry)]))
        else:
            digests.append(part)
    if digests:
        members = sorted({fold.member for part in digests for fold in part.folds})
        outgoing = [_digest_message(flush_id, group, part, queue_name, conf) for part in digests]
        outgoing += [Outgoing(single(part.folds[0], channels=part.inboxes), 0) for part in beside]
        steps.append(Step(members, group.mark, outgoing))
    return steps


def digest_of(part, max_items):
    """The ``digest`` argument of a Part's message (this module's wire format to the renderer)."""
    ordered = sorted(part.folds, key=lambda f: (-f.count, -f.last_seen, f.member))
    shown, rest = ordered[:max_items], ordered[max_items:]
    budget = PAYLOAD_BUDGET_BYTES
    items = []
    for fold in shown:
        budget -= len(fold.payload_json)
        items.append(
            {
                "kind": fold.kind,
                "entity_id": fold.entity_id,
                "count": fold.count,
                "payload": json.loads(fold.payload_json) if budget >= 0 else {},
                "first_seen": fold.first_seen,
                "last_seen": fold.last_seen,
                "grain": fold.grain,
                "entities": fold.entities,
                "kinds": fold.kinds,
            }
        )
    return {
        "group": part.bucket or "user",
        "items": items,
        "more": len(rest),
        "more_events": sum(f.count for f in rest),
    }


def _digest_message(flush_id, group, part, queue_name, conf):
    folds, bucket, channel = part.folds, part.bucket, part.channel
    digest = digest_of(part, conf.digest.max_items)
    events = sum(f.count for f in folds)
    name = f"{group.mark}|{bucket}|{channel}"
    notification_id = f"digest-{flush_id}-{hashlib.sha1(name.encode()).hexdigest()[:16]}"
    first_seen = min(f.first_seen for f in folds)
    kind = bucket or digest["items"][0]["kind"]
    kwargs = event_kwargs_json(
        notification_id,
        kind,
        group.user_id,
        "",
        "{}",
        count=events,
        channels=[channel],
        first_seen=first_seen,
        last_seen=max(f.last_seen for f in folds),
        digest=digest,
    )
    message = send_message(group.klass, notification_id, kwargs, queue_name, kind, events, published_at=first_seen)
    return Outgoing(message, events, listed(notification_id, group, folds, bucket or "user", channel))


def listed(notification_id, group, folds, bucket, channel):
    """The activity log's entry of a digest message: which fold keys (and so which events) it carried, and how many
    events; the events' own entries name the fold key they went into (pipeline.activity_fields)."""
    kinds = sorted({f.kind for f in folds})
    members = json.dumps(sorted(f.member for f in folds)[:DIGEST_MEMBERS_LOGGED], ensure_ascii=False)
    return activity_fields.Entry(
        str(group.user_id),
        kinds[0] if len(kinds) == 1 else "",
        folds[0].entity_id if len(folds) == 1 else "",
        notification_id,
        group.klass,
        activity_fields.DIGESTED,
        bucket,
        str(sum(f.count for f in folds)),
        members,
        channel=channel,
    )
