"""Flower's settings, read from the working directory: Flower never runs without basic auth.

Task arguments hold personal data, and Flower shows them. `make demo` sets FLOWER_BASIC_AUTH to a
generated password; a deployment sets it from a Secret (the Helm chart does).
"""

import os

basic_auth = [pair for pair in os.environ.get("FLOWER_BASIC_AUTH", "").split(",") if ":" in pair]
if not basic_auth:
    raise SystemExit(
        "FLOWER_BASIC_AUTH is not set (user:password): Flower shows task arguments, which hold personal data, "
        "so it does not run without auth"
    )
