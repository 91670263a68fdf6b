# Two commands do everything on a fresh machine (Python 3.10-3.13 with venv):
#   make lab    create the environment if missing, then open JupyterLab on notebooks/
#   make test   create the environment if missing, then check the import layers (lint-imports)
#               and run every test (docstring examples, unit, notebooks, and JupyterLab in
#               headless Chromium; installs Debian's chromium if root and missing)
#   make test-fast  the simulator, views and widgets only, without TensorFlow (seconds)
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: lab test test-fast bench env clean-env

# The pure layers (plain Python, no TensorFlow: pyproject.toml's import contracts keep them so),
# plus cli/profiling, the only other module with docstring examples.  Every docstring example
# runs as a test; test-fast runs them with the pure layers' own tests.
PURE_MODULES := ipu_emulator/sim ipu_emulator/views ipu_emulator/record.py widgets \
	ipu_emulator/cli/profiling.py
PURE_TESTS := tests/sim tests/views tests/widgets tests/cli/test_simulate.py

env: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[lab,test]"
	@touch $(STAMP)

lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=notebooks

# The bundled data sample keeps test runs offline and reproducible.
# tests/browser/ drives JupyterLab in headless Chromium: scripts/ensure_browser.sh installs
# Debian's chromium when missing (as root), or says how to; IPU_LAB_CHROMIUM=/path/to/chrome
# picks another binary.  Without a browser: make test PYTEST_ARGS='-m "not browser"'.
test: $(STAMP)
	$(if $(findstring not browser,$(PYTEST_ARGS)),,@bash scripts/ensure_browser.sh)
	$(BIN)/lint-imports --no-cache
	MPLBACKEND=Agg $(BIN)/python -m pytest -q -p no:cacheprovider --doctest-modules $(PURE_MODULES)
	IPU_EMULATOR_DATA=sample MPLBACKEND=Agg $(BIN)/python -m pytest --nbval-lax $(PYTEST_ARGS) tests notebooks

# The simulator, views and widgets only, without TensorFlow: about ten seconds.
test-fast: $(STAMP)
	$(BIN)/lint-imports --no-cache
	MPLBACKEND=Agg $(BIN)/python -m pytest -p no:cacheprovider --doctest-modules $(PURE_MODULES) $(PURE_TESTS)

bench: $(STAMP)
	IPU_EMULATOR_DATA=sample $(BIN)/python bench/run_all.py

clean-env:
	rm -rf $(VENV)
