"""The send engine: one per-message pipeline for every send task, a single send being a batch of one.

The engine knows claims, gates, batches, expiry and how a message ends (retried, given back, dead-lettered,
requeued); what a message says and which provider carries it are handed in by the face (notifications.delivery),
so each rule is written once, here.
"""
