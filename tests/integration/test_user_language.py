"""A recipient's language and zone: a Russian user's digest, sent by a real worker, comes out in Russian with the
plural forms right for 1, 2, 5 and 21 updates and its times in their zone; so do their inbox items and the inbox
page. The language comes from the host (SLUICE_USER_LANGUAGE), the zone from the user's settings."""

import re
from datetime import datetime
from zoneinfo import ZoneInfo

import pytest
from celery.contrib.testing.worker import start_worker
from django.test import Client

from digest.flush import run_flush
from notifications import Outcome, notify, preferences
from notifications.inbox.models import InboxItem
from notifications.models import NotificationSettings
from pipeline.celery import app
from tests.waiting import settled, wait_for

MOSCOW = ZoneInfo("Europe/Moscow")
COUNTS = (1, 2, 5, 21)


@pytest.fixture
def russian(settings, redis_client, locmem_channels, django_user_model):
    settings.SLUICE_USER_LANGUAGE = "tests.languages.language_of"
    settings.SLUICE_SITE_URL = "https://app.example.com"
    settings.SLUICE_CHANNELS = {
        "email": {"backend": "notifications.channels.locmem.LocmemEmailChannel"},
        "inbox": {"backend": "notifications.inbox.channel.InboxChannel"},
    }
    settings.SLUICE_KINDS = {
        "doc.comment": {"class": "routine", "channels": ["email", "inbox"], "title": "Комментарии"}
    }
    ivan = django_user_model.objects.create_user("ivan", email="ivan@example.com", first_name="Иван")
    NotificationSettings.objects.create(user=ivan, timezone="Europe/Moscow")
    preferences.set(ivan, mode="digest")
    return ivan


def moscow_time(seconds):
    return datetime.fromtimestamp(seconds, MOSCOW).strftime("%-H:%M")


@pytest.mark.django_db(transaction=True)
@pytest.mark.timeout(60)
def test_a_russian_users_digest_and_inbox_items_are_in_russian_with_times_in_their_zone(russian, locmem_channels):
    ivan = russian
    for count in COUNTS:
        for n in range(count):
            outcome = notify(ivan, "doc.comment", entity_id=f"e{count}", payload={"title": f"Задача {count}", "n": n})
            assert outcome == Outcome.FOLDED
    with start_worker(
        app, pool="threads", concurrency=1, perform_ping_check=False, queues=["routine"], loglevel="WARNING"
    ):
        run_flush("test")  # publishes the digest and the four inbox messages in one step
        # Redis only while the worker writes: an in-memory SQLite database locks its tables against a reader.
        wait_for(lambda: locmem_channels and settled("routine"), what="the digest and every inbox send acked")
    assert InboxItem.objects.filter(user=ivan).count() == 4
    [digest] = [m for m in locmem_channels if m.channel == "email"]
    assert digest.language == "ru"
    assert digest.subject == "29 обновлений в вашей сводке"
    assert digest.body.startswith("Здравствуйте, Иван!\nВот что произошло, в 4 местах:")
    lines = {
        item.count: line
        for item in digest.items
        for line in digest.body.splitlines()
        if f"Задача {item.count}:" in line
    }
    assert [lines[count].split(" (")[0] for count in (21, 5, 2, 1)] == [
        "- Задача 21: 21 обновление",
        "- Задача 5: 5 обновлений",
        "- Задача 2: 2 обновления",
        "- Задача 1: 1 обновление",
    ]
    for item in digest.items:
        # When its latest event happened, in Moscow (UTC+3), in Russian: "последнее — 3 декабря 2026 г. 16:50".
        shown = re.search(r"\(последнее — (\d+ \w+ \d{4} г\. \d+:\d\d)\)", lines[item.count])[1]
        assert shown.endswith(" " + moscow_time(item.last_seen)), (shown, item.last_seen)
    assert "Отписаться: https://app.example.com/api/u/" in digest.body
    assert '<html lang="ru">' in digest.html
    assert "21 обновление</span>" in digest.html
    titles = dict(InboxItem.objects.filter(user=ivan).values_list("count", "title"))
    assert titles == {
        1: "Комментарии: Задача 1",
        2: "2 обновления: «Задача 2»",
        5: "5 обновлений: «Задача 5»",
        21: "21 обновление: «Задача 21»",
    }
    client = Client()
    client.force_login(ivan)
    page = client.get("/api/pages/inbox/").content.decode()
    assert "4 непрочитанных" in page
    newest = InboxItem.objects.filter(user=ivan).order_by("-pk").first()
    local = newest.happened_at.astimezone(MOSCOW)
    assert f"{local.day} " in page
    assert f"г. {local.strftime('%-H:%M')}</time>" in page
