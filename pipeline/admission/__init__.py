"""Admission: every way an event comes in, decided at the broker in one Lua step (the user's choices, the bound, the
fold, the idempotency key)."""
