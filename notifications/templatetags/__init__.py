"""Sluice's template tag libraries."""
