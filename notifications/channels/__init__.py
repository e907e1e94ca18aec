"""Delivery channel backends, chosen by dotted path in SLUICE_CHANNELS (like EMAIL_BACKEND)."""

from functools import cache

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils.module_loading import import_string

from pipeline.conf import sluice_settings


@cache
def get_channel(name):
    """The backend instance for channel ``name``, built once per process from SLUICE_CHANNELS."""
    conf = sluice_settings().channels[name]
    return import_string(conf.backend)(name=name, **conf.options)


@cache
def get_provider(channel, provider):
    """The backend instance of one provider of ``channel`` (SLUICE_CHANNELS[channel]["providers"]), built once per
    process. It is given the channel's name, like any backend, and knows its provider's as ``provider``."""
    conf = next(p for p in sluice_settings().channels[channel].providers if p.name == provider)
    backend = import_string(conf.backend)(name=channel, **conf.options)
    backend.provider = provider
    return backend


@cache
def sends_html(name):
    """Whether channel ``name`` sends HTML email: the class of its backend (of one of its providers) says
    ``sends_html``. Only looked up, never built."""
    conf = sluice_settings().channels[name]
    paths = [provider.backend for provider in conf.providers] or [conf.backend]
    return any(getattr(import_string(path), "sends_html", False) for path in paths)


@receiver(setting_changed)
def _reset(setting, **kwargs):
    if setting == "SLUICE_CHANNELS":
        get_channel.cache_clear()
        get_provider.cache_clear()
        sends_html.cache_clear()
