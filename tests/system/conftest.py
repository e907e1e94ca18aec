"""tests/system: kill loops, Redis crashes and restarts, Sentinel failovers, the demo, the host project, and the
benchmarks' properties. No time budget: these run in `make test-all` and CI, not in `make test`."""
