"""Benchmarks behind `manage.py bench`: figures measured side by side in one run, reported as ratios."""
