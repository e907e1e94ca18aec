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

BUILD_VENV := .venv-build
BUILD_STAMP := $(BUILD_VENV)/.requirements-installed

AUDIT_VENV := .venv-audit
AUDIT_STAMP := $(AUDIT_VENV)/.requirements-installed

.PHONY: demo test test-all lint bench wheel clean audit test-django6 messages compilemessages

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

# Sluice's own translations (docs/email.md, "Their language"): `make messages` updates each app's
# locale/<language>/LC_MESSAGES/django.po from its templates and code (it needs GNU gettext: apt-get install gettext);
# `make compilemessages` builds the .mo files beside them, which are committed and shipped in the wheel.
LOCALES ?= ru
I18N_APPS := notifications digest

messages: $(STAMP)
	for app in $(I18N_APPS); do (cd $$app && ../$(BIN)/django-admin makemessages --add-location file $(addprefix -l ,$(LOCALES))) || exit 1; done

compilemessages: $(STAMP)
	for app in $(I18N_APPS); do (cd $$app && ../$(BIN)/django-admin compilemessages $(addprefix -l ,$(LOCALES))) || exit 1; done

# pip-audit of the runtime lock (requirements.txt), from a virtualenv of its own (.ci/requirements-audit.txt).
# It needs the network; .ci/audit.py says plainly what it could not audit (SLUICE_AUDIT_REQUIRED=1 makes that fail).
$(AUDIT_STAMP): .ci/requirements-audit.txt
	test -x $(AUDIT_VENV)/bin/python || $(PYTHON) -m venv $(AUDIT_VENV)
	$(AUDIT_VENV)/bin/python -m pip install --quiet -r .ci/requirements-audit.txt
	touch $(AUDIT_STAMP)

audit: $(AUDIT_STAMP)
	$(AUDIT_VENV)/bin/python .ci/audit.py

# The wheel (dist/django_sluice-<version>-py3-none-any.whl), built by a small virtualenv of its own that holds
# only the build frontend and backend (requirements-build.txt), never the development lock.
$(BUILD_STAMP): requirements-build.txt
	test -x $(BUILD_VENV)/bin/python || $(PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/python -m pip install --quiet -r requirements-build.txt
	touch $(BUILD_STAMP)

wheel: $(BUILD_STAMP)
	$(BUILD_VENV)/bin/python -m build --wheel --no-isolation --outdir dist .

clean:
	rm -rf $(VENV) $(AUDIT_VENV) $(BUILD_VENV) $(DJANGO6_VENV) sluice.sqlite3* dist build *.egg-info

bench: $(STAMP)
	$(DEMO_KEY) $(BIN)/python manage.py bench incident --scale 1.0 --out docs/reports --json docs/reports/bench.json

# --- The latest Django line (6.x) ---
# The fast tests on Django 6 from a second virtualenv, .venv-django6: the development lock with Django overridden,
# pinned exactly. Django 6 needs Python 3.12+ (DJANGO6_PYTHON); 6.1 waits for django-celery-beat (2.9.0 allows
# Django<6.1).
DJANGO6 := 6.0.10
DJANGO6_VENV := .venv-django6
DJANGO6_STAMP := $(DJANGO6_VENV)/.requirements-installed
DJANGO6_PYTHON ?= $(shell for v in 3.12 3.13; do \
	p=$$(command -v python$$v) && $$p -c "" 2>/dev/null && echo $$p && exit; \
	p=$$(PYENV_VERSION=$$(pyenv versions --bare 2>/dev/null | grep "^$$v" | tail -1) pyenv which python$$v 2>/dev/null) \
	&& echo $$p && exit; done)

$(DJANGO6_STAMP): requirements.txt requirements-dev.txt
	test -n "$(DJANGO6_PYTHON)" || { echo "Django 6 needs Python 3.12 or 3.13: set DJANGO6_PYTHON" >&2; exit 1; }
	test -x $(DJANGO6_VENV)/bin/python || $(DJANGO6_PYTHON) -m venv $(DJANGO6_VENV)
	{ grep -v '^Django==' requirements.txt; echo "Django==$(DJANGO6)"; grep -v '^-r ' requirements-dev.txt; } \
		> $(DJANGO6_VENV)/requirements.txt
	$(DJANGO6_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(DJANGO6_VENV)/bin/python -m pip install --quiet -r $(DJANGO6_VENV)/requirements.txt
	touch $(DJANGO6_STAMP)

test-django6: $(DJANGO6_STAMP)
	$(DJANGO6_VENV)/bin/python -m pytest -n $(WORKERS) tests/unit tests/integration $(PYTEST_ARGS)
