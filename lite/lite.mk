# The zero-install JupyterLite site (issue 15).  Meant to be included by the Makefile, after
# its VENV/PYTHON/BIN/STAMP definitions:   include lite/lite.mk
#   make lite        build the site into build/lite (static files: serve them anywhere)
#   make serve-lite  serve build/lite on http://127.0.0.1:8000/lab/index.html
#   make test-lite   build, then open notebook 00 in headless Chromium and check it end to end
# Build needs npm (Debian: apt-get install npm) and the registries (PyPI, npm); the site
# itself needs nothing at run time.  Its build tools live in build/lite-venv (git-ignored),
# apart from the lab's .venv.
LITE_VENV := build/lite-venv
LITE_OUT := build/lite
LITE_WORK := build/lite-work
LITE_STAMP := $(LITE_VENV)/.installed-stamp

.PHONY: lite serve-lite test-lite

$(LITE_STAMP): lite/requirements-lite.txt
	$(PYTHON) -m venv $(LITE_VENV)
	$(LITE_VENV)/bin/python -m pip install --quiet -r lite/requirements-lite.txt
	@touch $(LITE_STAMP)

lite: $(LITE_STAMP)
	$(LITE_VENV)/bin/python lite/build.py --out $(LITE_OUT) --work $(LITE_WORK)

serve-lite: lite
	$(LITE_VENV)/bin/python -m http.server 8000 --bind 127.0.0.1 --directory $(LITE_OUT)

# Playwright comes from the lab's .venv ([test] extra); Chromium from scripts/ensure_browser.sh.
test-lite: lite $(STAMP)
	@bash scripts/ensure_browser.sh
	$(BIN)/python lite/browser_check.py $(LITE_OUT)
