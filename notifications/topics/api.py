"""subscribe(), unsubscribe() and notify_topic(): a topic's subscriptions in bulk, and one event for all of them."""

import logging
import uuid
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from pipeline.connections import class_redis
from pipeline.redis import keys

from ..exceptions import UnknownUser
from ..topic_names import check_topic
from .models import DONE, Subscription, TopicFanout

logger = logging.getLogger("sluice.topics")


def subscribe(topic, users):
    """Subscribe ``users`` (users, their primary keys, or a QuerySet of users, read in chunks) to ``topic``; return
    how many subscriptions were added (a user subscribed already counts nothing). All or nothing: a user that does
    not exist raises UnknownUser, and then no subscription is added."""
    topic = check_topic(topic)
    added = 0
    with transaction.atomic():
        for chunk in _user_chunks(users):
            have = set(Subscription.objects.filter(topic=topic, user_id__in=chunk).values_list("user_id", flat=True))
            new = [Subscription(topic=topic, user_id=pk) for pk in chunk if pk not in have]
            try:
                with transaction.atomic():
                    Subscription.objects.bulk_create(new, ignore_conflicts=True)
            except IntegrityError:
                raise UnknownUser(f"a user of {chunk!r} was deleted meanwhile") from None
            added += len(new)
    return added


def unsubscribe(topic, users):
    """Unsubscribe ``users`` (as for subscribe()) from ``topic``; return how many subscriptions were removed (a user
    not subscribed, or that does not exist, counts nothing)."""
    topic = check_topic(topic)
    removed = 0
    for chunk in _user_chunks(users, known_only=False):
        removed += Subscription.objects.filter(topic=topic, user_id__in=chunk).delete()[0]
    return removed


def subscribers(topic):
    """How many users are subscribed to ``topic``."""
    return Subscription.objects.filter(topic=check_topic(topic)).count()


def notify_topic(topic, kind, *, entity_id, payload=None, idempotency_key=None, send_at=None, key=None):
    """Send one event to every subscriber of ``topic``, each decided exactly as notify() decides it (their choices,
    quiet hours, throttle, the bound, the fold). Everything is validated first (the topic, kind, entity, payload, key,
    time): bad input raises a NotifyError and records nothing. Return the TopicFanout job: a task of the kind's
    class fans it out in bounded steps, each subscriber once, however its steps are killed; ``subscribers`` is how
    many there were at the start. With ``idempotency_key``, a repeat returns the first call's job."""
    return notify_topic_in_scope(
        NOTIFY_SCOPE,
        topic,
        kind,
        entity_id=entity_id,
        payload=payload,
        idempotency_key=idempotency_key,
        send_at=send_at,
        key=key,
    )


NOTIFY_SCOPE = "notify"


def notify_topic_in_scope(scope, topic, kind, *, entity_id, payload=None, idempotency_key=None, send_at=None, key=None):
    """notify_topic() for a caller with idempotency keys of its own (ingest: one scope per service). The job's
    ``replayed`` is True when an earlier call with the same key made it."""
    from ..api import _validate, check_idempotency_key, schedule_of

    topic = check_topic(topic)
    template = _validate(None, kind, entity_id, payload, None, scope, unknown_user=True)
    if idempotency_key is not None:
        check_idempotency_key(idempotency_key)
    when, key = schedule_of(send_at, key)
    klass = template.kind.klass
    if idempotency_key is not None and (job := _earlier(scope, idempotency_key)) is not None:
        return job
    job = TopicFanout(
        topic=topic,
        kind=template.kind.name,
        klass=klass,
        entity_id=template.entity_id,
        payload=template.payload_json,
        send_at=None if when is None else datetime.fromtimestamp(when, UTC),
        key=key or "",
        scope=scope,
        idempotency_key=idempotency_key or "",
        token=uuid.uuid4().hex,
    )
    try:
        with transaction.atomic():
            job.subscribers = Subscription.objects.filter(topic=topic).count()
            if not job.subscribers:
                job.state = DONE
            job.save()
    except IntegrityError:
        # The same key, raced: the other call's job is the one.
        if idempotency_key and (earlier := _earlier(scope, idempotency_key)) is not None:
            return earlier
        raise
    job.replayed = False
    if job.state != DONE:
        transaction.on_commit(lambda: start(job))
    return job


def _earlier(scope, idempotency_key):
    job = TopicFanout.objects.filter(scope=scope, idempotency_key=idempotency_key).first()
    if job is not None:
        job.replayed = True
    return job


def start(job):
    """Record the job's backlog and ask for a step of its class's fan-out; a broker that cannot take it now leaves the
    job to beat's next tick (sluice.topics.tick), never lost."""
    from . import tasks

    client = class_redis(job.klass)
    try:
        client.hset(keys.topic_backlog(job.klass), job.token, job.left)
        tasks.ask(job.klass)
    except Exception as exc:  # noqa: BLE001 - the job is stored: beat's tick starts it
        logger.warning("topic fan-out %s: its first step could not be asked for (%s); beat's tick will", job.pk, exc)


def _user_chunks(users, known_only=True):
    """``users`` as chunks of the primary keys of those who exist (wire.MAX_BATCH), each once; ``known_only`` raises
    UnknownUser naming the first that no user has, else such users are left out (none can be subscribed)."""
    from ..fanout import _chunks, _known

    User = get_user_model()
    for chunk in _chunks(users):
        known, unknown = _known(chunk)
        if unknown and known_only:
            raise UnknownUser(f"no {User.__name__} with primary key {unknown[0]!r}")
        if known:
            yield known
