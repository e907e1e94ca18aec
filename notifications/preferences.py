"""Mirror the opted-out users into a Redis set, so the fold step checks opt-out in the same round trip."""

from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from pipeline import keys
from pipeline.store import get_redis

from .models import DigestPreference, optout_member


def rebuild_mirror(**kwargs):
    """At every flush (digest.signals.flush_started): rebuild the opt-out mirror from the database."""
    return sync_optouts()


def sync_optouts():
    """Rebuild the Redis opt-out set from the database and swap it in atomically; return its size."""
    members = [
        optout_member(user_id, kind)
        for user_id, kind in DigestPreference.objects.filter(deliver_separately=True).values_list("user_id", "kind")
    ]
    client = get_redis()
    staging = keys.optout() + ":staging"
    pipe = client.pipeline(transaction=True)
    pipe.delete(staging)
    if members:
        pipe.sadd(staging, *members)
        pipe.rename(staging, keys.optout())
    else:
        pipe.delete(keys.optout())
    pipe.execute()
    return len(members)


def mirror(preferences):
    """Write these rows' current state to the Redis set once the transaction commits."""
    rows = [(p.optout_member, p.deliver_separately) for p in preferences]

    def write():
        pipe = get_redis().pipeline(transaction=True)
        for member, separately in rows:
            (pipe.sadd if separately else pipe.srem)(keys.optout(), member)
        pipe.execute()

    transaction.on_commit(write)


@receiver(post_save, sender=DigestPreference)
def _saved(instance, **kwargs):
    mirror([instance])


@receiver(post_delete, sender=DigestPreference)
def _deleted(instance, **kwargs):
    member = instance.optout_member
    transaction.on_commit(lambda: get_redis().srem(keys.optout(), member))
