#!/usr/bin/env bash
# Make sure npm is available for the JupyterLite build (lite/build.py takes Pyodide's core
# from the `pyodide` npm package).  `make lite` runs this first, and so `make test` does too.
#
#   npm on PATH             nothing to do
#   root with apt-get       apt-get update && apt-get install -y npm (Debian's package, with nodejs)
#   otherwise               say how to install it and exit 1
#
# Same approach as scripts/ensure_browser.sh: only the distribution's own package, nothing
# fetched from elsewhere.
set -euo pipefail

if command -v npm >/dev/null 2>&1; then
    exit 0
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "ensure_npm: installing Debian's npm for the JupyterLite build (apt-get)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends npm >/dev/null
    if command -v npm >/dev/null 2>&1; then
        echo "ensure_npm: npm $(npm --version 2>/dev/null) installed." >&2
        exit 0
    fi
    echo "ensure_npm: apt-get install npm finished but npm is not on PATH." >&2
    exit 1
fi

{
    echo "ensure_npm: the JupyterLite site (make lite) needs npm, and it is not on PATH."
    echo "  Install it (it brings Node.js), then run 'make lite' or 'make test' again:"
    echo "    Debian/Ubuntu:  sudo apt-get install npm"
    echo "    macOS:          brew install node"
    echo "  To run the other tests without the site and the browser:  make test PYTEST_ARGS='-m \"not browser\"'"
} >&2
exit 1
