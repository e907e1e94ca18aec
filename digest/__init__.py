"""The digest: the fold store, the flush and overflow drain tasks, their beat schedule, and the digest templates."""
