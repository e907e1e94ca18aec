# The two commands: `make demo` and `make test`. Both build .venv from requirements.txt when needed.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.requirements-installed
ARGS ?=
PYTEST_ARGS ?=

.PHONY: demo test lint bench clean

$(STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python manage.py demo $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) sluice.sqlite3

bench: $(STAMP)
	$(BIN)/python manage.py bench incident --scale 1.0 --out docs --json docs/bench.json
