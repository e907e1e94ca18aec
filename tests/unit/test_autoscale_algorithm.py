"""The simulator's HPA and KEDA loop (sluice_tools.autoscale.hpa) against the worked examples of their documentation.

Each test reproduces one documented example and names where it is:

- K8S: https://kubernetes.io/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale/
  (sections "Algorithm details", "Scaling policies", "Stabilization window", "Tolerance",
  "Default behavior", "Example: limit scale down rate", "Example: disable scale down",
  "Implicit maintenance-mode deactivation")
- WALK: https://kubernetes.io/docs/tasks/run-application/horizontal-pod-autoscale-walkthrough/
- API: the HPAScalingRules reference (autoscaling/v2), field ``stabilizationWindowSeconds``
- KEDA: https://keda.sh/docs/latest/concepts/scaling-deployments/ ("Activating and Scaling thresholds")
  and https://keda.sh/docs/latest/reference/scaledobject-spec/ (``pollingInterval``, ``cooldownPeriod``)
"""

import itertools

import pytest

from sluice_tools.autoscale.hpa import (
    Autoscaler,
    Policy,
    Rules,
    Scaling,
    average_value_replicas,
    utilization_replicas,
    value_replicas,
    within_tolerance,
)

# K8S "Default behavior": what the HPA does when a ScaledObject gives no behaviour.
DEFAULT_UP = Rules(0, (Policy("Percent", 100, 15), Policy("Pods", 4, 15)), "Max")
DEFAULT_DOWN = Rules(300, (Policy("Percent", 100, 15),), "Max")
NO_LIMIT = Rules(0, (Policy("Percent", 1000, 15),))


def scaling(**overrides):
    base = {
        "target": 10.0,
        "activation": 0.0,
        "min_replicas": 1,
        "max_replicas": 100,
        "up": NO_LIMIT,
        "down": Rules(0, (Policy("Percent", 100, 15),)),
        "metric_type": "AverageValue",
    }
    return Scaling(**{**base, **overrides})


def syncs(hpa, metric, start, end, every=15):
    """Reconcile every ``every`` s from ``start`` to ``end``; the replicas after each change, with its time."""
    steps = []
    for now in range(start, end + 1, every):
        if hpa.sync(now, metric=metric, ready=hpa.replicas):
            steps.append((now, hpa.replicas))
    return steps


# The replica calculator


def test_a_ratio_of_two_doubles_the_replicas_and_a_half_halves_them():
    """K8S "Algorithm details": a current metric of 200m against a desired 100m doubles the replicas
    (200.0 / 100.0 == 2.0); 50m halves them (50.0 / 100.0 == 0.5)."""
    assert value_replicas(0.200, 0.100, current=3, ready=3) == 6
    assert value_replicas(0.050, 0.100, current=6, ready=6) == 3
    # AverageValue: "the currentMetricValue is computed by taking the average of the given metric
    # across all Pods"; 3 pods averaging 200m are 600m in all.
    assert average_value_replicas(3 * 0.200, 0.100, current=3) == 6
    assert average_value_replicas(6 * 0.050, 0.100, current=6) == 3


def test_metrics_and_targets_are_milli_quantities():
    """WALK "Appendix: Quantities": "All metrics in the HorizontalPodAutoscaler and metrics APIs are
    specified using a special whole-number notation known in Kubernetes as a quantity ... the
    quantity 10500m would be written as 10.5". KEDA hands its values over in milli-units."""
    # 33.6 busy slots at 11.2 per pod are 33600m / 11200m: exactly 3 pods, not ceil(3.0000000000000004).
    assert 33.6 / 11.2 > 3
    assert average_value_replicas(33.6, 11.2, current=2) == 3
    assert value_replicas(10.5, 10.5, current=3, ready=3) == 3


def test_the_walkthroughs_305_percent_cpu_against_50_percent_makes_one_pod_seven():
    """WALK "Increase load": one php-apache pod (requests 200m) at 305% of its request against a
    50% target; "the deployment was resized to 7 replicas" (ceil(1 × 305 / 50) = 7)."""
    assert utilization_replicas(usage=[610], requests=[200], target_percent=50) == 7
    # Utilization is a whole percentage of the pods' summed requests: 3 pods at 100m of 200m are 50%.
    assert utilization_replicas(usage=[100, 100, 100], requests=[200] * 3, target_percent=50) == 3
    # Through the loop with the default behaviour (K8S "Default behavior": at most 4 pods or 100%
    # per 15 s), the same ratio takes two reconciles while the new pods start: 1 -> 5 -> 7.
    hpa = Autoscaler(scaling(target=50.0, metric_type="Value", up=DEFAULT_UP, down=DEFAULT_DOWN), 1)
    assert hpa.sync(15, metric=305.0, ready=1) == 4
    assert hpa.sync(30, metric=305.0, ready=1) == 2
    assert hpa.replicas == 7


