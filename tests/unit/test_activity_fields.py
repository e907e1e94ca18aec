"""The activity log's entry: one owner of its fields, round-tripped through a real stream; SLUICE_ACTIVITY resolved."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from pipeline import activity_fields
from pipeline.activity_fields import Entry
from pipeline.conf.activity import activity
from pipeline.redis import keys


def test_an_entry_round_trips_through_a_stream(redis_client):
    entry = Entry("7", "task.comment", "t1", "abc", "routine", "folded", "quiet", "1764000000.5", '[7,"k","t1"]', "Hi")
    activity_fields.add(redis_client, entry, 1000)
    [(stream_id, fields)] = redis_client.xrange(keys.activity())
    assert activity_fields.decode(fields) == entry
    assert set(fields) == {name.encode() for name in activity_fields.encode(entry)}
    assert abs(activity_fields.stream_time(stream_id) - redis_client.time()[0]) < 5


def test_empty_fields_are_left_out_and_read_back_empty():
    entry = Entry("7", "k", "e", "n", "critical", "sent", channel="email", provider="ses")
    wire = activity_fields.encode(entry)
    assert set(wire) == {"u", "k", "e", "n", "c", "o", "ch", "p"}
    assert activity_fields.decode({name.encode(): value.encode() for name, value in wire.items()}) == entry


def test_wire_names_are_distinct_and_every_field_has_one():
    assert set(activity_fields.FIELDS) == set(Entry._fields)
    assert len(set(activity_fields.FIELDS.values())) == len(activity_fields.FIELDS)
    assert len(set(activity_fields.OUTCOMES)) == len(activity_fields.OUTCOMES)


@pytest.mark.parametrize(
    ("payload", "title"),
    [({"title": "Q3 review"}, "Q3 review"), ({"subject": "Hi"}, "Hi"), ({"title": 3}, ""), ([], ""), (None, "")],
)
def test_the_title_is_all_an_entry_keeps_of_a_payload(payload, title):
    assert activity_fields.title_of(payload) == title
    assert len(activity_fields.title_of({"title": "x" * 500})) == activity_fields.TITLE_MAX


def test_the_settings_default_and_name_a_bad_key():
    conf = activity({})
    assert (conf.enabled, conf.buffer_entries, conf.retention_days) == (True, 100_000, 14)
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_ACTIVITY\['buffer_entries'\] must be an integer >= 100"):
        activity({"buffer_entries": 10})
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_ACTIVITY\['enabled'\] must be True or False"):
        activity({"enabled": "yes"})
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_ACTIVITY\['retention_days'\]"):
        activity({"retention_days": 0})
    with pytest.raises(ImproperlyConfigured, match=r"SLUICE_ACTIVITY has unknown keys \['days'\]"):
        activity({"days": 3})
