"""Faults the tests inject into worker subprocesses they start themselves (the engine has no hook point)."""


def crash_on_deliver():
    """Make every delivery raise inside the consumer's event loop: an unrecoverable error for the worker.

    Called by the test's own wrapper (python -c '...; hooks.crash_on_deliver(); <run the worker>'), before the
    worker starts; sluice_tools.fetch_hook installs a hook between a fetch and its record the same way."""
    from kombu.transport.virtual import base

    def deliver(self, message, queue):
        raise RuntimeError("injected: delivery crashed")

    base.Transport._deliver = deliver


def mark_fetch(source):
    """Between a fetch and its record (through sluice_tools.fetch_hook): append this pid and the list the message
    came from to the file FETCH_HOOK_MARK names, which the test reads."""
    import os

    with open(os.environ["FETCH_HOOK_MARK"], "a") as mark:
        mark.write(f"{os.getpid()} {source}\n")


def slow_topic_chunks(seconds=0.2):
    """Make each chunk of a topic fan-out take ``seconds`` longer (notifications.topics.steps.advance), so that a
    test's kill lands while the fan-out is under way, between any two of its writes."""
    import time

    import django

    django.setup()  # before the worker's own (which then finds the apps ready): steps imports models
    from notifications.topics import steps

    advance = steps.advance

    def slow(job):
        done = advance(job)
        time.sleep(seconds)
        return done

    steps.advance = slow
