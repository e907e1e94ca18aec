# The two commands: `make demo` and `make test` (`make test-all` adds the system tier). They build .venv from the
# lock files when needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.requirements-installed
ARGS ?=
PYTEST_ARGS ?=
# pytest-xdist processes. The tests mostly wait on workers and Redis: four keep two cores busy (docs/testing.md).
WORKERS ?= 4
PYTEST := $(BIN)/python -m pytest -n $(WORKERS)

AUDIT_VENV := .venv-audit
AUDIT_STAMP := $(AUDIT_VENV)/.requirements-installed

.PHONY: demo test test-all lint bench wheel clean audit

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

# Sluice's project refuses its public development key while DEBUG is off: the demo gets a random key per run.
DEMO_KEY = DJANGO_SECRET_KEY="$${DJANGO_SECRET_KEY:-$$($(BIN)/python -c 'import secrets; print(secrets.token_urlsafe(50))')}"

demo: $(STAMP)
	$(DEMO_KEY) $(BIN)/python manage.py demo $(ARGS)

# The fast tiers, before every change; the system tier (kill loops, crashes, failovers, the demo) joins in test-all.
test: $(STAMP)
	$(PYTEST) tests/unit tests/integration $(PYTEST_ARGS)

test-all: $(STAMP)
	$(PYTEST) tests $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# pip-audit of the runtime lock (requirements.txt), from a virtualenv of its own (.ci/requirements-audit.txt).
# It needs the network; .ci/audit.py says plainly what it could not audit (SLUICE_AUDIT_REQUIRED=1 makes that fail).
$(AUDIT_STAMP): .ci/requirements-audit.txt
	test -x $(AUDIT_VENV)/bin/python || $(PYTHON) -m venv $(AUDIT_VENV)
	$(AUDIT_VENV)/bin/python -m pip install --quiet -r .ci/requirements-audit.txt
	touch $(AUDIT_STAMP)

audit: $(AUDIT_STAMP)
	$(AUDIT_VENV)/bin/python .ci/audit.py

# The wheel, built offline with the build backend from the development lock.
wheel: $(STAMP)
	$(BIN)/python -m build --wheel --no-isolation --outdir dist .

clean:
	rm -rf $(VENV) $(AUDIT_VENV) sluice.sqlite3 dist build *.egg-info

bench: $(STAMP)
	$(DEMO_KEY) $(BIN)/python manage.py bench incident --scale 1.0 --out docs --json docs/bench.json
