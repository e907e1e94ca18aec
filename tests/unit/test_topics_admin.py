"""The topics' admin pages: subscriptions listed and added by staff, fan-out jobs with their progress, read-only."""

import pytest
from django.urls import reverse

from notifications.topics.models import Subscription, TopicFanout

pytestmark = pytest.mark.django_db


def test_the_pages_list_subscriptions_and_jobs_with_their_progress(admin_client, django_user_model):
    ada = django_user_model.objects.create_user("ada", email="ada@example.com")
    Subscription.objects.create(topic="board:b1", user=ada)
    job = TopicFanout.objects.create(
        topic="board:b1", kind="board.updated", klass="background", entity_id="b1", token="t1", subscribers=4, done=1
    )
    page = admin_client.get(reverse("admin:sluice_notifications_subscription_changelist"))
    assert page.status_code == 200
    assert b"board:b1" in page.content
    page = admin_client.get(reverse("admin:sluice_notifications_topicfanout_changelist"))
    assert page.status_code == 200
    assert b"1 of 4 (25 %)" in page.content
    assert admin_client.get(reverse("admin:sluice_notifications_topicfanout_add")).status_code == 403
    detail = admin_client.get(reverse("admin:sluice_notifications_topicfanout_change", args=[job.pk]))
    assert detail.status_code == 200


def test_staff_subscribe_a_user_from_the_admin(admin_client, django_user_model):
    ada = django_user_model.objects.create_user("ada", email="ada@example.com")
    answer = admin_client.post(
        reverse("admin:sluice_notifications_subscription_add"), {"topic": "board:b1", "user": ada.pk}
    )
    assert answer.status_code == 302, answer.content[:2000]
    assert Subscription.objects.filter(topic="board:b1", user=ada).exists()
