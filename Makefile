# Two commands do everything on a fresh machine (Python 3.10-3.13 with venv):
#   make lab    create the environment if missing, then open JupyterLab on notebooks/
#   make test   create the environment if missing, then check the import layers (lint-imports)
#               and run every test in one pytest run on three workers (docstring examples, unit,
#               notebooks, JupyterLab in headless Chromium, and the JupyterLite site, which it
#               builds first: `make lite`; installs Debian's chromium-headless-shell and npm if
#               root and missing); prints the time each stage took
#   make test-fast  the simulator, views, widgets and exercises only, without TensorFlow (~12 s)
#   make lite       the zero-install JupyterLite site in build/lite (lite/lite.mk)
VENV ?= .venv
PYTHON ?= python3
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: lab test test-fast test-colab bench env clean-env lock

# Each stage of `make test` is timed (scripts/stage_times.py) and the times are printed at the
# end; MAKE_STARTED is when the outermost make started (exported to the `make lite` below).
ifndef MAKE_STARTED
MAKE_STARTED := $(shell date +%s)
endif
export MAKE_STARTED
STAGE := $(PYTHON) scripts/stage_times.py run

# The fast suite (tests/fast_suite.txt, one list for this Makefile, tests/conftest.py and
# scripts/mutation_check.py): the pure layers, whose docstring examples run as tests, and
# their tests; no TensorFlow.  `make test` runs the same docstring examples with everything else.
FAST_SUITE := $(shell sed 's/\#.*//' tests/fast_suite.txt)
# Two workers, no nbval (it imports Jupyter: 2.4 s a process), and a sample of each large
# grid of drawings (the cases marked `grid` run in `make test`); scripts/mutation_check.py
# runs the same, in one process.
FAST_OPTIONS := -n 2 -p no:cacheprovider -p no:nbval --doctest-modules -m "not grid"
PURE_MODULES := $(filter-out tests/%,$(FAST_SUITE))

env: $(STAMP)

# $(call install,VENV,REQUIREMENTS): uv (from PyPI, into VENV by pip: 1-2 s) installs the
# requirements into VENV.  It resolves the same ranges to the same versions as pip, four times
# as fast: the lab's environment in 11 s against pip's 48 s on a fresh clone (2026-11-27).
# USE_UV=0 installs with pip alone.
UV_RANGE := >=0.13,<1
COMMA := ,
USE_UV ?= 1
define install
$(if $(filter 0,$(USE_UV)),$(1)/bin/python -m pip install --quiet $(2),$(1)/bin/python -m pip install --quiet "uv$(UV_RANGE)" \
	&& $(1)/bin/uv pip install --quiet --python $(1)/bin/python $(2))
endef
# A build tool's venv (the site's, the hub's) made while the lab's .venv has uv needs neither pip
# nor uv of its own: `python -m venv --without-pip` (0.1 s of CPU against 2.2 s with ensurepip)
# and the lab's uv fills it, where pip would first install uv into it (1.0 s more; 2026-11-30).
# $(call tool_venv,VENV): the venv's creation; $(call tool_install,VENV,REQUIREMENTS): its install;
# $(call tool_uv,VENV): the uv that installs for it (the lab's, else the one `install` put in it).
TOOLS_BY_LAB_UV = $(and $(filter-out 0,$(USE_UV)),$(wildcard $(BIN)/uv))
tool_venv = test -x $(1)/bin/python || $(PYTHON) -m venv $(if $(TOOLS_BY_LAB_UV),--without-pip) $(1)
tool_uv = $(if $(TOOLS_BY_LAB_UV),$(BIN)/uv,$(1)/bin/uv)
tool_install = $(if $(TOOLS_BY_LAB_UV),$(call tool_uv,$(1)) pip install --quiet --python $(1)/bin/python $(2),$(call install,$(1),$(2)))

# The versions a class gets: locks/ pins every package the lab (lab.txt), the hub (hub.txt) and
# the image (image.txt) install, and each install takes its lock as constraints on the ranges
# pyproject.toml and the requirements files keep.  `make lock` refreshes the locks, keeping each
# pin that still fits its range (`make lock UPGRADE=1`: the newest versions in range);
# LOCKED=0 installs from the ranges alone, to try what PyPI has now.  docs/setup-and-testing.md.
LOCKED ?= 1
locked = $(if $(filter 0,$(LOCKED)),,-c locks/$(1).txt)
LOCK_OPTIONS = --universal --python-version 3.11 --quiet --custom-compile-command "make lock" \
	$(if $(filter 1,$(UPGRADE)),--upgrade)

