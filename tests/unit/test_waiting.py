"""wait_for(): returns what the condition returned, or fails the test saying what never happened."""

import itertools

import pytest

from tests.waiting import wait_for


def test_wait_for_returns_what_the_condition_returned_once_it_holds():
    polls = itertools.count(1)
    assert wait_for(lambda: next(polls) >= 3 and "found", timeout=5) == "found"


def test_wait_for_fails_saying_what_never_happened():
    with pytest.raises(pytest.fail.Exception, match=r"never happened within 0\.1 s: three sends"):
        wait_for(lambda: False, timeout=0.1, what="three sends")


def test_wait_for_describes_the_state_only_when_it_fails():
    described = []

    def what():
        described.append(True)
        return "the queue still holds 2"

    wait_for(lambda: True, timeout=1, what=what)
    assert described == []
    with pytest.raises(pytest.fail.Exception, match="the queue still holds 2"):
        wait_for(lambda: None, timeout=0.1, what=what)


def test_wait_for_names_the_condition_when_told_nothing():
    def queue_empty():
        return False

    with pytest.raises(pytest.fail.Exception, match="queue_empty"):
        wait_for(queue_empty, timeout=0.05)
