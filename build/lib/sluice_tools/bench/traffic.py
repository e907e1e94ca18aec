"""The incident's traffic: 180 participants move a recurring meeting, and 9,360 events land in 40 s.

6% critical, 80% routine, 14% background, with realistic fold keys: each participant gets many
routine events about a handful of tasks, so one (user, kind, entity) repeats several times.
"""

import random

BURST_EVENTS = 9360
BURST_SECONDS = 40.0
BACKGROUND_PER_MIN = 90
PARTICIPANTS = 180
MIX = (
    ("critical", ("meeting.reminder", "meeting.cancelled", "meeting.invitation"), 0.06),
    ("routine", ("task.due_changed", "task.assigned", "task.comment"), 0.80),
    ("background", ("board.updated", "meeting.participant_left"), 0.14),
)
TASKS_PER_PARTICIPANT = 2
BOARDS = 3


def burst(scale=1.0, seed=2026):
    """[(offset_s, class, kind, user, entity)] for the burst, offsets spread evenly over its duration.

    Each participant's routine events are about the meeting's two action items, so each (user, kind, task)
    repeats about seven times: the "many events per key" of a moved recurring meeting.
    """
    rng = random.Random(seed)
    total = round(BURST_EVENTS * scale)
    seconds = BURST_SECONDS * scale
    participants = max(4, round(PARTICIPANTS * scale))
    events = []
    for klass, kinds, share in MIX:
        for _ in range(round(total * share)):
            user = rng.randint(1, participants)
            kind = rng.choice(kinds)
            if klass == "critical":
                entity = "meeting-weekly"
            elif klass == "routine":
                entity = f"task-{user}-{rng.randint(1, TASKS_PER_PARTICIPANT)}"
            else:
                entity = f"board-{rng.randint(1, BOARDS)}"
            events.append((klass, kind, user, entity))
    rng.shuffle(events)
    step = seconds / max(1, len(events))
    return [(i * step, *event) for i, event in enumerate(events)]


def background(seconds, start=0.0, seed=7):
    """Steady background traffic, 90 events a minute, from ``start`` for ``seconds``."""
    rng = random.Random(seed)
    every = 60.0 / BACKGROUND_PER_MIN
    return [
        (start + i * every, "background", "board.updated", rng.randint(1, PARTICIPANTS), "board-steady")
        for i in range(int(seconds / every))
    ]
