"""Each class queue is bound by its own name to one neutrally named exchange (a worker's banner shows it)."""

from pipeline.broker.queues import EXCHANGE, celery_queue_settings
from pipeline.celery import app


def test_the_queues_are_bound_to_the_sluice_exchange_by_their_own_names():
    app.conf.update(celery_queue_settings())
    queues = app.amqp.queues
    for name in ("critical", "routine", "background"):
        assert queues[name].exchange.name == EXCHANGE == "sluice"
        assert queues[name].routing_key == name
    assert app.amqp.router.route({}, "sluice.digest.flush")["queue"].name == "critical"
