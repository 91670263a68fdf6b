# A real JupyterHub serving this lab on this machine (issue 25), included by the Makefile after
# its VENV/PYTHON/BIN/STAMP definitions.
#   make hub        install the hub if missing, then start it (Ctrl-C stops it; files stay)
#                   HUB_IP=0.0.0.0 lets other machines in; HUB_PORT, HUB_ADMIN, HUB_ROSTER or HUB_LEARNERS,
#                   HUB_ISOLATION, HUB_PASSWORD, HUB_CULL_SERVERS, HUB_MEM_LIMIT: hub/README.md
#   make progress   the class's exercise progress, who is stuck (HUB_HOMES; WATCH=30 repeats)
#   make hub-tools  install the hub without starting it (`make test` does, for its rehearsal)
# The hub lives in build/hub-venv (hub/requirements-hub.txt) and its proxy in build/hub-node
# (configurable-http-proxy from npm, npm from scripts/ensure_npm.sh), apart from the lab's .venv.
# The learners' servers run on the lab's .venv Python; `jupyterhub` itself, which they also
# need, is in build/hub-singleuser-venv, an overlay that sees .venv's packages and adds only
# what .venv lacks (hub/singleuser.py appends it after .venv's own): hub/overlay_requirements.py
# lists those, pinned as the hub's venv has them, and they are installed without resolving
# again (uv cannot see .venv's packages through the overlay's .pth file).  State and homes:
# build/hub-state, build/hub-homes (git-ignored, kept by every `make hub`).
HUB_VENV ?= build/hub-venv
HUB_USER_VENV ?= build/hub-singleuser-venv
HUB_NODE ?= build/hub-node
HUB_CHP_VERSION ?= ~4.6.3
HUB_STAMP := $(HUB_VENV)/.installed-stamp
HUB_PROXY := $(HUB_NODE)/node_modules/.bin/configurable-http-proxy
HUB_IP ?= 127.0.0.1
HUB_PORT ?= 8000
# compileall's worker processes for the bytecode below: 0, one per core, when the target runs
# alone (`make hub`); `make test` builds it beside the site and the hub's venv and passes 1,
# since one process compiles the same files with about a quarter less CPU than a pool of two
# (15.0 s against 20.4 s for the lab's, timed alone on a fresh clone) and the other jobs keep
# the second core busy.
COMPILE_JOBS ?= 0

.PHONY: hub hub-tools progress
# $(call purelib,VENV): the shell's expansion of VENV's site-packages folder, at recipe time.
purelib = $$($(1)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
HUB_HOMES ?= $(or $(IPU_HUB_HOMES),build/hub-homes)

$(HUB_STAMP): hub/requirements-hub.txt $(if $(filter 0,$(LOCKED)),,locks/hub.txt) $(STAMP)
	@$(call tool_venv,$(HUB_VENV))
	$(call tool_install,$(HUB_VENV),-r hub/requirements-hub.txt $(call locked,hub))
	@test -x $(HUB_USER_VENV)/bin/python || $(BIN)/python -m venv --without-pip $(HUB_USER_VENV)
	@echo "import site; site.addsitedir('$(call purelib,$(VENV))')" \
		> $(call purelib,$(HUB_USER_VENV))/zz_lab_venv.pth
	$(if $(filter 0,$(USE_UV)),$(HUB_VENV)/bin/python -m pip --python $(HUB_USER_VENV)/bin/python install,$(call tool_uv,$(HUB_VENV)) pip install --python $(HUB_USER_VENV)/bin/python) \
		--quiet --no-deps $$($(HUB_VENV)/bin/python hub/overlay_requirements.py $(call purelib,$(VENV)))
	-@$(BIN)/python -m compileall -q -j $(COMPILE_JOBS) $(HUB_USER_VENV)/lib > /dev/null
	@touch $(HUB_STAMP)

# Bytecode for every module a learner's server or kernel can import, once: isolated learners
# (not root) cannot write __pycache__ in .venv, so without it each server and kernel would
# compile what it imports at every start (the overlay's is compiled above).  The test tools
# and the packages' own test suites are left out: a fifth of the files.  Its own target, so
# that `make -j` compiles while the hub's venv and the site are built.  A few files of
# packages' test data are not Python 3: compileall says so, and that is not an error here.
LAB_BYTECODE := $(VENV)/.bytecode-stamp
NOT_FOR_LEARNERS := '/(pip|setuptools|_pytest|pytest[^/]*|xdist|hypothesis|playwright|nbval|importlinter|grimp)/|/tests/'
$(LAB_BYTECODE): $(STAMP)
	-@$(BIN)/python -m compileall -q -j $(COMPILE_JOBS) -x $(NOT_FOR_LEARNERS) $(call purelib,$(VENV)) > /dev/null
	@touch $@

$(HUB_PROXY):
	@bash scripts/ensure_npm.sh
	npm install --silent --no-save --no-package-lock --prefix $(HUB_NODE) configurable-http-proxy@$(HUB_CHP_VERSION)

hub-tools: $(STAMP) $(LAB_BYTECODE) $(HUB_STAMP) $(HUB_PROXY)

hub: hub-tools
	HUB_IP=$(HUB_IP) HUB_PORT=$(HUB_PORT) \
		$(HUB_VENV)/bin/jupyterhub -f hub/jupyterhub_config.py

# The instructor's view: one line a learner from their progress files (no network, reads only).
progress: $(STAMP)
	$(BIN)/python -m ipu_emulator progress $(HUB_HOMES) $(if $(WATCH),--watch $(WATCH))
