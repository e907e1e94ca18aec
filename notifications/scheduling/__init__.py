"""Scheduled sends: notify(..., send_at=...) kept in the database, moved and cancelled by key, and published at their
time by a mover in Sluice's beat; a critical kind's reserve a second of their pool's rate when they are scheduled."""
