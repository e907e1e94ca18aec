"""The activity log: every decision about a person's notifications, drained from Redis into the host's database."""
