"""The in-app inbox: a channel that writes items users read in the host's own pages, its API, bell and escalation."""
