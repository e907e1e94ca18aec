"""The exporter's fan-out families: the users of notify_many() and topics by what became of them, and the subscribers
that topic fan-outs have still to do."""

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from pipeline.conf import CLASSES
from pipeline.connections import class_redis
from pipeline.metrics import FANOUT_RESULTS, fanout_field
from pipeline.redis import keys


def collect(counters):
    """Yield sluice_fanout_users_total{class,outcome} from the counters, and sluice_topic_fanout_backlog{class} from
    each class's Redis (one HVALS a class)."""
    users = CounterMetricFamily(
        "sluice_fanout_users",
        "Users of notify_many() and topic fan-outs by what became of them: an outcome, or rejected, unknown, failed, "
        "schedule_full",
        labels=["class", "outcome"],
    )
    for klass in CLASSES:
        for outcome in FANOUT_RESULTS:
            users.add_metric([klass, outcome], counters.get(fanout_field(klass, outcome), 0))
    yield users
    backlog = GaugeMetricFamily(
        "sluice_topic_fanout_backlog",
        "Subscribers that topic fan-outs still running have still to do",
        labels=["class"],
    )
    for klass in CLASSES:
        left = class_redis(klass).hvals(keys.topic_backlog(klass))
        backlog.add_metric([klass], sum(int(n) for n in left))
    yield backlog
