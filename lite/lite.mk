# The zero-install JupyterLite site (issue 15), included by the Makefile after its
# VENV/PYTHON/BIN/STAMP definitions.
#   make lite        build the site into build/lite (static files: serve them anywhere)
#   make serve-lite  build, then serve build/lite on http://127.0.0.1:8000/lab/index.html
#   make test-lite   build, then run only the site's browser test (tests/lite/)
# The first build reaches PyPI and npm only (about a minute); the site needs nothing at run
# time.  npm comes from scripts/ensure_npm.sh (Debian's package when root, else it says how
# to install it).  The build tools live in build/lite-venv (git-ignored), apart from the lab's
# .venv, so the lab's environment never carries them.  Every `make lite` rebuilds the site
# from the working tree; the Pyodide core and the wheels stay in build/lite-work, so a
# rebuild takes seconds and needs no network (and neither does `make test` after its first run).
LITE_VENV ?= build/lite-venv
LITE_OUT ?= build/lite
LITE_WORK ?= build/lite-work
# The bare JupyterLite site (lite/build.py --bare-out), the floor tests/lite/ times the site against.
LITE_BARE ?= $(LITE_OUT)-bare
LITE_STAMP := $(LITE_VENV)/.installed-stamp

.PHONY: lite serve-lite test-lite

$(LITE_STAMP): lite/requirements-lite.txt
	@$(call tool_venv,$(LITE_VENV))
	$(call tool_install,$(LITE_VENV),-r lite/requirements-lite.txt)
	@touch $(LITE_STAMP)

lite: $(LITE_STAMP)
	@bash scripts/ensure_npm.sh
	$(LITE_VENV)/bin/python lite/build.py --out $(LITE_OUT) --work $(LITE_WORK) --bare-out $(LITE_BARE)

serve-lite: lite
	@echo "Open http://127.0.0.1:8000/lab/index.html (Ctrl+C stops the server)."
	$(LITE_VENV)/bin/python -m http.server 8000 --bind 127.0.0.1 --directory $(LITE_OUT)

# Playwright comes from the lab's .venv ([test] extra), Chromium from scripts/ensure_browser.sh.
test-lite: lite $(STAMP)
	@bash scripts/ensure_browser.sh
	IPU_LAB_LITE_SITE=$(LITE_OUT) $(BIN)/python -m pytest -p no:cacheprovider $(PYTEST_ARGS) tests/lite
