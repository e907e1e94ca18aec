"""Replicated durability: run a class's script and WAIT for its replicas in the same round trip."""

from redis.exceptions import NoScriptError

from .errors import NotReplicated

#: What a replicated class confirms: an admission (admit_event.lua, a critical's retry push), a fold on the digest's
#: own Redis (fold_handed.lua), a flush's handover of digests to a class on another Redis, and a send's end.
STEPS = ("admission", "fold", "flush", "end")


def run(script, keys, args, client, queue, klass, step):
    """Run ``script`` (a redis-py Script) on ``client`` and return its reply. For a replicated ``queue`` (QueueConfig)
    the script and ``WAIT replicas timeout`` go in one pipeline, one round trip; fewer replicas than asked raise
    NotReplicated (the script's writes stay on the primary: confirmed or not, never undone)."""
    if not queue.replicated:
        return script(keys=keys, args=args, client=client)
    reply, confirmed = _with_wait(script, keys, args, client, queue)
    if confirmed < queue.durability_replicas:
        raise NotReplicated(klass, step, confirmed, queue.durability_replicas, queue.durability_timeout_ms)
    return reply


def _with_wait(script, keys, args, client, queue):
    """(the script's reply, replicas that confirmed), sent as EVALSHA and WAIT in one pipeline."""
    reply, confirmed = _send(script, keys, args, client, queue)
    if isinstance(reply, NoScriptError):
        # A restarted or newly promoted primary has no scripts (SCRIPT LOAD is not replicated): load it, again.
        script.sha = client.script_load(script.script)
        reply, confirmed = _send(script, keys, args, client, queue)
    for answer in (reply, confirmed):
        if isinstance(answer, Exception):
            raise answer
    return reply, confirmed


def _send(script, keys, args, client, queue):
    # Not Script.__call__ on a pipeline: redis-py then asks SCRIPT EXISTS first, a round trip of its own.
    pipe = client.pipeline(transaction=False)
    pipe.evalsha(script.sha, len(keys), *keys, *args)
    pipe.execute_command("WAIT", queue.durability_replicas, queue.durability_timeout_ms)
    return pipe.execute(raise_on_error=False)


def run_many(script, calls, client, queue, klass, step):
    """run() for many calls of one script, [(keys, args)], in one round trip: one pipeline, with one WAIT at its end
    for a replicated ``queue`` (it confirms every write before it). Return the replies in order; raise the first
    error a call met, or NotReplicated for the whole batch."""
    replies = _send_many(script, calls, client, queue)
    if any(isinstance(reply, NoScriptError) for reply in replies):
        script.sha = client.script_load(script.script)
        replies = _send_many(script, calls, client, queue)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    if queue.replicated:
        confirmed = replies.pop()
        if confirmed < queue.durability_replicas:
            raise NotReplicated(klass, step, confirmed, queue.durability_replicas, queue.durability_timeout_ms)
    return replies


def _send_many(script, calls, client, queue):
    pipe = client.pipeline(transaction=False)
    for keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    if queue.replicated:
        pipe.execute_command("WAIT", queue.durability_replicas, queue.durability_timeout_ms)
    return pipe.execute(raise_on_error=False)
