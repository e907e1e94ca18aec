"""The low findings of the review of the new edges: secrets kept out of error text, one service namespace per
service, the Redis-backed admin pages' row URLs, one log line per burst of refused folds, and 5xx in the logs."""

import dataclasses
import logging
import os
import subprocess
import sys

import pytest
from django.core.exceptions import ImproperlyConfigured

from notifications import Rejected, notify
from notifications.channels.base import Message, PermanentSendError, TransientSendError
from notifications.channels.http_provider import HttpProviderChannel
from notifications.ingest.models import service_slug
from pipeline.redis.addresses import describe_unchecked, parse
from sluice_tools.bench.standin import ProviderStandIn
from sluice_tools.processes import ROOT

TOKEN = "ya29.secret-oauth-token"


def token_with_a_newline():
    return {"Authorization": f"Bearer {TOKEN}\n"}


def token_with_a_line_break_inside():
    return {"Authorization": f"Bearer {TOKEN}\r\nX-Injected: 1"}


@pytest.mark.parametrize(
    "url",
    ["redis://sluice:pa/ss?wd#1@redis.internal:6379/0", "redis://sluice:12/ab@redis.internal:6379/0"],
)
def test_a_password_with_an_unencoded_slash_is_never_printed(url):
    assert "pa/ss" not in describe_unchecked(url)
    assert "12/ab" not in describe_unchecked(url)
    with pytest.raises(ImproperlyConfigured) as bad:
        parse(url)
    assert "pa" not in str(bad.value).replace("password", "")
    assert "ab@" not in str(bad.value)


def test_every_sentinels_password_is_masked():
    url = "sentinel://:pw-one@h1:26379/0?master_name=m&sentinel_password=sp;sentinel://:pw-two@h2:26379"
    shown = describe_unchecked(url)
    assert "pw-one" not in shown
    assert "pw-two" not in shown
    assert "sp;" not in shown


def provider(auth, url="http://127.0.0.1:9/send"):
    body = {"id": "{id}", "to": "{recipient}"}
    return HttpProviderChannel(
        "sms", url=url, recipient="payload.to", body=body, auth=f"tests.integration.test_low_findings.{auth}"
    )


def message():
    return Message(
        id="n1", channel="sms", kind="k", klass="critical", user_id=1, entity_id="e", subject="", body="b",
        payload={"to": "+15550100"},
    )  # fmt: skip


def test_a_token_with_a_line_break_is_refused_without_quoting_it():
    with pytest.raises(TransientSendError) as refused:
        provider("token_with_a_line_break_inside").send(message())
    assert "'Authorization' header" in str(refused.value)
    assert TOKEN not in str(refused.value)


def test_a_tokens_trailing_newline_is_trimmed_not_quoted():
    with ProviderStandIn("sms") as standin:
        provider("token_with_a_newline", standin.url).send(message())  # http.client refused the header, quoting it
    assert standin.accepted_ids() == ["n1"]


def test_distinct_services_never_share_a_namespace():
    names = ["Рассылка", "Уведомления", "Rechnungsstellung", "Rechnungsstellüng", "billing.v2", "billing-v2"]
    slugs = [service_slug(name) for name in names]
    assert len(set(slugs)) == len(names), slugs
    assert service_slug("Billing API") == "billing-api"  # a plain name keeps its plain slug


@pytest.mark.django_db
@pytest.mark.parametrize("model", ["deadletter", "provider"])
@pytest.mark.parametrize("view", ["change", "delete", "history"])
def test_the_redis_pages_row_urls_are_404_not_500(admin_client, model, view):
    response = admin_client.get(f"/admin/sluice_notifications/{model}/x1/{view}/")
    assert response.status_code == 404
    assert admin_client.get(f"/admin/sluice_notifications/{model}/").status_code == 200


@pytest.mark.expected_errors("the fold store is full")
def test_a_burst_of_refused_folds_is_logged_once(settings, redis_client, user, caplog):
    settings.SLUICE_QUEUES = {"routine": {"capacity": 1}, "background": {"capacity": 1}}
    settings.SLUICE_DIGEST = {"max_fold_keys": 1, "max_fold_bytes": 1_000_000}
    redis_client.lpush("routine", "occupied")
    others = [type(user).objects.create_user(f"u{n}") for n in range(30)]
    notify(user, "task.comment", entity_id="e")  # the one key the store may hold
    with caplog.at_level(logging.ERROR, logger="sluice.admission"):
        for other in others:
            with pytest.raises(Rejected):
                notify(other, "task.comment", entity_id="e")
    refused = [r for r in caplog.records if "fold store is full" in r.getMessage()]
    assert len(refused) == 1


def test_sluices_own_settings_log_5xx():
    script = (
        "import django, logging; django.setup(); "
        "logging.getLogger('django.request').error('Internal Server Error: /api/x/')"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "settings", "DJANGO_SECRET_KEY": "s" * 50}
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert "ERROR django.request Internal Server Error: /api/x/" in done.stderr


def test_only_the_listed_kinds_may_name_an_sms_recipient_in_the_payload():
    with ProviderStandIn("sms") as standin:
        channel = HttpProviderChannel(
            "sms", url=standin.url, recipient="payload.to", body={"id": "{id}", "to": "{recipient}"},
            payload_recipient_kinds=["k"],
        )  # fmt: skip
        channel.send(message())  # kind "k" is listed
        with pytest.raises(PermanentSendError, match="may not name its recipient"):
            channel.send(dataclasses.replace(message(), id="n2", kind="marketing.blast"))
    assert standin.accepted_ids() == ["n1"]
