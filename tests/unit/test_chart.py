"""The Helm chart (helm/sluice), rendered by the real Helm engine and checked against Kubernetes' and KEDA's schemas."""

import base64
import copy
import json
import re
from pathlib import Path

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]  # the repository: tests/unit/test_chart.py
CHART = ROOT / "helm" / "sluice"
# The openAPIV3Schema of KEDA 2.20's ScaledObject CRD (keda.sh_scaledobjects.yaml, Apache-2.0), as JSON: a copy
# kept with the tests, as kubernetes-validate keeps Kubernetes' own schemas.
KEDA_SCHEMA = ROOT / "tests" / "schemas" / "keda-2.20-scaledobject-v1alpha1.schema.json"
# KEDA 2.20 supports this Kubernetes; kubernetes-validate ships its schemas.
KUBE_VERSION = "1.33.0"
RELEASE, NAMESPACE = "prod", "notify"
FULLNAME = f"{RELEASE}-sluice"
VARIANTS = {p.name: p for p in sorted((CHART / "ci").glob("*-values.yaml"))}
CASES = ["defaults", *VARIANTS]
CLASSES = ("critical", "routine", "background")
# Custom resources: kubernetes-validate has no schema for them. ScaledObject is checked against
# KEDA's CRD schema below; ServiceMonitor and PrometheusRule get a shape check of their own.
CUSTOM_KINDS = {"ScaledObject", "ServiceMonitor", "PrometheusRule"}


def case_values(case):
    return {} if case == "defaults" else yaml.safe_load(VARIANTS[case].read_text())


def merged_values(case):
    """The values a release of ``case`` would use: the chart's defaults under the case's file."""
    with helm.Chart.load(CHART) as chart:
        return chart.merge_values(case_values(case))


def render(values=None):
    """``{template path: [objects]}`` as ``helm template`` would produce for an install."""
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values=values or {}, name=RELEASE, namespace=NAMESPACE, is_install=True)
    return {
        path: [doc for doc in yaml.safe_load_all(text) if doc]
        for path, text in manifests.items()
        if not path.endswith("NOTES.txt")
    }


_RENDERED = {}


@pytest.fixture(params=CASES)
def case(request):
    return request.param


@pytest.fixture
def objects(case):
    """Every object the chart renders for ``case`` (cached: rendering is the slow part)."""
    if case not in _RENDERED:
        _RENDERED[case] = render(case_values(case))
    return [obj for docs in _RENDERED[case].values() for obj in docs]


def of_kind(objects, kind):
    return [o for o in objects if o["kind"] == kind]


def named(objects, kind, name):
    (found,) = [o for o in of_kind(objects, kind) if o["metadata"]["name"] == name]
    return found


def pod_specs(objects):
    for obj in objects:
        if obj["kind"] in ("Deployment", "Job"):
            yield obj["metadata"]["name"], obj["spec"]["template"]["spec"]


def strict(schema):
    """A copy of a CRD schema that rejects unknown fields.

    The API server prunes unknown fields of a custom resource without a word, so a misspelt
    field would silently vanish; here it fails. Free-form maps (no ``properties``) stay open.
    """
    schema = copy.deepcopy(schema)

    def walk(node):
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node.setdefault("additionalProperties", False)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    schema["properties"]["metadata"] = {"type": "object"}
    return schema


def test_chart_lints_clean(case):
    report = helm.lint(CHART, case_values(case), strict=True, namespace=NAMESPACE, kube_version=f"v{KUBE_VERSION}")
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["errors"] == []
    assert problems == []


def test_one_resource_per_template_file(case):
    if case not in _RENDERED:
        _RENDERED[case] = render(case_values(case))
    crowded = {path: len(docs) for path, docs in _RENDERED[case].items() if len(docs) > 1}
    assert crowded == {}


def test_every_name_comes_from_the_release_fullname(objects, case):
    values = case_values(case)
    # The only names a user gives directly: an existing Secret and ServiceAccount are not rendered.
    assert all(o["metadata"]["name"].startswith(FULLNAME) for o in objects)
    if values.get("secrets", {}).get("existingSecret"):
        assert of_kind(objects, "Secret") == []


