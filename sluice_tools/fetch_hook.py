"""Run a command (a worker) with a hook called between each fetch and its record: for bench kills and fault tests.

    python -m sluice_tools.fetch_hook <dotted.path.to.hook> manage.py worker critical ...
    python -m sluice_tools.fetch_hook <dotted.path.to.hook> -m celery -A pipeline worker -Q critical ...

The hook is called with the list each message was fetched from, at the instant a kill leaves the message neither
in its queue nor recorded as delivered. It is installed in this process (and the pool's forked children) only, by
wrapping the transport's method before the command starts: the engine has no hook point of its own, and reads
nothing from the environment for one.
"""

import runpy
import sys


def hooked(hook):
    """The transport's Channel._deliver_fetched, calling ``hook(source)`` first (tests monkeypatch it in)."""
    from pipeline.broker.transport import Channel

    deliver = Channel._deliver_fetched

    def deliver_fetched(self, source, raw):
        hook(source)
        return deliver(self, source, raw)

    return deliver_fetched


def install(path):
    """Call the function at dotted ``path`` before each fetched message is delivered, in this process."""
    from pipeline.broker.transport import Channel

    found = []

    def hook(source):
        if not found:
            # Resolved at the first fetch, once Django is set up: a hook's module may import models.
            from django.utils.module_loading import import_string

            found.append(import_string(path))
        found[0](source)

    Channel._deliver_fetched = hooked(hook)


def main(argv):
    """``argv``: the hook's dotted path, then the command, either a script and its arguments or -m and a module."""
    if len(argv) < 2:
        raise SystemExit("usage: python -m sluice_tools.fetch_hook <dotted.path.to.hook> <script | -m module> ...")
    path, command = argv[0], argv[1:]
    install(path)
    if command[0] == "-m" and len(command) > 1:
        sys.argv = [command[1], *command[2:]]
        runpy.run_module(command[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = command
        runpy.run_path(command[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
