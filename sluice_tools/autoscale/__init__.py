"""Autoscaling simulator: arrivals per class, worker pools, and the KEDA/HPA loop the chart configures."""
