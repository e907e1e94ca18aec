"""Signals of the digest, so the layers above can act at a flush without the digest importing them."""

from django.dispatch import Signal

#: Sent at the start of every flush, before anything is claimed. The preferences connect to it to rebuild
#: their Redis mirror from the database, so drift heals at each flush.
flush_started = Signal()
