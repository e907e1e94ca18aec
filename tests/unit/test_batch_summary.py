"""The batch's log line counts its messages in plain English: "1 message", "3 messages"."""

from pipeline.sending import endings
from pipeline.sending.engine import Batch, Item


def ended(kind, given_back=False):
    return Item(attempt=None, ending=endings.Ending(kind), given_back=given_back)


def test_a_batch_of_one_says_one_message():
    assert Batch(None, [ended(endings.DONE)]).summary() == (
        "1 message: 1 done, 0 retried, 0 dead-lettered, 0 requeued, 0 given back"
    )


def test_a_batch_of_three_counts_each_end():
    items = [ended(endings.DONE), ended(endings.RETRIED), ended(None, given_back=True)]
    assert Batch(None, items).summary() == ("3 messages: 1 done, 1 retried, 0 dead-lettered, 0 requeued, 1 given back")