def test_value_compares_the_metric_as_it_is_and_average_value_divides_it_by_the_pods():
    """WALK "Autoscaling on multiple metrics and custom metrics": "With Value, the target is compared
    directly to the returned metric from the API. With AverageValue, the value returned from the
    custom metrics API is divided by the number of pods before being compared to the target";
    External metrics "function exactly the same". The example's requests-per-second target is a
    Value of 10k for all pods behind the Ingress together."""
    # 4 ready pods serve 15k requests/s in all: as a Value, 15k / 10k = 1.5 times the target.
    assert value_replicas(15_000, 10_000, current=4, ready=4) == 6  # ceil(4 × 1.5)
    # As an AverageValue of 10k per pod, 15k in all need ceil(15k / 10k) = 2 pods.
    assert average_value_replicas(15_000, 10_000, current=4) == 2
    # A Value multiplies the *ready* pods: 2 of the 4 still starting count for nothing.
    assert value_replicas(15_000, 10_000, current=4, ready=2) == 3


def test_one_worker_per_30_outstanding_tasks():
    """WALK "Autoscaling on metrics not related to Kubernetes objects": an External metric
    queue_messages_ready with an AverageValue target of 30, "one worker per 30 outstanding tasks"."""
    assert average_value_replicas(95, 30, current=2) == 4  # ceil(95 / 30)
    assert average_value_replicas(30, 30, current=3) == 1
    # The tolerance is on the average per current pod: 63 tasks on 2 workers are 1.05 × 30 each.
    assert average_value_replicas(63, 30, current=2) == 2


@pytest.mark.parametrize(
    ("tolerance", "target", "stays", "moves"),
    [
        # K8S "Tolerance": a target of 100MiB with a 5% scale-up tolerance scales up only above 105MiB.
        (0.05, 100.0, [105.0, 95.0], [106.0, 94.0]),
        # K8S "Algorithm details": the default tolerance, 0.1.
        (0.1, 100.0, [110.0, 90.0, 100.0], [111.0, 89.0]),
    ],
)
def test_the_tolerance_is_inclusive_at_its_edges(tolerance, target, stays, moves):
    """K8S "Tolerance": "With this configuration, the HPA algorithm will only consider scaling up if
    the memory consumption is higher than 105MiB (that is: 5% above the target)". At exactly 105
    nothing moves; 110/100 is a ratio the floating-point |1 - ratio| puts just outside 0.1."""
    pods = 20  # enough pods that a move of a few percent changes the count
    for value in stays:
        assert within_tolerance(value / target, tolerance)
        assert average_value_replicas(pods * value, target, current=pods, tolerance=tolerance) == pods
        assert value_replicas(value, target, current=pods, ready=pods, tolerance=tolerance) == pods
    for value in moves:
        assert not within_tolerance(value / target, tolerance)
        assert average_value_replicas(pods * value, target, current=pods, tolerance=tolerance) != pods


def test_with_several_metrics_the_largest_proposal_wins():
    """WALK: "The HorizontalPodAutoscaler will calculate proposed replica counts for each metric, and
    then choose the one with the highest replica count" (K8S "Scaling on multiple metrics")."""
    both = scaling(target=30.0, metric_type="Value", floor_target=11.2, floor_activation=11.2)
    cases = [(60.0, 20.0), (15.0, 90.0)]  # (latency, busy slots): one metric leads, then the other
    for latency, busy in cases:
        alone_latency = value_replicas(latency, 30.0, current=4, ready=4)
        alone_floor = average_value_replicas(busy, 11.2, current=4)
        hpa = Autoscaler(both, 4)
        hpa.sync(15, metric=latency, ready=4, floor_metric=busy)
        assert hpa.replicas == max(alone_latency, alone_floor)
        assert alone_latency != alone_floor


# Behaviour: stabilization windows and policies


