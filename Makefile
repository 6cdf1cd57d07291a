# Two entry points (see README): `make quickstart` (set up + run the main job) and `make test` (set up + run the tests).
# Both create .venv when missing and install torch before the package:
#   TORCH=torch==2.13.0 (default, the CPU build) — set TORCH= (empty) to keep the torch you already have,
#   or e.g. TORCH="torch==2.5.1 --index-url ..." to choose another build.
PYTHON ?= python3.11
VENV ?= .venv
TORCH ?= torch==2.13.0
# The tests on both cores, each test file on one worker (the sweep tests of a file share one sweep run to its end).
PYTEST_ARGS ?= -n 2 --dist loadfile
BIN := $(VENV)/bin

.PHONY: quickstart test test-quick setup mutation clean-venv

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
	$(BIN)/benchbuild sweep pipelines/quickstart.toml --jobs 2

test: setup
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The edit loop's suite: the unit tests that need no trained run folder and start no process (the grammar, splits,
# corpora, metrics, the catalogue and the zoo's layers, recipes, report arithmetic), about 2 minutes on 2 cores;
# `make test` (CI) runs everything, these included.
QUICK_TESTS = tests/zoo tests/scan/test_scan_grammar.py tests/scan/test_scan_splits.py tests/evaluation/test_eval_cter.py \
	tests/evaluation/test_eval_cter_official.py tests/evaluation/test_eval_metrics.py tests/nounadj/test_nounadj_amod.py \
	tests/nounadj/test_nounadj_comp.py tests/nounadj/test_nounadj_pairs.py tests/nounadj/test_nounadj_split.py \
	tests/react/test_react_degree.py tests/react/test_react_pool.py tests/react/test_react_selection.py \
	tests/react/test_react_uncertainty.py tests/report/test_report_grid_intervals.py tests/publishing/test_citation_block.py \
	tests/test_benchmark.py tests/test_corpus.py tests/test_papers.py tests/test_toml_schema.py tests/test_text_files.py \
	tests/training/test_run_tokenizer.py tests/training/test_training_recipe.py
QUICK_SKIP = not learns_thirty_scan_rows and not registration
test-quick: setup
	$(BIN)/python -m pytest -q -n 2 $(QUICK_TESTS) -k "$(QUICK_SKIP)"

# How many deliberately broken versions of each core module its tests catch (tools/mutation.py; results and what
# each module took in benchmarks/RESULTS.md: react/degree.py and react/ngrams.py take far longer than the others).
mutation: setup
	$(BIN)/pip install --quiet -e ".[mutation]"
	$(BIN)/python tools/mutation.py

clean-venv:
	rm -rf $(VENV)
