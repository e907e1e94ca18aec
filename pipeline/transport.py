"""kombu's Redis transport, with the hard queue ceiling enforced on every publish that skips admission.

notify() publishes through pipeline.admission. Everything else Celery publishes (retries, beat's
tasks, a stray apply_async) comes through here, so even a bug cannot grow a queue past its ceiling.
"""

from kombu.transport import redis

from notifications.exceptions import QueueCeilingReached


class Channel(redis.Channel):
    """A Redis channel whose _put refuses to push onto a Sluice queue at its ceiling."""

    # A batched publish would bypass _put's check; without batches every message goes through it.
    supports_batch_publish = False

    def _put(self, queue, message, **kwargs):
        ceiling = _ceilings().get(queue)
        if ceiling is None:
            return super()._put(queue, message, **kwargs)
        from kombu.utils.json import dumps

        target = self._q_for_pri(queue, self._get_message_priority(message, reverse=False))
        lists = [self._q_for_pri(queue, step) for step in self.priority_steps]
        with self.conn_or_acquire() as client:
            depth = client.register_script(_source())(keys=[target, *lists], args=[ceiling, dumps(message)])
        if depth < 0:
            raise QueueCeilingReached(f"queue {queue!r} is at its hard ceiling of {ceiling} messages")


class Transport(redis.Transport):
    Channel = Channel


def _ceilings():
    from notifications.conf import sluice_settings

    return {q.name: q.ceiling for q in sluice_settings().queues.values()}


def _source():
    from .store import _lua_source

    return _lua_source("push_capped")