def test_scale_down_takes_the_highest_recommendation_of_the_window():
    """K8S "Stabilization window": with stabilizationWindowSeconds 300 for scaleDown, "all desired
    states from the past 5 minutes will be considered" and the highest is used."""
    hpa = Autoscaler(scaling(down=DEFAULT_DOWN), 10)
    assert hpa.sync(15, metric=100.0, ready=10) == 0  # recommends 10
    assert hpa.sync(200, metric=80.0, ready=10) == 0  # recommends 8
    steps = syncs(hpa, 40.0, 210, 600)  # recommends 4 from now on
    # The 10 of t=15 leaves the window after t=315, the 8 of t=200 after t=500.
    assert steps == [(315, 8), (510, 4)]


def test_scale_up_takes_the_lowest_recommendation_of_the_window():
    """API HPAScalingRules: "stabilizationWindowSeconds is the number of seconds for which past
    recommendations should be considered while scaling up or scaling down", and the stabilization
    window chooses "the safest value": for a scale-up, the lowest recommendation in the window."""
    hpa = Autoscaler(scaling(up=Rules(60, NO_LIMIT.policies)), 2)
    assert hpa.sync(15, metric=20.0, ready=2) == 0  # recommends 2
    # Recommends 10 from t=30; the 2 of t=15 counts while it is inside the window, up to t=75 excluded.
    assert syncs(hpa, 100.0, 30, 120) == [(75, 10)]


def test_scale_down_policies_pick_the_largest_change_by_default():
    """K8S "Scaling policies": Pods 4 and Percent 10, both per 60 s, from 80 replicas to 10: "during
    the first step 8 replicas will be reduced. In the next iteration when the number of replicas is
    72, 10% of the pods is 7.2 but the number is rounded up to 8 ... When the number of replicas
    falls below 40 the first policy (Pods) is applied and 4 replicas will be reduced at a time."""
    rules = Rules(0, (Policy("Pods", 4, 60), Policy("Percent", 10, 60)))
    hpa = Autoscaler(scaling(down=rules), 80)
    steps = syncs(hpa, 100.0, 15, 3600)  # 100 / 10 per pod: 10 replicas wanted
    counts = [80] + [n for _, n in steps]
    assert counts[:3] == [80, 72, 64]
    removed = [a - b for a, b in itertools.pairwise(counts)]
    assert all(r >= 4 for r in removed[:-1])
    assert all(r == 4 for (a, _), r in zip(itertools.pairwise(counts), removed, strict=True) if a <= 40 and a - 4 >= 10)
    assert counts[-1] == 10
    # One step per period: the policy looks back 60 s at what was already removed.
    assert all(b - a >= 60 for (a, _), (b, _) in itertools.pairwise(steps))


def test_select_policy_min_picks_the_smallest_change():
    """K8S "Example: limit scale down rate": Percent 10 and Pods 5 per 60 s with selectPolicy Min,
    so that "no more than 5 Pods are removed per minute" (and fewer where 10% is fewer)."""
    rules = Rules(0, (Policy("Percent", 10, 60), Policy("Pods", 5, 60)), "Min")
    hpa = Autoscaler(scaling(down=rules), 80)
    counts = [80] + [n for _, n in syncs(hpa, 10.0, 15, 7200)]
    for before, after in itertools.pairwise(counts):
        assert before - after == min(5, before - int(before * 0.9), before - 1)
    assert counts[:3] == [80, 75, 70]
    assert counts[-1] == 1


def test_select_policy_disabled_never_scales_that_way():
    """K8S "Example: disable scale down": selectPolicy Disabled turns off scaling in that direction."""
    hpa = Autoscaler(scaling(down=Rules(0, (Policy("Percent", 100, 15),), "Disabled")), 8)
    assert syncs(hpa, 10.0, 15, 1800) == []
    assert hpa.replicas == 8
    assert hpa.sync(1815, metric=200.0, ready=8) == 12  # scaling up still works


def test_the_default_scale_up_adds_4_pods_or_doubles_every_15_seconds():
    """K8S "Default behavior": "There are 2 policies where 4 pods or a 100% of the currently running
    replicas may at most be added every 15 seconds till the HPA reaches its steady state"."""
    hpa = Autoscaler(scaling(up=DEFAULT_UP, down=DEFAULT_DOWN), 1)
    assert syncs(hpa, 300.0, 15, 120) == [(15, 5), (30, 10), (45, 20), (60, 30)]