LOCK_TOOL := build/uv-venv
lock:
	@test -x $(LOCK_TOOL)/bin/uv || ($(PYTHON) -m venv $(LOCK_TOOL) \
		&& $(LOCK_TOOL)/bin/python -m pip install --quiet "uv$(UV_RANGE)")
	$(LOCK_TOOL)/bin/uv pip compile $(LOCK_OPTIONS) pyproject.toml --extra lab --extra test -o locks/lab.txt
	$(LOCK_TOOL)/bin/uv pip compile $(LOCK_OPTIONS) hub/requirements-hub.txt -c locks/lab.txt -o locks/hub.txt
	$(LOCK_TOOL)/bin/uv pip compile $(LOCK_OPTIONS) hub/image/requirements.txt -c locks/lab.txt \
		-c locks/hub.txt -o locks/image.txt

CELL_EDITS := jupyter/lab/extensions/ipu-lab-cell-edits

$(STAMP): pyproject.toml $(if $(filter 0,$(LOCKED)),,locks/lab.txt) jupyter/lab/overrides.json jupyter/ipython_kernel_config.py $(wildcard $(CELL_EDITS)/*.json $(CELL_EDITS)/static/*)
	@test -x $(BIN)/python || $(STAGE) "environment: venv" -- $(PYTHON) -m venv $(VENV)
	$(STAGE) "environment: install" -- bash -c '$(call install,$(VENV),-e ".[lab$(COMMA)test]" $(call locked,lab))'
	@# JupyterLab's defaults for this lab (make lab and every learner's server on make hub):
	@# Markdown opens rendered, notebooks are saved every 15 s (a check sees a saved edit of
	@# the exercise cell: ipu_emulator/code_exercises/cell_runs.py), no news prompt.
	install -D -m 644 jupyter/lab/overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@# The lab's kernels: TensorFlow's C++ start-up lines to the server's log, not the notebook.
	install -D -m 644 jupyter/ipython_kernel_config.py $(VENV)/etc/ipython/ipython_kernel_config.py
	@# The lab's JupyterLab extension: it tells the kernel which cells were edited since they ran,
	@# so a check never judges code no longer in its cell (cell_runs.py says how).
	rm -rf $(VENV)/share/jupyter/labextensions/ipu-lab-cell-edits
	mkdir -p $(VENV)/share/jupyter/labextensions && cp -R $(CELL_EDITS) $(VENV)/share/jupyter/labextensions/
	@touch $(STAMP)

# make lite, serve-lite, test-lite: the JupyterLite site (included after the first target,
# so a bare `make` still means `make env`).
include lite/lite.mk

# make test-colab: every notebook under nbval on Google Colab's versions (colab/colab.mk).
# Its file is read only when test-colab is a goal: finding Colab's Python runs pyenv's shims,
# 0.16-0.20 s that every other make (make test-fast, make lab) would pay at start.
ifneq ($(filter test-colab,$(MAKECMDGOALS)),)
include colab/colab.mk
endif

# make hub: a real JupyterHub serving this lab to a small class on this machine (hub/hub.mk).
include hub/hub.mk

# make image, test-image: the single-user image built here from Debian's packages (hub/image/image.mk).
include hub/image/image.mk

# The lab's Jupyter server settings (kernel culling, TensorBoard through the server's proxy),
# shared with make hub and the hub image: jupyter/jupyter_server_config.py.
LAB_SERVER_CONFIG := JUPYTER_CONFIG_PATH="$(abspath jupyter)"

# As root (classroom containers, cloud VMs) Jupyter refuses to start without --allow-root.
# Jupyter prints the URL to open (with its token) once the server is up.  The notebooks are
# stored with outputs we made; trusting them lets JupyterLab show their stored SVG traces and
# HTML before a learner runs anything (it hides untrusted SVG).
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)

lab: $(STAMP)
	@echo "Starting JupyterLab on notebooks/: open the http://127.0.0.1:... URL it prints below."
	@$(BIN)/jupyter trust notebooks/*.ipynb > /dev/null
	@# The environment's bin/ on PATH: the lab's server settings find the lab's TensorBoard
	@# (ipu-lab-tensorboard, which `%tensorboard` starts) there, and kernels the lab's commands.
	PATH="$(abspath $(BIN)):$$PATH" $(LAB_SERVER_CONFIG) $(BIN)/jupyter lab --notebook-dir=notebooks $(ALLOW_ROOT)

# The bundled data sample keeps test runs offline and reproducible.  The notebooks run with
# their exercises solved (IPU_LAB_SOLUTIONS=1: each check fills in its solution and fails the
# cell if the solution fails); tests/scripts/test_stored_exercises.py checks that the stored
# notebooks show them unsolved, with feedback and no traceback.  Each notebook is executed
# once, by nbval; tests/browser/ opens the stored notebooks in JupyterLab (headless Chromium),
# drives notebook 08's widgets and runs a short TensorFlow notebook there:
# scripts/ensure_browser.sh installs Debian's chromium-headless-shell when missing (as root),
# or says how to; IPU_LAB_CHROMIUM=/path/to/chrome picks another binary.  tests/lite/ opens the
# JupyterLite site in the same browser, so `make test` first builds it (`make lite`: about a
# minute the first time, from PyPI and npm, with npm from scripts/ensure_npm.sh; then seconds,
# offline).
# Everything runs in one pytest invocation on TEST_WORKERS pytest-xdist workers; the root
# conftest.py keeps each test file, each notebook and the browser tests on one worker.
# Three workers on two cores: much of the run waits (on Chromium, on child processes), and a
# third worker fills those waits (pytest 6.1 min with three, 7.1 min with two, 2026-11-27).
# Without a browser: make test PYTEST_ARGS='-m "not browser"' leaves the browser tests out, and
# with them the site's build; -m "not browser and not hub" npm too (the hub's proxy needs it).
# PYTEST_ARGS='-n 0' runs everything in one process.  Bytecode is cached even where the shell
# says not to (PYTHONDONTWRITEBYTECODE, set on some CI machines): each worker would otherwise
# compile and rewrite the assertions of every test module again, 6 s of CPU each (collection
# 7.7 s against 14 s), and every child compile the lab's modules.
BROWSER_TESTS := $(if $(findstring not browser,$(PYTEST_ARGS)),,yes)
# tests/hub/ rehearses a class on a real JupyterHub (bench/classroom.py: three learners, a
# killed kernel, a restarted server, a restarted hub), so `make test` installs the hub's tools
# (`make hub-tools`, beside the site's build);
# PYTEST_ARGS='-m "not hub"' leaves it out.
HUB_TESTS := $(if $(findstring not hub,$(PYTEST_ARGS)),,yes)
BUILDS := $(if $(BROWSER_TESTS),lite) $(if $(HUB_TESTS),hub-tools)
# Four jobs (on fresh clones, side by side: 24.9 / 26.8 s against 27.8 / 30.6 s with two): with
# two, a job slot idled while its target waited on PyPI or npm; with four the stage keeps both
# cores busy (alone, the lab's bytecode took 25 s of CPU, the two sites 21 s, the hub's venv 12 s
# and its proxy 2 s: about 61 s, in the stage's 31 s; 2026-11-30).
BUILD_JOBS := 4
TEST_WORKERS ?= 3
TEST_PATHS := $(PURE_MODULES) tests notebooks

test: $(STAMP)
	$(if $(BROWSER_TESTS),@$(STAGE) "Chromium (ensure_browser.sh)" -- bash scripts/ensure_browser.sh)
	$(if $(strip $(BUILDS)),@bash scripts/ensure_npm.sh)
	$(if $(strip $(BUILDS)),@$(STAGE) "builds: make -j$(BUILD_JOBS) $(strip $(BUILDS))" -- $(MAKE) --no-print-directory -j$(BUILD_JOBS) COMPILE_JOBS=1 $(BUILDS))
	@$(STAGE) "import layers (lint-imports)" -- $(BIN)/lint-imports --no-cache
	@status=0; PYTHONDONTWRITEBYTECODE= IPU_EMULATOR_DATA=sample IPU_LAB_SOLUTIONS=1 MPLBACKEND=Agg \
		IPU_LAB_LITE_SITE=$(LITE_OUT) $(STAGE) "tests (pytest, $(TEST_WORKERS) workers)" -- \
		$(BIN)/python -m pytest -n $(TEST_WORKERS) -p no:cacheprovider --nbval-lax \
		--doctest-modules $(TEST_PATHS) $(PYTEST_ARGS) \
		|| status=$$?; $(PYTHON) scripts/stage_times.py report $(MAKE_STARTED); exit $$status

# The simulator, views, widgets and exercises only, without TensorFlow: about 12 seconds on two
# cores.  Against 31e2a70 on fresh clones, alternating (2026-11-30, docs/setup-and-testing.md):
# 0.58 of its time in a shell that sets PYTHONDONTWRITEBYTECODE, 0.80 where both write bytecode.
# Bytecode is cached as for `make test` (PYTHONDONTWRITEBYTECODE cleared): each worker would
# otherwise compile every module and rewrite every test module's asserts again, about a second
# of CPU each.  The import layers are checked beside pytest's own start-up, which keeps one core
# busy for its first half second: lint-imports' report is printed after the tests, and a broken
# layer fails the target as before.
test-fast: $(STAMP)
	@layers=$$(mktemp); $(BIN)/lint-imports --no-cache > $$layers 2>&1 & lint=$$!; \
	MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest $(FAST_OPTIONS) $(FAST_SUITE); \
	status=$$?; wait $$lint || status=1; cat $$layers; rm -f $$layers; exit $$status

bench: $(STAMP)
	IPU_EMULATOR_DATA=sample $(BIN)/python bench/run_all.py

clean-env:
	rm -rf $(VENV)
