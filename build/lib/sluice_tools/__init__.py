"""Sluice's tooling: benchmarks, the autoscaling simulator, the local process helpers and the demo (extra [bench])."""
