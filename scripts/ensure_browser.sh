#!/usr/bin/env bash
# Make sure a Chromium binary is available for the browser tests (tests/browser/).
# `make test` runs this before pytest.
#
#   IPU_LAB_CHROMIUM=/path/to/chrome  use that binary (Chrome or Chromium) and install nothing
#   /usr/bin/chromium exists          nothing to do
#   root with apt-get                 apt-get update && apt-get install -y chromium (Debian's package)
#   otherwise                         say how to install it and exit 1
#
# Playwright drives the binary found here; `playwright install` is never used, because it
# downloads a browser build of its own, which closed networks refuse.
set -euo pipefail

DEFAULT=/usr/bin/chromium

if [ -n "${IPU_LAB_CHROMIUM:-}" ]; then
    if [ -f "$IPU_LAB_CHROMIUM" ] && [ -x "$IPU_LAB_CHROMIUM" ]; then
        exit 0
    fi
    echo "ensure_browser: IPU_LAB_CHROMIUM=$IPU_LAB_CHROMIUM is not an executable file." >&2
    echo "  Point it at a Chrome or Chromium binary, or unset it to use $DEFAULT." >&2
    exit 1
fi

if [ -x "$DEFAULT" ]; then
    exit 0
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "ensure_browser: installing Debian's chromium for the browser tests (apt-get)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq chromium >/dev/null
    if [ -x "$DEFAULT" ]; then
        echo "ensure_browser: $("$DEFAULT" --version 2>/dev/null || echo chromium) installed." >&2
        exit 0
    fi
    echo "ensure_browser: apt-get install chromium finished but $DEFAULT is missing." >&2
    exit 1
fi

# Not root, or no apt-get: look for a browser the user could point IPU_LAB_CHROMIUM at.
found=""
for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if path="$(command -v "$name" 2>/dev/null)"; then
        found="$path"
        break
    fi
done
for app in "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome" \
           "/Applications/Chromium.app/Contents/MacOS/Chromium"; do
    if [ -z "$found" ] && [ -x "$app" ]; then
        found="$app"
    fi
done

{
    echo "ensure_browser: the browser tests (tests/browser/) need Chromium, and $DEFAULT is missing."
    if [ -n "$found" ]; then
        echo "  Found a browser; to use it:  export IPU_LAB_CHROMIUM=\"$found\""
    fi
    echo "  Install Chromium, or point IPU_LAB_CHROMIUM at a Chrome/Chromium binary, then run 'make test':"
    echo "    Debian/Ubuntu:  sudo apt-get install chromium     (installs $DEFAULT)"
    echo "    macOS:          export IPU_LAB_CHROMIUM=\"/Applications/Google Chrome.app/Contents/MacOS/Google Chrome\""
    echo "  To run the other tests without a browser:  make test PYTEST_ARGS='-m \"not browser\"'"
} >&2
exit 1