def test_the_hpa_leaves_a_pool_at_zero_alone():
    """K8S "Implicit maintenance-mode deactivation": with the target at 0 replicas and the HPA's
    minimum above 0 (KEDA gives the HPA a minimum of at least 1), the HPA stops adjusting it."""
    hpa = Autoscaler(scaling(min_replicas=0), 0)
    assert hpa.sync(15, metric=1000.0, ready=0) == 0
    assert hpa.replicas == 0


# KEDA: activation, minReplicaCount 0 and the cooldown


def test_activation_is_greater_than_never_equal():
    """KEDA "Activating and Scaling thresholds": "Activation only occurs when this value is greater
    than the set value; not greater than or equal to ... activationThreshold: 0 will only activate
    when the metric value is 1 or more"."""
    hpa = Autoscaler(scaling(min_replicas=0, activation=0.0), 0)
    assert hpa.poll(30, metric=0.0) == 0
    assert hpa.poll(60, metric=1.0) == 1
    assert hpa.replicas == 1  # minReplicaCount 0 wakes to one pod


def test_activation_outranks_the_scaling_target():
    """KEDA "Activating and Scaling thresholds": "threshold: 10 and activationThreshold: 50, in case
    of 40 messages the scaler is not active and it'll be scaled to zero even the HPA requires 4
    instances"."""
    hpa = Autoscaler(scaling(target=10.0, activation=50.0, min_replicas=0, cooldown_s=300), 1)
    assert hpa.poll(0, metric=60.0) == 0  # active at t=0: the cooldown counts from here
    assert hpa.sync(15, metric=40.0, ready=1) == 3  # the HPA requires 4 instances
    assert hpa.replicas == 4
    for now in range(30, 301, 30):
        assert hpa.poll(now, metric=40.0) == 0  # cooling down
    assert hpa.poll(330, metric=40.0) == -4
    assert hpa.replicas == 0
    assert hpa.poll(360, metric=51.0) == 1


def test_with_a_minimum_of_one_the_scaler_is_always_active():
    """KEDA "Activating and Scaling thresholds": "If the minimum replicas is >= 1, the scaler is
    always active and the activation value will be ignored"."""
    hpa = Autoscaler(scaling(activation=50.0, min_replicas=1, cooldown_s=300), 1)
    assert all(hpa.poll(now, metric=0.0) == 0 for now in range(30, 1801, 30))
    assert hpa.replicas == 1


def test_the_cooldown_waits_five_minutes_after_the_last_active_poll():
    """KEDA scaledobject-spec ``cooldownPeriod``: "The period to wait after the last trigger reported
    active before scaling the resource back to 0 ... Example: wait 5 minutes after the last time KEDA
    checked the queue and it was empty (this is obviously dependent on pollingInterval)". With the
    default pollingInterval of 30 s: last active at t=30, so not at t=330 (exactly 300 s: KEDA scales
    to zero once lastActiveTime + cooldown is *before* now), but at the next poll, t=360."""
    hpa = Autoscaler(scaling(min_replicas=0, activation=0.0, cooldown_s=300), 0)
    assert hpa.poll(30, metric=3.0) == 1
    assert [now for now in range(60, 391, 30) if hpa.poll(now, metric=0.0)] == [360]
    assert hpa.replicas == 0


def test_after_keda_wakes_a_pool_the_hpa_scales_it_from_one_under_its_own_policies():
    """KEDA "Activating and Scaling thresholds": the activation phase "only applies to 0<->1 scaling";
    in the scaling phase "KEDA has decided to scale out to 1 instance and now it is the HPA controller
    who takes the scaling decisions". The HPA's policies (K8S "Scaling policies": "periodSeconds
    indicates the length of time in the past for which the policy must hold true") count the HPA's
    own scalings, so KEDA's 0 -> 1 does not use up the period: Pods 4 per 60 s takes 1 to 5."""
    hpa = Autoscaler(scaling(min_replicas=0, up=Rules(0, (Policy("Pods", 4, 60),))), 0)
    assert hpa.poll(15, metric=200.0) == 1
    assert hpa.sync(30, metric=200.0, ready=0) == 4
    assert hpa.replicas == 5
    assert hpa.sync(45, metric=200.0, ready=1) == 0  # the HPA's +4 fills this period
