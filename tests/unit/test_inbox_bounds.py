"""What an inbox row keeps of a payload: the whole payload within the bound; past it, every field with its strings
shortened alike; past that, its largest top-level fields dropped. The body keeps BODY_CHARS characters."""

import pytest

from notifications.inbox.bounds import BODY_CHARS, _shortened, body, fitted, size


def test_a_payload_within_the_bound_is_kept_as_it_is():
    payload = {"title": "Memo", "tags": ["a", "b"], "n": 1}
    assert fitted(payload, size(payload)) is payload


@pytest.mark.parametrize("limit", [60, 200, 1000, 2048])
def test_strings_are_shortened_alike_to_the_longest_length_that_fits(limit):
    payload = {"title": "t" * 5000, "nested": {"text": "é" * 5000, "list": ["x" * 900, "short"]}, "n": 3}
    kept = fitted(payload, limit)
    assert size(kept) <= limit
    assert set(kept) == set(payload)
    assert kept["n"] == 3
    assert set(kept["nested"]) == {"text", "list"}
    title = kept["title"]
    assert title == "" or (title.endswith("…") and "t" * (len(title) - 1) == title[:-1])
    assert len(kept["nested"]["text"]) == len(title)  # every long string is cut to the same length
    assert kept["nested"]["list"][1] == ("short" if len(title) >= 5 else kept["nested"]["list"][1])
    # The longest length that fits: every string one character longer would not.
    assert size(_shortened(payload, len(title) + 1, 0)) > limit


def test_a_payload_whose_structure_alone_is_over_the_bound_loses_its_largest_fields_first():
    payload = {"numbers": list(range(500)), "title": "Memo", "n": 1}
    kept = fitted(payload, 100)
    assert size(kept) <= 100
    assert kept == {"title": "Memo", "n": 1}


def test_a_body_keeps_its_first_characters():
    assert body("short") == "short"
    long = body("word " * 1000)
    assert len(long) <= BODY_CHARS
    assert long.endswith("…")
    assert long.startswith("word word")
