# Two commands for a newcomer:  make run   (set up, then run the daemon)
#                               make test  (set up, then run the tests)
# `make run` installs what relaybot needs to run; the dev tools come with `make test`/`make lint`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= config.toml

.PHONY: run chat init test lint bench clean catalogs lock

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e .
	touch $@

$(BIN)/.dev: $(BIN)/.installed
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

# First use: `relaybot init` asks for the essentials and writes $(CONFIG); nothing else runs,
# so you can set the environment variables it names first.
run: $(BIN)/.installed
	@if [ -f $(CONFIG) ]; then \
		$(BIN)/relaybot check-config -c $(CONFIG) && exec $(BIN)/relaybot run -c $(CONFIG); \
	else \
		$(BIN)/relaybot init -c $(CONFIG) && \
		echo "Then: make run (the daemon), or make chat (talk to it here)."; \
	fi

chat: $(BIN)/.installed
	@if [ -f $(CONFIG) ]; then \
		exec $(BIN)/relaybot chat -c $(CONFIG); \
	else \
		$(BIN)/relaybot init -c $(CONFIG) && echo "Then: make chat again."; \
	fi

init: $(BIN)/.installed
	$(BIN)/relaybot init -c $(CONFIG)

# The tests run in parallel workers (pytest-xdist), two per core by default: most of a test's
# time is spent waiting for a daemon, a fake server or PostgreSQL, and a second worker fills it.
# `make test JOBS=0` runs them in one process, in order.
JOBS ?= $(shell echo $$(( $$(nproc) * 2 )))
MCP_SERVERS := tests/mcp_servers
# the reference MCP servers some tests run, pinned by their package-lock.json (needs Node.js, npm)
$(MCP_SERVERS)/node_modules/.installed: $(MCP_SERVERS)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		npm ci --prefix $(MCP_SERVERS) --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "npm not found: the tests that run MCP servers from npm will say so"; fi

test: $(BIN)/.dev $(MCP_SERVERS)/node_modules/.installed
	@# the hundreds of relaybot processes the tests start read bytecode compiled once here
	@# (where PYTHONDONTWRITEBYTECODE is set, each would compile every module it imports)
	$(BIN)/python -m compileall -q bot channels engine tools tests benchmarks
	$(BIN)/python -m pytest -q -n $(JOBS)

lint: $(BIN)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: $(BIN)/.dev
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) *.egg-info

# The message catalogs (engine/i18n): the template from the source, new messages into each
# language's .po, and each .po compiled to the .mo the daemon reads. Commit all three.
catalogs: $(BIN)/.dev
	$(BIN)/python scripts/catalogs.py extract
	$(BIN)/python scripts/catalogs.py update
	$(BIN)/python scripts/catalogs.py compile

# The lock file: every dependency (and the anthropic extra's) pinned with its hashes, resolved by
# uv from pyproject.toml for every platform. A release carries it (bot/requirements.lock, package
# data): `relaybot upgrade` installs a generation's dependencies from it and nothing else.
# Refresh it when a dependency changes in pyproject.toml; commit it.
lock: $(BIN)/.dev
	$(BIN)/uv pip compile pyproject.toml --extra anthropic --generate-hashes --universal \
		--python-version 3.11 --custom-compile-command "make lock" -q -o bot/requirements.lock
