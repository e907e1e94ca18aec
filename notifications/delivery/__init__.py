"""The send side: the one send engine, providers and failover, rendering, delivery records."""
