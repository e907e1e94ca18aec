"""One Flower per distinct Redis: Flower and `celery inspect` see one broker, so the chart runs a Flower on each
class's Redis that differs from the others' (or the classes listed in flower.classes)."""

import helm_python as helm
import kubernetes_validate
import pytest

from tests.unit.test_chart import FULLNAME, KUBE_VERSION, of_kind, render_objects

AUTH = {"enabled": True, "auth": {"username": "ops", "password": "pw"}}


def flowers(objects):
    """{Deployment name: the class its Flower watches}."""
    found = {}
    for deployment in of_kind(objects, "Deployment"):
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        if container["name"] == "flower":
            command = container["command"]
            found[deployment["metadata"]["name"]] = command[command.index("--class") + 1]
    return found


def test_one_redis_one_flower():
    objects = render_objects({"flower": AUTH})
    assert flowers(objects) == {f"{FULLNAME}-flower": "critical"}
    assert [s["metadata"]["name"] for s in of_kind(objects, "Service") if "flower" in s["metadata"]["name"]] == [
        f"{FULLNAME}-flower"
    ]


def test_a_flower_per_distinct_redis():
    urls = {"critical": "redis://a:6379/0", "routine": "redis://b:6379/0", "background": "redis://b:6379/0"}
    objects = render_objects({"flower": AUTH, "secrets": {"redisUrls": urls}})
    # Background shares routine's Redis: routine's Flower sees it.
    assert flowers(objects) == {f"{FULLNAME}-flower": "critical", f"{FULLNAME}-flower-routine": "routine"}
    services = {s["metadata"]["name"]: s for s in of_kind(objects, "Service")}
    routine = services[f"{FULLNAME}-flower-routine"]
    assert routine["spec"]["selector"]["app.kubernetes.io/component"] == "flower-routine"
    for obj in objects:
        if obj["kind"] in ("Deployment", "Service") and "flower" in obj["metadata"]["name"]:
            kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
    urls["background"] = "redis://c:6379/0"
    objects = render_objects({"flower": AUTH, "secrets": {"redisUrls": urls}})
    assert set(flowers(objects).values()) == {"critical", "routine", "background"}


def test_with_an_existing_secret_the_classes_are_listed():
    values = {"flower": {"enabled": True, "classes": ["critical", "background"]}, "secrets": {"existingSecret": "s"}}
    assert set(flowers(render_objects(values)).values()) == {"critical", "background"}
    with pytest.raises(helm.HelmError, match="classes"):
        render_objects({"flower": {**AUTH, "classes": ["urgent"]}})


def test_no_flower_unless_enabled():
    urls = {"routine": "redis://b:6379/0"}
    assert flowers(render_objects({"secrets": {"redisUrls": urls}})) == {}
