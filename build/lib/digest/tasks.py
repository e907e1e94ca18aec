"""Celery discovers the digest's tasks here."""

from .flush import drain, flush

__all__ = ["drain", "flush"]
