# make test-colab (the Makefile reads this file for that goal only): every notebook under
# nbval, as `make test` runs them, in an environment with Google Colab's stock runtime's
# versions (colab/runtime.txt: TensorFlow 2.20, tf_keras, Keras 3, numpy 2.1, ipywidgets 7.7.1)
# and the lab installed beside them by the notebooks' Colab cell.
# pip check first: the lab's own requirements are met by that runtime, so installing the lab on
# Colab replaces none of its packages.  CI runs it after `make test` (.ci/run).  Each TensorFlow
# notebook runs on the other CPU kernel path than in `make test` (IPU_LAB_KERNEL_PATHS=swapped:
# tests/support/kernel_paths.py), so CI runs every one on both oneDNN's and Eigen's kernels.
# On Colab's own Python (3.13) where this machine has one (on PATH, or pyenv's), else $(PYTHON):
# the stage's name says which ran.
COLAB_PYTHON ?= $(or $(firstword $(foreach python,$(shell command -v python3.13) \
	$(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13),\
	$(shell $(python) -c 'print("$(python)")' 2>/dev/null))),$(PYTHON))
COLAB_PYTHON_VERSION := $(shell $(COLAB_PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
COLAB_VENV := build/colab-venv-$(COLAB_PYTHON_VERSION)
COLAB_STAMP := $(COLAB_VENV)/.installed-stamp

$(COLAB_STAMP): colab/runtime.txt pyproject.toml
	@test -x $(COLAB_VENV)/bin/python || $(COLAB_PYTHON) -m venv $(COLAB_VENV)
	$(STAGE) "Colab-like environment (Python $(COLAB_PYTHON_VERSION))" -- bash -c '$(call install,$(COLAB_VENV),-r colab/runtime.txt)'
	@touch $@

# A kernel's first start in this fresh environment compiles everything it imports: on a busy
# two-core machine one took over nbval's default 60 s to answer (CI, 2026-11-29), so 180 s.
# The lab goes in as a learner's first cell puts it on Colab (scripts/colab_release.py), from
# this checkout instead of the release's archive; pip check then finds nothing missing or
# replaced.
test-colab: $(COLAB_STAMP)
	$(COLAB_VENV)/bin/python -m pip uninstall --quiet --yes ipu-emulator
	$(STAGE) "the Colab install cell" -- $(COLAB_VENV)/bin/python scripts/colab_release.py install-as-colab
	$(COLAB_VENV)/bin/python -m pip check
	IPU_EMULATOR_DATA=sample IPU_LAB_SOLUTIONS=1 MPLBACKEND=Agg IPU_LAB_KERNEL_PATHS=swapped \
		$(STAGE) "notebooks on Colab's versions (Python $(COLAB_PYTHON_VERSION))" -- \
		$(COLAB_VENV)/bin/python -m pytest -n $(TEST_WORKERS) -p no:cacheprovider --nbval-lax \
		--nbval-kernel-startup-timeout 180 notebooks
