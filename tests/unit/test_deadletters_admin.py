"""Dead letters in the admin and on the command line: listed with filters, replayed or discarded, by permission."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from pipeline.broker import deadletters

URL = "/admin/sluice_notifications/deadletter/"


def letter(n, reason="permanent", kind="task.comment", klass="routine"):
    kwargs = {"notification_id": f"notification-{n}", "kind": kind, "user_id": 1, "entity_id": f"e{n}", "payload": {}}
    return deadletters.add(f"sluice.send.{klass}", klass, kwargs, reason, f"error {n}", 1, ["email"])


@pytest.fixture
def letters(redis_client):
    return [letter(1), letter(2, reason="retries_exhausted"), letter(3, kind="board.updated", klass="background")]


def test_staff_with_view_permission_sees_the_list_filtered(client, staff, letters):
    client.force_login(staff("viewer", "view_deadletter"))
    page = client.get(URL).content.decode()
    # Ids no random token on the page (CSRF, the bell's) could contain by chance.
    assert all(f"notification-{n}" in page for n in (1, 2, 3))
    assert "Replay selected" not in page  # no change permission, no replay
    filtered = client.get(URL, {"reason": "retries_exhausted"}).content.decode()
    assert "notification-2" in filtered
    assert "notification-1" not in filtered


def test_staff_without_permission_is_refused(client, staff, letters):
    client.force_login(staff("nobody"))
    assert client.get(URL).status_code == 403


def test_replay_needs_change_and_discard_needs_delete(client, staff, letters, redis_client):
    client.force_login(staff("viewer", "view_deadletter"))
    assert client.post(URL, {"action": "replay", "ids": [letters[0].id]}).status_code == 403
    client.force_login(staff("operator", "view_deadletter", "change_deadletter"))
    assert client.post(URL, {"action": "replay", "ids": [letters[0].id]}).status_code == 302
    assert redis_client.llen("routine") == 1
    assert deadletters.size() == 2
    assert client.post(URL, {"action": "discard", "ids": [letters[1].id]}).status_code == 403
    client.force_login(staff("cleaner", "view_deadletter", "delete_deadletter"))
    assert client.post(URL, {"action": "discard", "ids": [letters[1].id]}).status_code == 302
    assert [entry.notification_id for entry in deadletters.entries()] == ["notification-3"]


def test_command_lists_replays_and_discards_by_filter(letters, redis_client):
    out = StringIO()
    call_command("deadletters", "list", "--json", "--kind", "task.comment", stdout=out)
    listed = [json.loads(line) for line in out.getvalue().splitlines()]
    assert sorted(entry["notification_id"] for entry in listed) == ["notification-1", "notification-2"]
    assert all("kwargs" not in entry for entry in listed)  # the payload stays out of the listing
    out = StringIO()
    call_command("deadletters", "replay", "--reason", "permanent", "--class", "routine", stdout=out)
    assert "replayed 1;" in out.getvalue()
    assert redis_client.llen("routine") == 1
    with pytest.raises(CommandError, match="--yes"):
        call_command("deadletters", "discard", stdout=StringIO())
    call_command("deadletters", "discard", "--yes", "--class", "background", stdout=StringIO())
    assert [entry.notification_id for entry in deadletters.entries()] == ["notification-2"]


def test_command_replays_only_letters_older_than_asked(letters, redis_client):
    out = StringIO()
    call_command("deadletters", "replay", "--older-than", "1h", stdout=out)
    assert "replayed 0;" in out.getvalue()
    with pytest.raises(CommandError, match="duration"):
        call_command("deadletters", "list", "--older-than", "soon")
