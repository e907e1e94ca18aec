"""Replicated durability: run a class's script and WAIT for its replicas in the same round trip."""

import logging
import os

from redis.exceptions import NoScriptError, ResponseError

from .connections import fold_store_url
from .errors import NotReplicated, WaitRefused
from .redis.addresses import describe
from .redis.cluster import SlotClient

logger = logging.getLogger("sluice.durability")

#: What a replicated class confirms: an admission (admit_event.lua, a critical's retry push), a fold on the digest's
#: own Redis (fold_handed.lua), a flush's handover of digests to a class on another Redis, and a send's end. Every
#: step but the fold runs on the class's own Redis.
STEPS = ("admission", "fold", "flush", "end")

# (process id, Redis URL) of each refused WAIT logged. A dict's setdefault is atomic, so two threads never both log;
# a forked child has a pid of its own, so it logs its first refusal itself, and there is no lock a fork could leave
# held.
_refusals_logged = {}


def run(script, keys, args, client, queue, klass, step):
    """Run ``script`` (a redis-py Script) on ``client`` and return its reply. For a replicated ``queue`` (QueueConfig)
    the script and ``WAIT replicas timeout`` go in one pipeline, one round trip; fewer replicas than asked raise
    NotReplicated, and a WAIT that Redis refuses (an ACL user without +wait) WaitRefused, a NotReplicated that
    confirmed nothing. The script's writes stay on the primary: confirmed or not, never undone; the exception's
    ``reply`` is the script's, for a caller with more to do on it."""
    if isinstance(client, SlotClient):
        # A partition of a Redis Cluster: the whole step goes to its slot's primary, again if the slot moved.
        return client.run(lambda node: run(script, keys, args, node, queue, klass, step))
    if not queue.replicated:
        return script(keys=keys, args=args, client=client)
    reply, confirmed = _with_wait(script, keys, args, client, queue)
    _check(confirmed, reply, queue, klass, step)
    return reply


def _check(confirmed, reply, queue, klass, step):
    """Raise WaitRefused or NotReplicated, carrying ``reply``, unless WAIT ``confirmed`` enough replicas."""
    if isinstance(confirmed, ResponseError):
        refused = WaitRefused(klass, step, queue.durability_replicas, queue.durability_timeout_ms, _reason(confirmed))
        refused.reply = reply
        _log_refusal(refused, queue)
        raise refused from confirmed
    if confirmed < queue.durability_replicas:
        unconfirmed = NotReplicated(klass, step, confirmed, queue.durability_replicas, queue.durability_timeout_ms)
        unconfirmed.reply = reply
        raise unconfirmed


def run_many(script, calls, client, queue, klass, step):
    """run() for many calls of one script, [(keys, args)], in one round trip: one pipeline, with one WAIT at its end
    for a replicated ``queue`` (it confirms every write before it). Return the replies in order; raise the first
    error a call met, or NotReplicated (WaitRefused) for the whole batch, its ``reply`` the list of replies."""
    if isinstance(client, SlotClient):
        return client.run(lambda node: run_many(script, calls, node, queue, klass, step))
    replies = _send_many(script, calls, client, queue)
    if any(isinstance(reply, NoScriptError) for reply in replies):
        script.sha = client.script_load(script.script)
        replies = _send_many(script, calls, client, queue)
    confirmed = replies.pop() if queue.replicated else None
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    if confirmed is not None:
        if isinstance(confirmed, Exception) and not isinstance(confirmed, ResponseError):
            raise confirmed
        _check(confirmed, replies, queue, klass, step)
    return replies


def _send_many(script, calls, client, queue):
    pipe = client.pipeline(transaction=False)
    for keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    if queue.replicated:
        pipe.execute_command("WAIT", queue.durability_replicas, queue.durability_timeout_ms)
    return pipe.execute(raise_on_error=False)


def _with_wait(script, keys, args, client, queue):
    """(the script's reply, replicas that confirmed or WAIT's error reply), sent as EVALSHA and WAIT in one
    pipeline."""
    reply, confirmed = _send(script, keys, args, client, queue)
    if isinstance(reply, NoScriptError):
        # A restarted or newly promoted primary has no scripts (SCRIPT LOAD is not replicated): load it, again.
        script.sha = client.script_load(script.script)
        reply, confirmed = _send(script, keys, args, client, queue)
    if isinstance(reply, Exception):
        raise reply
    if isinstance(confirmed, Exception) and not isinstance(confirmed, ResponseError):
        raise confirmed
    return reply, confirmed


def _send(script, keys, args, client, queue):
    # Not Script.__call__ on a pipeline: redis-py then asks SCRIPT EXISTS first, a round trip of its own.
    pipe = client.pipeline(transaction=False)
    pipe.evalsha(script.sha, len(keys), *keys, *args)
    pipe.execute_command("WAIT", queue.durability_replicas, queue.durability_timeout_ms)
    return pipe.execute(raise_on_error=False)


def _reason(error):
    return f"{type(error).__name__}: {error}"


def first_refusal(url):
    """True the first time this process sees the Redis at ``url`` refuse WAIT, and never again in it."""
    mark = object()
    return _refusals_logged.setdefault((os.getpid(), url), mark) is mark


def _log_refusal(refused, queue):
    """One ERROR line per process and Redis: the same refusal comes back on every write of the class, and each
    caller is told already (Unavailable, a counter)."""
    url = fold_store_url(refused.klass) if refused.step == "fold" else queue.redis_url
    if first_refusal(url):
        logger.error(
            "Redis at %s refused WAIT (%s): every write of the replicated %s class is unconfirmed, and notify() "
            "raises Unavailable (ingest answers 503), until its user may run WAIT: add +wait to its ACL rules "
            "(docs/redis.md); `manage.py check` says so as sluice.E008. Logged once per process",
            describe(url),
            refused.reason,
            refused.klass,
        )
