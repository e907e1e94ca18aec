"""Redis without settings: URLs and their clients, Sentinel that follows a failover, and every key name."""
