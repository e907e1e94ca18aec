"""What a stretch of work cost: Redis commands (INFO commandstats), Redis CPU (INFO cpu) and processes' CPU."""

import time

import psutil


def commandstats(client):
    """Calls per command since the last CONFIG RESETSTAT, as {command: calls}."""
    return {name.removeprefix("cmdstat_"): stats["calls"] for name, stats in client.info("commandstats").items()}


def redis_cpu_s(client):
    """CPU seconds Redis has used, system and user."""
    info = client.info("cpu")
    return info["used_cpu_sys"] + info["used_cpu_user"]


def tree_cpu_s(pid):
    """CPU seconds used by a process and its live children."""
    try:
        parent = psutil.Process(pid)
        family = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    total = 0.0
    for member in family:
        try:
            times = member.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


class Snapshot:
    """Counters at one moment; ``other - self`` is what happened in between."""

    def __init__(self, client, pids):
        self.commands = commandstats(client)
        self.redis_cpu = redis_cpu_s(client)
        self.cpu = {name: tree_cpu_s(pid) for name, pid in pids.items()}
        self.at = time.monotonic()

    def until(self, later):
        """{"seconds", "redis_cpu_s", "cpu_s": {name: s}, "commands": {command: calls}} from self to ``later``;
        the INFO calls the meter itself makes are left out."""
        commands = {
            name: later.commands.get(name, 0) - self.commands.get(name, 0)
            for name in later.commands
            if name != "info" and later.commands.get(name, 0) != self.commands.get(name, 0)
        }
        return {
            "seconds": later.at - self.at,
            "redis_cpu_s": later.redis_cpu - self.redis_cpu,
            "cpu_s": {name: later.cpu[name] - self.cpu.get(name, 0.0) for name in later.cpu},
            "commands": commands,
        }


def minus_idle(delta, idle):
    """``delta`` less what the processes do when idle (polls, heartbeats) over the same time."""
    scale = delta["seconds"] / idle["seconds"] if idle["seconds"] else 0.0
    commands = {
        name: max(0.0, calls - idle["commands"].get(name, 0) * scale) for name, calls in delta["commands"].items()
    }
    return {
        "seconds": delta["seconds"],
        "redis_cpu_s": max(0.0, delta["redis_cpu_s"] - idle["redis_cpu_s"] * scale),
        "cpu_s": {name: max(0.0, s - idle["cpu_s"].get(name, 0.0) * scale) for name, s in delta["cpu_s"].items()},
        "commands": {name: calls for name, calls in commands.items() if calls},
    }


def per_event(delta, events):
    """Commands, Redis CPU (µs) and each process's CPU (µs) per event."""
    return {
        "commands_per_event": round(sum(delta["commands"].values()) / events, 2),
        "commands_by_name_per_event": {
            name: round(calls / events, 3)
            for name, calls in sorted(delta["commands"].items())
            if calls / events >= 0.005
        },
        "redis_cpu_us_per_event": round(delta["redis_cpu_s"] / events * 1e6, 1),
        "cpu_us_per_event": {name: round(s / events * 1e6, 1) for name, s in delta["cpu_s"].items()},
    }
