"""The tests' settings: Sluice's own project, with a secret key of the tests' own.

Sluice's project refuses to run with its public development key while DEBUG is off (settings/__init__.py). The
key set here is in the environment, so every process the tests start (workers, the demo, manage.py) has it too.
"""

import os

os.environ.setdefault("DJANGO_SECRET_KEY", "sluice-tests-only-" + "0123456789abcdef" * 4)

from settings import *  # noqa: F403
