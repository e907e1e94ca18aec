"""A kind's url template names the caller's fields only after its host: a field in the scheme and authority (or where
a browser reads one) is refused at configuration, naming the exact setting."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from notifications.user_digest import link
from pipeline.conf import sluice_settings


def configure(settings, url):
    settings.SLUICE_KINDS = {"doc.changed": {"class": "routine", "channels": ["email"], "url": url}}
    return sluice_settings()


@pytest.mark.parametrize(
    "url",
    [
        "https://{host}/docs/{entity_id}",
        "http://{host}",
        "https://app.example.com{path}",  # ".evil.example" makes the host app.example.com.evil.example
        "https://{sub}.example.com/docs/",
        "https://app.example.com:{port}/",
        "https://{user}@app.example.com/",
        "//{host}/docs/",  # scheme-relative: the host is the field's
        "/\\{host}/docs/",  # browsers read "/\" as "//"
    ],
)
def test_a_field_in_the_scheme_or_host_is_refused_naming_the_setting(settings, url):
    with pytest.raises(ImproperlyConfigured) as raised:
        configure(settings, url)
    message = str(raised.value)
    assert message.startswith("SLUICE_KINDS['doc.changed']['url'] has a field in its scheme and host")
    assert "only the path, query and fragment may name them" in message


@pytest.mark.parametrize(
    "url",
    [
        "https://app.example.com/docs/{entity_id}",
        "https://app.example.com/{board}/tasks/{entity_id}?from={kind}#c-{comment}",
        "https://app.example.com?doc={entity_id}",
        "https://app.example.com#{entity_id}",
        "https://app.example.com\\{entity_id}",
        "/docs/{entity_id}/",
        "/{board}/",
        "//cdn.example.com/{entity_id}",
        "",
    ],
)
def test_fields_after_the_host_are_allowed(settings, url):
    assert configure(settings, url).kinds["doc.changed"].url == url


def test_a_field_in_the_path_cannot_reach_the_host():
    """What the path may hold: each value is quoted, so a "/" or "@" in it never ends the path or starts a host."""
    url = link("/{board}/x", {"entity_id": "e", "kind": "k"}, {"board": "/evil.example/@x"})
    assert url == "/%2Fevil.example%2F%40x/x"
