"""SLUICE_INBOX and a kind's url and escalate options: defaults, and a bad value names its exact key; the exporter's
inbox families."""

import dataclasses

import pytest
from django.core.exceptions import ImproperlyConfigured

from pipeline.conf import sluice_settings
from pipeline.observe import inbox_metrics

INBOX = {"backend": "notifications.inbox.channel.InboxChannel"}
EMAIL = {"backend": "notifications.channels.locmem.LocmemChannel"}


@pytest.fixture
def channels(settings):
    settings.SLUICE_CHANNELS = {"inbox": INBOX, "email": EMAIL}
    return settings


def kind(**options):
    return {"doc.changed": {"class": "routine", "channels": ["inbox"], **options}}


def test_defaults_and_a_valid_kind(channels):
    channels.SLUICE_KINDS = kind(url="/docs/{entity_id}/", escalate={"after_s": 900, "channels": ["email"]})
    conf = sluice_settings()
    assert dataclasses.asdict(conf.inbox) == {"max_items": 500, "retention_days": 90, "max_payload_bytes": 2048}
    assert conf.kinds["doc.changed"].escalate == (900, ("email",))
    assert conf.kinds["doc.changed"].url == "/docs/{entity_id}/"


@pytest.mark.parametrize(
    ("inbox", "named"),
    [
        ({"max_items": 0}, "SLUICE_INBOX['max_items']"),
        ({"retention_days": "30"}, "SLUICE_INBOX['retention_days']"),
        ({"max_payload_bytes": 0}, "SLUICE_INBOX['max_payload_bytes']"),
        ({"max_itmes": 5}, "SLUICE_INBOX has unknown keys"),
        ([], "SLUICE_INBOX must be a dict"),
    ],
)
def test_a_bad_inbox_setting_names_its_key(channels, inbox, named):
    channels.SLUICE_KINDS = kind()
    channels.SLUICE_INBOX = inbox
    with pytest.raises(ImproperlyConfigured) as raised:
        sluice_settings()
    assert named in str(raised.value)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"escalate": {"after_s": 0, "channels": ["email"]}}, "['escalate']['after_s']"),
        ({"escalate": {"after_s": 60}}, "['escalate'] takes exactly"),
        ({"escalate": {"after_s": 60, "channels": ["fax"]}}, "['escalate']['channels'] names channels not in"),
        ({"escalate": {"after_s": 60, "channels": ["inbox"]}}, "cannot name an inbox channel"),
        ({"url": "javascript:alert(1)"}, "['url'] must start with"),
        ({"url": "/docs/{user.id}/"}, "['url'] names fields as"),
    ],
)
def test_a_bad_kind_option_names_its_key(channels, options, named):
    channels.SLUICE_KINDS = kind(**options)
    with pytest.raises(ImproperlyConfigured) as raised:
        sluice_settings()
    assert f"SLUICE_KINDS['doc.changed']{named}" in str(raised.value) or named in str(raised.value)
    assert "SLUICE_KINDS['doc.changed']" in str(raised.value)


def test_escalating_needs_an_inbox_among_the_kinds_channels(channels):
    channels.SLUICE_KINDS = {
        "task.assigned": {"class": "routine", "channels": ["email"], "escalate": {"after_s": 60, "channels": ["email"]}}
    }
    with pytest.raises(ImproperlyConfigured, match="needs an inbox channel"):
        sluice_settings()


def test_the_exporter_families_read_the_counters():
    counters = {
        "inbox_items:doc.changed:created": 2.0,
        "inbox_items:doc.changed:folded": 19.0,
        "inbox_escalations:routine:sent": 40.0,
        "inbox:reads": 60.0,
    }
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in inbox_metrics.collect(counters)
        for sample in family.samples
    }
    assert samples[("sluice_inbox_items_total", (("kind", "doc.changed"), ("result", "folded")))] == 19
    assert samples[("sluice_inbox_escalations_total", (("class", "routine"), ("result", "sent")))] == 40
    assert samples[("sluice_inbox_reads_total", ())] == 60
    assert samples[("sluice_inbox_pruned_total", ())] == 0
