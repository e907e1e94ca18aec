"""The broker: Sluice's Celery transport (the reliable fetch, its reaper, the batch fetch), queues, routing and
messages, the pools' profiles, beat's schedule, Flower's login."""
