"""Topics: subscriptions stored in the host's database, and notify_topic() fanned out to them in bounded steps."""
