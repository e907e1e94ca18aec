# The two commands: `make demo` and `make test`. Both build .venv from the lock files when needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.requirements-installed
ARGS ?=
PYTEST_ARGS ?=

.PHONY: demo test lint bench wheel clean

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python manage.py demo $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

# The wheel, built offline with the build backend from the development lock.
wheel: $(STAMP)
	$(BIN)/python -m build --wheel --no-isolation --outdir dist .

clean:
	rm -rf $(VENV) sluice.sqlite3 dist build *.egg-info

bench: $(STAMP)
	$(BIN)/python manage.py bench incident --scale 1.0 --out docs --json docs/bench.json
