"""What every worker shares before it sends: the channels' gates, the providers' circuit breakers, token buckets."""
