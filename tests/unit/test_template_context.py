"""What a template receives: the recipient user, loaded only when the template uses it; and sluice.W003 when a kind's
template exists only under the dotted spelling Sluice does not read."""

import pytest

from notifications.delivery.messages import messages_of
from notifications.host_checks import check_template_spelling
from notifications.kinds import get_kind
from notifications.render import recipient, render
from pipeline.sending.endings import Attempt

KINDS = {"weekly.summary": {"class": "routine", "channels": ["email"]}}


@pytest.fixture
def templates(settings, tmp_path, locmem_channels):
    """A template folder of the host's, and a kind whose name has a dot."""
    settings.SLUICE_KINDS = KINDS
    engine = settings.TEMPLATES[0]
    # Uncached loaders: each test writes its templates as it goes.
    loaders = ["django.template.loaders.filesystem.Loader", "django.template.loaders.app_directories.Loader"]
    options = {**engine.get("OPTIONS", {}), "loaders": loaders}
    settings.TEMPLATES = [{**engine, "DIRS": [str(tmp_path)], "APP_DIRS": False, "OPTIONS": options}]
    (tmp_path / "sluice" / "digest").mkdir(parents=True)

    def write(name, text):
        (tmp_path / name).write_text(text)

    return write


def attempt(notification_id, user_id, **kwargs):
    """The send attempt of one weekly.summary event."""
    event = {"notification_id": notification_id, "kind": "weekly.summary", "user_id": user_id, "entity_id": "e1"}
    return Attempt("sluice.send.routine", notification_id, {**event, "payload": {}, **kwargs})


def test_the_recipient_is_in_the_context_of_an_instant_and_a_digest_message(templates, django_user_model):
    templates("sluice/weekly_summary.txt", "Hi {{ user.first_name }}\n{{ count }} for {{ user.email }}")
    templates("sluice/digest/weekly_summary.txt", "{{ count }} news, {{ user.first_name }}\nbody")
    user = django_user_model.objects.create_user("hana", email="hana@example.com", first_name="Hana")
    _kind, [instant] = messages_of(attempt("n1", user.pk, channels=["email"]))
    assert (instant.subject, instant.body) == ("Hi Hana", "1 for hana@example.com")
    _kind, [digest] = messages_of(attempt("n2", user.pk, count=4, channels=["email"]))
    assert digest.subject == "4 news, Hana"


def test_the_user_is_loaded_only_when_the_template_uses_it(templates, django_user_model, django_assert_num_queries):
    user = django_user_model.objects.create_user("hana", first_name="Hana")
    templates("sluice/weekly_summary.txt", "{{ kind }}\nno user here")
    with django_assert_num_queries(0):
        render(get_kind("weekly.summary"), {"kind": "weekly.summary", "user": recipient(user.pk)})
    templates("sluice/digest/weekly_summary.txt", "{{ user.first_name }}\n")
    with django_assert_num_queries(1):
        assert render(get_kind("weekly.summary"), {"user": recipient(user.pk)}, digest=True)[0] == "Hana"


def test_a_gone_user_renders_empty(templates, db):
    templates("sluice/weekly_summary.txt", "[{{ user.first_name }}]\n")
    assert render(get_kind("weekly.summary"), {"user": recipient(10**9)})[0] == "[]"


def test_a_template_under_the_dotted_spelling_is_a_warning(templates):
    assert check_template_spelling() == []
    templates("sluice/digest/weekly.summary.txt", "ignored\n")
    [warning] = check_template_spelling()
    assert warning.id == "sluice.W003"
    assert "sluice/digest/weekly.summary.txt exists, but Sluice reads sluice/digest/weekly_summary.txt" in warning.msg
    templates("sluice/digest/weekly_summary.txt", "read\n")
    assert check_template_spelling() == []  # both there: the right one is read
