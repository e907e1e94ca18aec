"""Observation: queue latency, windowed signals, the exporter and its provider families, capacity."""