def test_objects_validate_against_kubernetes_schemas(objects):
    checked = 0
    for obj in objects:
        if obj["kind"] in CUSTOM_KINDS:
            continue
        kubernetes_validate.validate(obj, KUBE_VERSION, strict=True)
        checked += 1
    assert checked >= 10


def test_scaled_objects_validate_against_kedas_crd_schema(objects, case):
    validator = jsonschema.Draft7Validator(strict(json.loads(KEDA_SCHEMA.read_text())))
    scaled = of_kind(objects, "ScaledObject")
    assert len(scaled) == (0 if case == "keda-disabled-values.yaml" else 3)
    for obj in scaled:
        errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(obj)]
        assert errors == [], obj["metadata"]["name"]


def test_keda_schema_check_rejects_a_misspelt_field():
    validator = jsonschema.Draft7Validator(strict(json.loads(KEDA_SCHEMA.read_text())))
    (good,) = [o for o in of_kind(render_objects(), "ScaledObject") if o["metadata"]["name"].endswith("routine")]
    bad = copy.deepcopy(good)
    bad["spec"]["minReplicas"] = bad["spec"].pop("minReplicaCount")
    assert list(validator.iter_errors(good)) == []
    assert list(validator.iter_errors(bad)) != []


def render_objects(values=None):
    return [obj for docs in render(values).values() for obj in docs]


def test_every_scale_target_is_a_rendered_deployment(objects):
    deployments = {o["metadata"]["name"] for o in of_kind(objects, "Deployment")}
    for obj in of_kind(objects, "ScaledObject"):
        ref = obj["spec"]["scaleTargetRef"]
        assert ref.get("kind", "Deployment") == "Deployment"
        assert ref["name"] in deployments


def test_beat_runs_exactly_one_replica_and_recreates(objects):
    beat = named(objects, "Deployment", f"{FULLNAME}-beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}
    assert not any(
        o["spec"]["scaleTargetRef"]["name"] == beat["metadata"]["name"] for o in of_kind(objects, "ScaledObject")
    )


def test_no_container_runs_without_resource_requests(objects):
    for name, spec in pod_specs(objects):
        for container in spec.get("initContainers", []) + spec["containers"]:
            requests = container.get("resources", {}).get("requests", {})
            assert requests.get("cpu"), f"{name}/{container['name']}"
            assert requests.get("memory"), f"{name}/{container['name']}"


def test_worker_pods_outlast_their_longest_task(objects, case):
    values = merged_values(case)
    longest = values["workers"]["longestTaskSeconds"]
    config = of_kind(objects, "ConfigMap")[0]["data"]
    for klass in CLASSES:
        spec = named(objects, "Deployment", f"{FULLNAME}-worker-{klass}")["spec"]["template"]["spec"]
        grace = spec["terminationGracePeriodSeconds"]
        assert grace > longest
        assert int(config["SLUICE_VISIBILITY_TIMEOUT_S"]) > grace
        assert longest <= int(config["SLUICE_SOFT_SHUTDOWN_S"]) < grace


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"workers": {"longestTaskSeconds": 120}}, "must exceed workers.longestTaskSeconds"),
        ({"config": {"visibilityTimeoutSeconds": 60}}, "visibilityTimeoutSeconds must exceed"),
        ({"config": {"softShutdownSeconds": 10}}, "softShutdownSeconds must be at least"),
    ],
)
def test_unsafe_shutdown_sizing_is_refused(values, message):
    with pytest.raises(helm.HelmError, match=message):
        render(values)


def test_flower_never_renders_without_auth():
    with pytest.raises(helm.HelmError):
        render({"flower": {"enabled": True}})
    with pytest.raises(helm.HelmError):
        render({"flower": {"enabled": True, "auth": {"username": "ops", "password": ""}}})
    objects = render_objects({"flower": {"enabled": True, "auth": {"username": "ops", "password": "pw"}}})
    env = named(objects, "Deployment", f"{FULLNAME}-flower")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert "FLOWER_BASIC_AUTH" in {e["name"] for e in env}


