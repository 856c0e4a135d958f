# Two commands for a newcomer:  make run   (set up, then run the daemon)
#                               make test  (set up, then run the tests)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONFIG ?= config.toml

.PHONY: run chat test lint bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@

$(CONFIG):
	cp config.example.toml $(CONFIG)
	@echo "Created $(CONFIG) from config.example.toml: set your model, keys and channels, then run 'make run' again."
	@exit 1

run: $(BIN)/.installed $(CONFIG)
	$(BIN)/relaybot check-config -c $(CONFIG)
	$(BIN)/relaybot run -c $(CONFIG)

chat: $(BIN)/.installed $(CONFIG)
	$(BIN)/relaybot chat -c $(CONFIG)

test: $(BIN)/.installed
	$(BIN)/python -m pytest -q

lint: $(BIN)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: $(BIN)/.installed
	for b in benchmarks/bench_*.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) *.egg-info
