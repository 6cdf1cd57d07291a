# Two entry points (see README): `make quickstart` (set up + run the main job) and `make test` (set up + run the tests).
# Both create .venv when missing and install torch before the package:
#   TORCH=torch==2.13.0 (default, the CPU build) — set TORCH= (empty) to keep the torch you already have,
#   or e.g. TORCH="torch==2.5.1 --index-url ..." to choose another build.
PYTHON ?= python3.11
VENV ?= .venv
TORCH ?= torch==2.13.0
PYTEST_ARGS ?=
BIN := $(VENV)/bin

.PHONY: quickstart test setup mutation clean-venv

$(BIN)/python:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "make: $(PYTHON) not found: set PYTHON=/path/to/python3.11" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	@if [ -n "$(TORCH)" ]; then echo "installing $(TORCH)"; $(BIN)/pip install --quiet $(TORCH); fi
	$(BIN)/pip install --quiet -e ".[models,test]"
	@touch $@

setup: $(VENV)/.installed

quickstart: setup
	$(BIN)/benchbuild run pipelines/quickstart.toml

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# How many deliberately broken versions of each core module its tests catch (tools/mutation.py; results and what
# each module took in benchmarks/RESULTS.md: react/degree.py and react/ngrams.py take far longer than the others).
mutation: setup
	$(BIN)/pip install --quiet -e ".[mutation]"
	$(BIN)/python tools/mutation.py

clean-venv:
	rm -rf $(VENV)
