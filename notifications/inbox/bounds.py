"""What an inbox row keeps of an event, within bounds of its own: its payload within SLUICE_INBOX["max_payload_bytes"]
(as JSON), its body within BODY_CHARS characters. A caller's payload may be as large as SLUICE_MAX_PAYLOAD_BYTES; a
row keeps what its title, body, link and escalation need, not a copy of every event's whole payload."""

import json

# The longest body a row keeps, in characters (the bell shows a line or two of it; the title keeps 300).
BODY_CHARS = 1000
# Strings nested deeper than this are left whole when shortening: the fields are dropped instead.
DEPTH = 32
ELLIPSIS = "…"


def body(text):
    """``text`` within BODY_CHARS characters, an ellipsis ending a shortened one."""
    return text if len(text) <= BODY_CHARS else text[: BODY_CHARS - 1].rstrip() + ELLIPSIS


def size(payload):
    """The bytes of ``payload`` as the row stores it (compact JSON, UTF-8)."""
    return len(json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode())


def fitted(payload, limit):
    """``payload`` within ``limit`` bytes: itself when it fits; else with its strings shortened to the longest length
    that fits (each ending in an ellipsis), so every field a template names is still there; else, when even the
    shortest strings do not fit, without its largest top-level fields, and the rest's strings shortened."""
    if not isinstance(payload, dict) or size(payload) <= limit:
        return payload
    kept = dict(payload)
    bare = {name: _shortened(value, 0, 0) for name, value in kept.items()}
    for name in sorted(bare, key=lambda name: size({name: bare[name]}), reverse=True):
        if size(bare) <= limit:
            break
        del bare[name], kept[name]
    low, high = 0, _longest_string(kept, 0)
    while low < high:  # the longest string length that fits
        middle = (low + high + 1) // 2
        if size(_shortened(kept, middle, 0)) <= limit:
            low = middle
        else:
            high = middle - 1
    return _shortened(kept, low, 0)


def _longest_string(value, depth):
    if isinstance(value, str):
        return len(value)
    if depth >= DEPTH:
        return 0
    if isinstance(value, dict):
        return max((_longest_string(item, depth + 1) for item in value.values()), default=0)
    if isinstance(value, list):
        return max((_longest_string(item, depth + 1) for item in value), default=0)
    return 0


def _shortened(value, length, depth):
    if isinstance(value, str):
        if len(value) <= length:
            return value
        return value[: length - 1] + ELLIPSIS if length else ""
    if depth >= DEPTH:
        return value
    if isinstance(value, dict):
        return {name: _shortened(item, length, depth + 1) for name, item in value.items()}
    if isinstance(value, list):
        return [_shortened(item, length, depth + 1) for item in value]
    return value
