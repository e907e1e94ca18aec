"""PUT /api/preferences/ costs a bounded amount of work: the whole body is checked first, a scope given twice is
refused naming the row, the rows are capped at the scopes there are, the mirror is written once per request, and
each user is rate-limited. Bad input never reaches the database as a 500."""

import json

import pytest

from notifications.models import Preference
from notifications.preferences.views import PUT_BURST, most_rows
from pipeline.conf import sluice_settings
from pipeline.redis import keys

URL = "/api/preferences/"


@pytest.fixture
def signed_in(client, user):
    client.force_login(user)
    return client


def put(client, body):
    return client.put(URL, json.dumps(body), content_type="application/json")


def every_kind(mode="instant"):
    return [{"kind": name, "mode": mode} for name in sorted(sluice_settings().kinds)]


def exec_calls(redis_client):
    stats = redis_client.info("commandstats")
    return stats.get("cmdstat_exec", {}).get("calls", 0)


@pytest.mark.django_db(transaction=True)
def test_one_put_writes_the_users_mirror_once(signed_in, user, redis_client):
    rows = every_kind()
    assert len(rows) > 5
    redis_client.config_resetstat()
    response = put(signed_in, {"preferences": rows, "quiet_hours": {"start": "22:00", "end": "07:00"}})
    assert response.status_code == 200, response.content
    assert exec_calls(redis_client) == 1  # one MULTI/EXEC rewrites the user's hash, however many rows
    assert Preference.objects.filter(user=user).count() == len(rows)
    assert redis_client.hget(keys.preferences(user.pk), "q")


@pytest.mark.django_db
def test_a_scope_given_twice_is_refused_naming_the_row_and_nothing_is_saved(signed_in, user, redis_client):
    assert put(signed_in, {"preferences": [{"mode": "digest"}]}).status_code == 200
    rows = [{"kind": "task.assigned", "mode": "off"}, {"mode": "off"}, {"kind": "task.assigned", "mode": "instant"}]
    response = put(signed_in, {"preferences": rows})
    assert response.status_code == 400
    assert response.json()["field"] == "preferences[2]"
    assert "preferences[0]" in response.json()["detail"]
    assert list(Preference.objects.filter(user=user).values_list("kind", "mode")) == [("", "digest")]


@pytest.mark.django_db
def test_rows_are_capped_at_the_scopes_there_are(signed_in, user, redis_client):
    rows = [{"kind": f"k{i}", "mode": "off"} for i in range(most_rows() + 1)]
    response = put(signed_in, {"preferences": rows})
    assert (response.status_code, response.json()["field"]) == (400, "preferences")
    assert "scopes" in response.json()["detail"]


@pytest.mark.django_db
def test_a_bad_row_late_in_the_body_saves_nothing_before_it(signed_in, user, redis_client):
    rows = [*every_kind(), {"kind": "no.such.kind", "mode": "off"}]
    response = put(signed_in, {"preferences": rows})
    assert (response.status_code, response.json()["field"]) == (400, f"preferences[{len(rows) - 1}].kind")
    assert not Preference.objects.exists()


@pytest.mark.django_db
def test_each_user_is_rate_limited(signed_in, user, redis_client):
    for _ in range(PUT_BURST):
        assert put(signed_in, {"preferences": []}).status_code == 200
    response = put(signed_in, {"preferences": []})
    assert (response.status_code, response.json()["error"]) == (429, "rate_limited")
    assert int(response["Retry-After"]) >= 1


@pytest.mark.django_db
@pytest.mark.parametrize("field", ["start", "end"])
def test_a_time_with_an_offset_is_a_400(signed_in, user, redis_client, field):
    quiet = {"start": "22:00", "end": "07:00"} | {field: "22:30+05:00"}
    response = put(signed_in, {"quiet_hours": quiet})
    assert (response.status_code, response.json()["field"]) == (400, f"quiet_hours.quiet_{field}"), response.content
    assert "offset" in response.json()["detail"]


@pytest.mark.django_db
@pytest.mark.expected_errors("Service Unavailable: /api/preferences/")
def test_redis_down_is_a_503_and_nothing_is_saved(signed_in, user, redis_client, settings):
    settings.SLUICE_REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens on port 1
    response = put(signed_in, {"preferences": [{"mode": "off"}]})
    assert (response.status_code, response.json()["error"]) == (503, "unavailable")
    assert not Preference.objects.exists()
