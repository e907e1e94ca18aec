"""The demo's kinds: a calendar and task product, as in the incident. Benchmarks, the demo and the tests use
them; a project declares its own in SLUICE_KINDS."""

DEMO_KINDS = {
    "meeting.reminder": {"class": "critical", "channels": ["push", "email"]},
    "meeting.cancelled": {"class": "critical", "channels": ["push", "email"]},
    "meeting.invitation": {"class": "critical", "channels": ["email"]},
    "task.assigned": {"class": "routine", "channels": ["email", "push"]},
    "task.due_changed": {"class": "routine", "channels": ["email"]},
    "task.comment": {"class": "routine", "channels": ["email"]},
    "board.updated": {"class": "background", "channels": ["push"]},
    "meeting.participant_left": {"class": "background", "channels": ["push"]},
}
