#!/usr/bin/env bash
# Make sure a Chromium binary is available for the browser tests (tests/browser/, tests/lite/).
# `make test` runs this before pytest.
#
#   IPU_LAB_CHROMIUM=/path/to/chrome        use that binary (Chrome or Chromium), install nothing
#   /usr/bin/chromium-headless-shell exists  nothing to do
#   root with apt-get                        apt-get install Debian's chromium-headless-shell
#                                            (Chromium without its windowing layer: the browser
#                                            tests take 0.87 of the CPU they take on the full
#                                            browser, bench/headless_shell.py), or chromium
#                                            where the sources have no such package
#   /usr/bin/chromium exists                 use it (tests/support/lab_driver.py falls back to it)
#   otherwise                                say how to install one and exit 1
#
# Playwright drives the binary found here; `playwright install` is never used, because it
# downloads a browser build of its own, which closed networks refuse.
set -euo pipefail

SHELL_BIN=/usr/bin/chromium-headless-shell
FULL=/usr/bin/chromium

if [ -n "${IPU_LAB_CHROMIUM:-}" ]; then
    if [ -f "$IPU_LAB_CHROMIUM" ] && [ -x "$IPU_LAB_CHROMIUM" ]; then
        exit 0
    fi
    echo "ensure_browser: IPU_LAB_CHROMIUM=$IPU_LAB_CHROMIUM is not an executable file." >&2
    echo "  Point it at a Chrome or Chromium binary, or unset it to use $SHELL_BIN or $FULL." >&2
    exit 1
fi

if [ -x "$SHELL_BIN" ]; then
    exit 0
fi

if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "ensure_browser: installing Debian's chromium-headless-shell for the browser tests (apt-get)..." >&2
    export DEBIAN_FRONTEND=noninteractive
    if apt-get update -qq >/dev/null && apt-get install -y -qq chromium-headless-shell >/dev/null 2>&1 \
            && [ -x "$SHELL_BIN" ]; then
        echo "ensure_browser: $("$SHELL_BIN" --version 2>/dev/null || echo chromium-headless-shell) installed." >&2
        exit 0
    fi
    if [ -x "$FULL" ]; then
        echo "ensure_browser: no chromium-headless-shell package here; the tests use $FULL." >&2
        exit 0
    fi
    apt-get install -y -qq chromium >/dev/null
    if [ -x "$FULL" ]; then
        echo "ensure_browser: $("$FULL" --version 2>/dev/null || echo chromium) installed." >&2
        exit 0
    fi
    echo "ensure_browser: apt-get installed neither $SHELL_BIN nor $FULL." >&2
    exit 1
fi

if [ -x "$FULL" ]; then
    exit 0
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
    echo "ensure_browser: the browser tests (tests/browser/, tests/lite/) need Chromium, and neither $SHELL_BIN nor $FULL is installed."
    if [ -n "$found" ]; then
        echo "  Found a browser; to use it:  export IPU_LAB_CHROMIUM=\"$found\""
    fi
    echo "  Install Chromium, or point IPU_LAB_CHROMIUM at a Chrome/Chromium binary, then run 'make test':"
    echo "    Debian:         sudo apt-get install chromium-headless-shell   (installs $SHELL_BIN)"
    echo "    Debian/Ubuntu:  sudo apt-get install chromium     (installs $FULL)"
    echo "    macOS:          export IPU_LAB_CHROMIUM=\"/Applications/Google Chrome.app/Contents/MacOS/Google Chrome\""
    echo "  To run the other tests without a browser:  make test PYTEST_ARGS='-m \"not browser\"'"
} >&2
exit 1
