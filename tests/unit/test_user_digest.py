"""One digest per user: the per-kind settings, the claim of whole users, the grouping, and the rendering."""

import json

import pytest
from django.core.exceptions import ImproperlyConfigured

from digest.flush import run_flush
from digest.user_claims import claim_users
from notifications import email_layout, user_digest
from pipeline.conf import sluice_settings
from pipeline.redis import keys
from tests.digest_helpers import fold, published

pytestmark = pytest.mark.django_db  # the flush rebuilds the preferences' mirror from the database


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("SLUICE_KINDS", {"digest_group": "users"}, r"SLUICE_KINDS\['k'\]\['digest_group'\] must be one of"),
        ("SLUICE_KINDS", {"url": 42}, r"SLUICE_KINDS\['k'\]\['url'\] must be a URL template"),
        ("SLUICE_KINDS", {"url": "https://x/{payload.id}"}, r"SLUICE_KINDS\['k'\]\['url'\] names fields"),
        ("SLUICE_DIGEST", {"max_items": 0}, r"SLUICE_DIGEST\['max_items'\] must be an integer >= 1"),
        ("SLUICE_DIGEST", {"max_items": 201}, r"SLUICE_DIGEST\['max_items'\] must be at most 200"),
    ],
)
def test_a_bad_digest_setting_names_its_exact_key(settings, name, value, words):
    if name == "SLUICE_KINDS":
        settings.SLUICE_KINDS = {"k": {"class": "routine", "channels": ["email"], **value}}
    else:
        settings.SLUICE_DIGEST = value
    with pytest.raises(ImproperlyConfigured, match=words):
        sluice_settings()


def test_defaults_group_per_user_with_20_items(settings):
    conf = sluice_settings()
    assert conf.digest.max_items == 20
    assert {kind.digest_group for kind in conf.kinds.values()} == {"user"}


def test_a_claim_takes_whole_users_whatever_their_ids(redis_client):
    # Ids that share a prefix, or hold a quote or a comma, never mix: a user's members share '[<user>,' only.
    users = ["1", 1, 12, 'a"b', "a,b", "a"]
    for user in users:
        for entity in ("x", "y", "z"):
            fold(user, entity_id=entity)
    seen = []
    while members := claim_users(f"f{len(seen)}", 1, 100, 60, redis_client):
        seen.append(members)
    assert len(seen) == len(users)
    owners = [{json.loads(m)[0] for m in members} for members in seen]
    assert sorted((len(o), len(m)) for o, m in zip(owners, seen, strict=True)) == [(1, 3)] * len(users)
    assert sorted(map(repr, (o.pop() for o in owners))) == sorted(map(repr, users))
    assert redis_client.zcard(keys.pending()) == 0
    assert redis_client.zcard(keys.digest_staged()) == 0


def test_a_key_held_again_after_staging_stays_pending(redis_client):
    fold(1, entity_id="x")
    fold(1, entity_id="y")
    held = keys.fold_member(1, "task.comment", "y")
    claim_users("f0", 0, 0, 60, redis_client)  # stages both, claims nothing
    redis_client.zadd(keys.pending(), {held: 4_000_000_000})  # a new event under quiet hours holds it
    assert claim_users("f1", 10, 10, 60, redis_client) == [keys.fold_member(1, "task.comment", "x")]
    assert redis_client.zrange(keys.pending(), 0, -1) == [held.encode()]


def test_kinds_grouped_by_kind_or_entity_stay_on_their_own(redis_client, settings):
    settings.SLUICE_KINDS = {
        "a": {"class": "routine", "channels": ["email"]},
        "b": {"class": "routine", "channels": ["email"]},
        "own": {"class": "routine", "channels": ["email"], "digest_group": "kind"},
        "single": {"class": "routine", "channels": ["email", "sms"], "digest_group": "entity"},
    }
    for kind in ("a", "b", "own", "single"):
        for entity in ("x", "y"):
            fold(7, kind=kind, entity_id=entity)
    assert run_flush("test") == 1 + 1 + 2
    messages = published(redis_client)
    digests = sorted(
        (m["digest"]["group"], sorted(i["kind"] for i in m["digest"]["items"])) for m in messages if "digest" in m
    )
    assert digests == [("own", ["own", "own"]), ("user", ["a", "a", "b", "b"])]
    singles = sorted((m["kind"], m["entity_id"]) for m in messages if "digest" not in m)
    assert singles == [("single", "x"), ("single", "y")]


