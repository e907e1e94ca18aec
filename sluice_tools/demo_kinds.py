"""The demo's kinds: a calendar and task product, as in the incident. Benchmarks, the demo and the tests use
them; a project declares its own in SLUICE_KINDS."""

# Where a task's link goes in the demo, which has no task pages: the admin's list of that task's inbox items. A
# product links to its own page of the task.
TASK_URL = "/admin/sluice_notifications/inboxitem/?q={entity_id}"

DEMO_KINDS = {
    "meeting.reminder": {"class": "critical", "channels": ["push", "email"]},
    "meeting.cancelled": {"class": "critical", "channels": ["push", "email"]},
    "meeting.invitation": {"class": "critical", "channels": ["email"]},
    "task.assigned": {"class": "routine", "channels": ["email", "push"], "url": TASK_URL},
    "task.due_changed": {"class": "routine", "channels": ["email"]},
    "task.comment": {"class": "routine", "channels": ["email"], "url": TASK_URL},
    "board.updated": {"class": "background", "channels": ["push"]},
    "meeting.participant_left": {"class": "background", "channels": ["push"]},
}