def test_values_schema_is_strict():
    with pytest.raises(helm.HelmError):
        render({"workers": {"routine": {"autoscaling": {"targetLatency": 30}}}})
    with pytest.raises(helm.HelmError):
        render({"keda": {"trigger": "redis"}})
    for floor in ({"targetUtilization": 0}, {"targetUtilization": 1.5}, {"utilization": 0.7}):
        with pytest.raises(helm.HelmError):
            render({"workers": {"routine": {"autoscaling": {"capacityFloor": floor}}}})


def test_scaled_objects_scale_on_windowed_latency_and_a_capacity_floor(objects, case):
    values = merged_values(case)
    window = values["keda"]["latencyWindow"]
    for obj in of_kind(objects, "ScaledObject"):
        klass = obj["metadata"]["name"].rsplit("-", 1)[1]
        pool = values["workers"][klass]
        auto = pool["autoscaling"]
        assert auto["capacityFloor"]["enabled"]  # on in every ci case
        # A third, the scheduled trigger, where it is on: tests/unit/test_chart_scheduled.py.
        latency, floor, *_scheduled = obj["spec"]["triggers"]
        # Latency does not divide across pods (Value); busy slots do (AverageValue).
        assert (latency["name"], latency["metricType"]) == ("latency", "Value")
        assert (floor["name"], floor["metricType"]) == ("busy-slots", "AverageValue")
        assert latency["type"] == floor["type"] == values["keda"]["trigger"]
        per_pod = pool["concurrency"] * auto["capacityFloor"]["targetUtilization"]
        assert obj["spec"]["minReplicaCount"] == auto["minReplicas"]
        assert obj["spec"]["maxReplicaCount"] == auto["maxReplicas"]
        behavior = obj["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
        assert behavior["scaleDown"]["stabilizationWindowSeconds"] > behavior["scaleUp"]["stabilizationWindowSeconds"]
        meta, floor_meta = latency["metadata"], floor["metadata"]
        if latency["type"] == "prometheus":
            assert re.fullmatch(
                rf'max\(max_over_time\(sluice_queue_latency_seconds\{{queue="{klass}".*\}}\[{window}\]\)\)',
                meta["query"],
            )
            assert float(meta["threshold"]) == auto["targetLatencySeconds"]
            assert float(meta["activationThreshold"]) == auto["activationLatencySeconds"]
            assert re.fullmatch(
                rf'sum\(avg_over_time\(sluice_busy_slots\{{queue="{klass}".*\}}\[{window}\]\)\)',
                floor_meta["query"],
            )
            assert float(floor_meta["threshold"]) == pytest.approx(per_pod)
            assert float(floor_meta["activationThreshold"]) == pytest.approx(per_pod)
            assert floor_meta["serverAddress"] == meta["serverAddress"]
            assert floor.get("authenticationRef") == latency.get("authenticationRef")
        else:
            service = named(objects, "Service", f"{FULLNAME}-exporter")
            port = service["spec"]["ports"][0]["port"]
            assert meta["url"] == f"http://{FULLNAME}-exporter.{NAMESPACE}.svc.cluster.local:{port}/scaler/{klass}"
            assert meta["valueLocation"] == "latency_window_max_seconds"
            assert float(meta["targetValue"]) == auto["targetLatencySeconds"]
            assert float(meta["activationTargetValue"]) == auto["activationLatencySeconds"]
            assert floor_meta["url"] == meta["url"]
            assert floor_meta["valueLocation"] == "busy_slots"
            assert float(floor_meta["targetValue"]) == pytest.approx(per_pod)
            assert float(floor_meta["activationTargetValue"]) == pytest.approx(per_pod)


def test_the_capacity_floor_counts_the_slots_the_pods_run():
    objects = render_objects(
        {"workers": {"routine": {"concurrency": 10, "autoscaling": {"capacityFloor": {"targetUtilization": 0.5}}}}}
    )
    routine = named(objects, "ScaledObject", f"{FULLNAME}-worker-routine")
    assert float(routine["spec"]["triggers"][1]["metadata"]["targetValue"]) == pytest.approx(5.0)
    deployment = named(objects, "Deployment", f"{FULLNAME}-worker-routine")
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"] == ["--concurrency", "10"]
    defaults = {k: v["concurrency"] for k, v in merged_values("defaults")["workers"].items() if isinstance(v, dict)}
    assert defaults == {"critical": 4, "routine": 16, "background": 8}  # the pool profiles'


def test_the_capacity_floor_can_be_switched_off():
    objects = render_objects(
        {"workers": {"critical": {"autoscaling": {"capacityFloor": {"enabled": False, "targetUtilization": 0.7}}}}}
    )
    critical = named(objects, "ScaledObject", f"{FULLNAME}-worker-critical")
    # Critical's scheduled trigger stays, on the scheduled slots alone (tests/unit/test_chart_scheduled.py).
    assert [t["name"] for t in critical["spec"]["triggers"]] == ["latency", "scheduled"]
    routine = named(objects, "ScaledObject", f"{FULLNAME}-worker-routine")
    assert [t["name"] for t in routine["spec"]["triggers"]] == ["latency", "busy-slots"]


@pytest.mark.parametrize("args", [["--concurrency", "8"], ["--concurrency=8"], ["-c", "8"]])
def test_concurrency_in_args_is_refused(args):
    # The floor's target counts workers.<class>.concurrency slots; args must not make it lie.
    with pytest.raises(helm.HelmError, match=r"set workers\.routine\.concurrency"):
        render({"workers": {"routine": {"args": args}}})


def test_background_can_scale_to_zero():
    objects = render_objects(case_values("background-scale-to-zero-values.yaml"))
    background = named(objects, "ScaledObject", f"{FULLNAME}-worker-background")
    assert background["spec"]["minReplicaCount"] == 0
    assert float(background["spec"]["triggers"][0]["metadata"]["activationTargetValue"]) > 0
    routine = named(objects, "ScaledObject", f"{FULLNAME}-worker-routine")
    behavior = routine["spec"]["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]
    assert behavior["scaleDown"]["stabilizationWindowSeconds"] == 1800
    assert behavior["scaleDown"]["tolerance"] == "0.15"


def test_without_keda_every_pool_has_fixed_replicas():
    objects = render_objects(case_values("keda-disabled-values.yaml"))
    assert of_kind(objects, "ScaledObject") == []
    routine = named(objects, "Deployment", f"{FULLNAME}-worker-routine")
    assert routine["spec"]["replicas"] == 4
    container = routine["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] + container["args"] == [
        "python",
        "manage.py",
        "worker",
        "routine",
        "--concurrency",
        "8",
    ]


def test_with_keda_the_deployments_leave_replicas_to_the_hpa():
    objects = render_objects()
    for klass in CLASSES:
        assert "replicas" not in named(objects, "Deployment", f"{FULLNAME}-worker-{klass}")["spec"]


def test_settings_split_between_configmap_and_secret():
    objects = render_objects(case_values("metrics-api-values.yaml"))
    config = of_kind(objects, "ConfigMap")[0]["data"]
    secret = of_kind(objects, "Secret")[0]["data"]
    assert set(secret) == {"DATABASE_URL", "REDIS_URL", "DJANGO_SECRET_KEY", "FLOWER_BASIC_AUTH"}
    assert all(secret.values())
    assert config["DJANGO_ALLOWED_HOSTS"] == "sluice.internal,localhost"
    assert json.loads(config["SLUICE_QUEUES"]) == {"routine": {"capacity": 1024}}
    assert not set(secret) & set(config)


def test_a_redis_per_class_goes_into_the_secret_and_every_pod():
    urls = {
        "critical": "redis://:pw@critical-redis:6379/0",
        "routine": "rediss://routine-redis:6380/0",
        "digest": "sentinel://digest-sentinel:26379/0?master_name=digest",
    }
    objects = render_objects({"secrets": {"redisUrls": urls}})
    secret = {k: base64.b64decode(v).decode() for k, v in of_kind(objects, "Secret")[0]["data"].items()}
    assert secret["REDIS_URL_CRITICAL"] == urls["critical"]
    assert secret["REDIS_URL_ROUTINE"] == urls["routine"]
    assert secret["REDIS_URL_DIGEST"] == urls["digest"]
    assert "REDIS_URL_BACKGROUND" not in secret  # background uses REDIS_URL
    config = of_kind(objects, "ConfigMap")[0]["data"]
    assert not [value for value in urls.values() if value in json.dumps(config)]
    for _, spec in pod_specs(objects):
        env = {e["name"]: e for c in spec["containers"] for e in c.get("env", [])}
        for klass in (*CLASSES, "digest"):
            ref = env[f"REDIS_URL_{klass.upper()}"]["valueFrom"]["secretKeyRef"]
            assert ref["key"] == f"REDIS_URL_{klass.upper()}"
            assert ref["optional"] is True


def test_a_class_redis_url_must_be_a_redis_url():
    with pytest.raises(Exception, match="redisUrls"):
        render_objects({"secrets": {"redisUrls": {"critical": "http://nope"}}})
    with pytest.raises(Exception, match="redisUrls"):
        render_objects({"secrets": {"redisUrls": {"urgent": "redis://x:6379/0"}}})


def test_existing_secret_is_referenced_and_not_created():
    objects = render_objects(case_values("existing-secret-values.yaml"))
    assert of_kind(objects, "Secret") == []
    refs = {
        env["valueFrom"]["secretKeyRef"]["name"]
        for _, spec in pod_specs(objects)
        for container in spec["containers"]
        for env in container.get("env", [])
        if "valueFrom" in env
    }
    assert refs == {"sluice-prod"}


def test_migrations_run_as_a_hook():
    (job,) = of_kind(render_objects(), "Job")
    assert job["metadata"]["annotations"]["helm.sh/hook"] == "post-install,pre-upgrade"
    assert job["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "python",
        "manage.py",
        "migrate",
        "--noinput",
    ]


def test_service_monitor_and_alerts_have_the_right_shape():
    objects = render_objects(case_values("prometheus-values.yaml"))
    (monitor,) = of_kind(objects, "ServiceMonitor")
    exporter = named(objects, "Service", f"{FULLNAME}-exporter")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= exporter["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in exporter["spec"]["ports"]}
    (rule,) = of_kind(objects, "PrometheusRule")
    rules = [r for group in rule["spec"]["groups"] for r in group["rules"]]
    assert all({"alert", "expr"} <= r.keys() for r in rules)
    drains = [r for r in rules if r["alert"] == "SluiceDrainTimeOverBudget"]
    assert {r["labels"]["queue"] for r in drains} == set(CLASSES)
    assert all("sluice_drain_time_seconds" in r["expr"] for r in drains)
    assert any('outcome="rejected"' in r["expr"] and 'class="critical"' in r["expr"] for r in rules)
    # Never on raw depth: depth alone says nothing about how long anyone waits.
    assert not any("sluice_queue_depth" in r["expr"] for r in rules)


KEY = re.compile(r"^(\s*)([A-Za-z0-9_-]+):\s*(.*)$")


def test_every_value_is_documented():
    """Each value has a ``# --`` comment on itself or on an enclosing map (helm-docs' rule)."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented, stack = [], []  # stack: (indent, documented)
    for i, line in enumerate(lines):
        match = KEY.match(line)
        if not match or line.lstrip().startswith("-"):
            continue
        indent, key, inline = len(match[1]), match[2], match[3]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        previous = next((p.strip() for p in reversed(lines[:i]) if p.strip()), "")
        documented = previous.startswith("# --") or any(d for _, d in stack)
        following = next((n for n in lines[i + 1 :] if n.strip() and not n.strip().startswith("#")), "")
        is_map = not inline and KEY.match(following) and len(following) - len(following.lstrip()) > indent
        if not is_map and not documented:
            undocumented.append(key)
        stack.append((indent, documented))
    assert undocumented == []


def test_every_secret_is_in_the_secret_and_none_in_the_configmap():
    objects = render_objects(case_values("network-policy-values.yaml"))
    config = of_kind(objects, "ConfigMap")[0]["data"]
    secret = {k: base64.b64decode(v).decode() for k, v in of_kind(objects, "Secret")[0]["data"].items()}
    assert json.loads(secret["SLUICE_CHANNEL_OPTIONS"]) == {"webhook": {"secret": "whsec-not-a-real-one"}}
    assert secret["EMAIL_HOST_PASSWORD"] == "smtp-not-a-real-one"
    for value in secret.values():
        assert value not in json.dumps(config), value
    assert json.loads(config["SLUICE_CHANNELS"])["webhook"]["options"] == {"url": "https://hooks.example.com/sluice"}
    for _, spec in pod_specs(objects):
        env = {e["name"]: e for c in spec["containers"] for e in c.get("env", [])}
        assert env["EMAIL_HOST_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "EMAIL_HOST_PASSWORD"
        assert env["SLUICE_CHANNEL_OPTIONS"]["valueFrom"]["secretKeyRef"]["optional"] is True


@pytest.mark.parametrize(
    "values",
    [
        {"config": {"channels": {"webhook": {"backend": "x", "options": {"url": "u", "secret": "s"}}}}},
        {"config": {"channels": {"sms": {"backend": "x", "options": {"api_key": "k"}}}}},
        {"config": {"extraEnv": {"EMAIL_HOST_PASSWORD": "p"}}},
    ],
)
def test_a_secret_in_config_is_refused(values):
    with pytest.raises(helm.HelmError, match="looks like a secret"):
        render(values)


def test_network_policies_fence_web_and_the_exporter():
    assert of_kind(render_objects(), "NetworkPolicy") == []  # off by default
    objects = render_objects(case_values("network-policy-values.yaml"))
    values = merged_values("network-policy-values.yaml")
    policies = {p["metadata"]["name"]: p["spec"] for p in of_kind(objects, "NetworkPolicy")}
    assert set(policies) == {f"{FULLNAME}-web", f"{FULLNAME}-exporter"}
    for component, port_name in (("web", "http"), ("exporter", "metrics")):
        spec = policies[f"{FULLNAME}-{component}"]
        pods = named(objects, "Deployment", f"{FULLNAME}-{component}")["spec"]["template"]
        assert spec["podSelector"]["matchLabels"].items() <= pods["metadata"]["labels"].items()
        assert spec["policyTypes"] == ["Ingress"]
        (rule,) = spec["ingress"]
        assert rule["from"] == values["networkPolicy"][component]["from"]
        assert rule["ports"] == [{"port": port_name, "protocol": "TCP"}]
        assert port_name in {p["name"] for c in pods["spec"]["containers"] for p in c["ports"]}


def test_the_exporter_binds_every_address_only_in_the_chart():
    container = named(render_objects(), "Deployment", f"{FULLNAME}-exporter")["spec"]["template"]["spec"]
    command = container["containers"][0]["command"]
    assert command[command.index("--host") + 1] == "0.0.0.0"


def test_the_web_tier_runs_threaded_workers_and_https_settings():
    objects = render_objects()
    web = named(objects, "Deployment", f"{FULLNAME}-web")["spec"]["template"]["spec"]["containers"][0]
    assert web["command"] == ["gunicorn", "--config", "python:settings.gunicorn", "settings.wsgi:application"]
    config = of_kind(objects, "ConfigMap")[0]["data"]
    assert config["DJANGO_CSRF_TRUSTED_ORIGINS"] == "https://sluice.example.com"
    assert config["DJANGO_SECURE_PROXY_SSL_HEADER"] == "X-Forwarded-Proto"
    assert config["DJANGO_SECURE_SSL_REDIRECT"] == "1"
    assert config["DJANGO_SECURE_HSTS_SECONDS"] == "31536000"  # an integer, not Helm's 3.1536e+07


def test_a_redis_ca_secret_is_mounted_in_every_pod_that_talks_to_redis():
    objects = render_objects({"secrets": {"redisCaSecret": "redis-ca", "redisUrl": "rediss://r:6380/0"}})
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert deployments
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        volume = next(v for v in pod["volumes"] if v["name"] == "redis-ca")
        assert volume["secret"] == {"secretName": "redis-ca", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
        for container in pod["containers"]:
            mount = next(m for m in container["volumeMounts"] if m["name"] == "redis-ca")
            assert mount == {"name": "redis-ca", "mountPath": "/etc/sluice/redis-ca", "readOnly": True}
    default = render_objects()
    assert not any(
        v["name"] == "redis-ca"
        for o in default
        if o["kind"] == "Deployment"
        for v in o["spec"]["template"]["spec"]["volumes"]
    )
