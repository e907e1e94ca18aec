"""The engine: the settings resolver, Sluice's Celery app and its transport, Redis, admission, metrics.

Importing it, or any of its modules, builds nothing and reads no setting: ``pipeline.app`` (what
``celery -A pipeline`` loads) builds Sluice's Celery app the first time it is read (pipeline.celery.get_app).
"""


def __getattr__(name):
    # `celery -A pipeline` (celery.app.utils.find_app) reads `pipeline.app`: only then is the app built.
    if name == "app":
        from .celery import get_app

        return get_app()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