def test_a_digest_lists_max_items_and_counts_the_rest(redis_client, settings):
    settings.SLUICE_DIGEST = {"max_items": 3}
    for n in range(5):
        for _ in range(n + 1):
            fold(1, entity_id=f"e{n}", payload={"title": f"T{n}"})
    run_flush("test")
    [message] = published(redis_client)
    digest = message["digest"]
    assert [(i["entity_id"], i["count"]) for i in digest["items"]] == [("e4", 5), ("e3", 4), ("e2", 3)]
    assert (digest["more"], digest["more_events"], message["count"]) == (2, 3, 15)


def item(title, count, kind="task.comment", entity="e1"):
    return {"kind": kind, "entity_id": entity, "count": count, "payload": {"title": title}, "grain": "entity"}


def test_rendering_plurals_more_html_and_links(settings):
    settings.SLUICE_KINDS = {"task.comment": {"class": "routine", "channels": ["email"], "url": "/t/{entity_id}"}}
    settings.SLUICE_SITE_URL = "https://app.example.com"
    digest = {
        "group": "user",
        "items": [item("Tom & <Jerry>", 1, entity="a b"), item("Budget", 3)],
        "more": 1,
        "more_events": 2,
    }
    rendered = user_digest.render(digest, None, sluice_settings().kinds)
    assert rendered.subject == "6 updates in your digest"
    assert "- Tom & <Jerry>: 1 update\n  https://app.example.com/t/a%20b" in rendered.body
    assert "- Budget: 3 updates" in rendered.body
    assert "and 1 more (2 updates)" in rendered.body
    html = email_layout.render(rendered.body, [user_digest.HTML_TEMPLATE], rendered.context).html
    assert '<a class="sluice-item-title" href="https://app.example.com/t/a%20b"' in html
    assert "Tom &amp; &lt;Jerry&gt;</a>" in html
    assert "<Jerry>" not in html
    # The items as data, for a channel that builds its own text or blocks.
    assert [(i.kind, i.entity_id, i.count, i.title, i.url) for i in rendered.items] == [
        ("task.comment", "a b", 1, "Tom & <Jerry>", "https://app.example.com/t/a%20b"),
        ("task.comment", "e1", 3, "Budget", "https://app.example.com/t/e1"),
    ]
    assert rendered.items[1].payload == {"title": "Budget"}


def test_a_long_title_is_cut_and_a_missing_link_field_gives_no_link(settings):
    settings.SLUICE_KINDS = {"task.comment": {"class": "routine", "channels": ["email"], "url": "/t/{board}"}}
    digest = {"group": "user", "items": [item("x" * 5000, 2)], "more": 0, "more_events": 0}
    rendered = user_digest.render(digest, None, sluice_settings().kinds)
    assert len(rendered.body) < 400
    assert "/t/" not in rendered.body
    html = email_layout.render(rendered.body, [user_digest.HTML_TEMPLATE], rendered.context).html
    assert "/t/" not in html
    assert len(rendered.items[0].title) == user_digest.MAX_TITLE


def test_a_step_needs_room_for_all_its_messages(redis_client, settings):
    settings.SLUICE_QUEUES = {"background": {"capacity": 2}, "routine": {"capacity": 3}}
    for entity in ("b1", "b2", "b3"):
        fold(5, kind="board.updated", entity_id=entity)  # a background key: its own message each
    for entity in ("t1", "t2"):
        fold(6, kind="task.assigned", entity_id=entity)  # two keys on email and push: two digests, one step
    redis_client.rpush("routine", "busy-1", "busy-2")  # one slot left: not enough for the step's two messages
    run_flush("test")
    assert redis_client.llen("background") == 2  # never past its capacity
    assert redis_client.llen("routine") == 2
    assert redis_client.zcard(keys.pending()) == 1 + 2
    redis_client.delete("routine", "background")
    run_flush("test")
    assert sorted(m["channels"] for m in published(redis_client)) == [["email"], ["push"]]
    assert redis_client.zcard(keys.pending()) == 0
