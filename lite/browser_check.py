"""Open the built JupyterLite site's notebook 00 in headless Chromium and check it end to end.

    python lite/browser_check.py [SITE_DIR]      (default: build/lite)

Serves SITE_DIR on 127.0.0.1 (python -m http.server), records every request the page and its
workers make, runs all cells, waits for the playground's SVG trace, changes the schedule and
the split five times (the trace must change each time), types an invalid accumulation count
(the SDK's message must show), reloads for a warm-cache start, and prints the numbers.
Exits non-zero on an error output, a request leaving 127.0.0.1, or a missing trace.
Uses the JupyterLab helpers of tests/browser/lab_driver.py (Playwright, system Chromium).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests/browser"))

from lab_driver import (TRACEBACK_PATTERN, _CELL_STATES_JS,  # noqa: E402
                        click_menu, error_outputs, free_port, launch_chromium, notebook_panel,
                        select_dropdown, wait_for_html_change, wait_for_kernel_idle,
                        widget_html)

NOTEBOOK = "00_pipeline_playground.ipynb"
TRACE_CLASS = "ipu-playground-trace"
START_TIMEOUT = 240_000   # ms: Pyodide + kernel start on a busy 2-core machine
RUN_TIMEOUT = 150_000


def serve(site: Path, port: int) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind",
                             "127.0.0.1", "--directory", str(site)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).close()
            return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise SystemExit("http.server did not start")


def open_and_run(page, url: str, log) -> dict:
    times = {}
    t0 = time.monotonic()
    page.goto(url, wait_until="domcontentloaded", timeout=START_TIMEOUT)
    panel = notebook_panel(page)
    panel.locator(".jp-Cell").first.wait_for(timeout=START_TIMEOUT)
    wait_for_kernel_idle(page, START_TIMEOUT)
    times["kernel_idle_s"] = time.monotonic() - t0
    click_menu(page, "Run", "Run All Cells")
    page.wait_for_function(
        """([panel, traceback]) => !!panel.querySelector('.%s svg') ||
             (%s)([panel, traceback]).some(c => c.error)""" % (TRACE_CLASS, _CELL_STATES_JS.strip()),
        arg=[panel.element_handle(), TRACEBACK_PATTERN], timeout=RUN_TIMEOUT, polling=100)
    trace = widget_html(page, TRACE_CLASS)
    trace.locator("svg").wait_for(state="visible", timeout=1000)
    times["first_trace_s"] = time.monotonic() - t0
    # Done when the last code cell ran (Run All goes in order) or a cell raised.  Cells with a
    # hidden source (lesson checks) show no prompt number, so lab_driver's "every cell has a
    # count" test never holds here.
    page.wait_for_function(
        """([panel, traceback]) => {
             const status = panel.querySelector('.jp-Notebook-ExecutionIndicator')
                                 ?.getAttribute('data-status');
             const cells = (%s)([panel, traceback]);
             return status === 'idle' && !cells.some(c => c.running) &&
                    (cells[cells.length - 1].count > 0 || cells.some(c => c.error));
           }""" % _CELL_STATES_JS.strip(),
        arg=[panel.element_handle(), TRACEBACK_PATTERN], timeout=RUN_TIMEOUT, polling=250)
    times["all_cells_s"] = time.monotonic() - t0
    log("  times: " + ", ".join(f"{k} {v:.1f}" for k, v in times.items()))
    return times


def main() -> int:
    site = Path(sys.argv[1] if len(sys.argv) > 1 else REPO / "build/lite").resolve()
    port = free_port()
    origin = f"http://127.0.0.1:{port}/"
    url = f"{origin}lab/index.html?path={NOTEBOOK}"
    requests, outside, console_errors = [], [], []
    failures = []
    server = serve(site, port)
    from playwright.sync_api import sync_playwright
    try:
        with sync_playwright() as pw:
            browser = launch_chromium(pw)
            context = browser.new_context(viewport={"width": 1400, "height": 1000})

            def on_request(req):
                requests.append(req.url)
                if not req.url.startswith((origin, "data:", "blob:")):
                    outside.append(req.url)
            context.on("request", on_request)
            failed = []
            context.on("response", lambda r: r.status >= 400 and failed.append(
                f"{r.status} {r.url.replace(origin, '/')}"))
            page = context.new_page()
            console = []
            page.on("console", lambda m: (console.append(f"{m.type}: {m.text}"),
                                          m.type == "error" and console_errors.append(m.text)))
            page.on("worker", lambda w: print("  worker:", w.url.split("/")[-1]))

            print("cold start")
            try:
                cold = open_and_run(page, url, print)
            except Exception:
                page.screenshot(path="/tmp/lite-fail.png")
                print("\n".join(c[:400] for c in console[-60:]))
                print("error outputs:", error_outputs(page))
                print("states:", page.evaluate(_CELL_STATES_JS, [
                    notebook_panel(page).element_handle(), TRACEBACK_PATTERN]))
                print("indicator:", page.evaluate("""() => [...document.querySelectorAll(
                    '.jp-Notebook-ExecutionIndicator')].map(e => e.getAttribute('data-status'))"""))
                print("outside:", outside)
                raise
            errors = error_outputs(page)
            if errors:
                failures.append(f"{len(errors)} error outputs: " + " | ".join(
                    e[-300:] for e in errors))
            states = page.evaluate(_CELL_STATES_JS, [notebook_panel(page).element_handle(),
                                                     TRACEBACK_PATTERN])
            print(f"  cells run: {sum(1 for s in states if s['count'])}/{len(states)}")

            trace = widget_html(page, TRACE_CLASS)
            redraws = []
            # Five redraws; the split goes back, so 4 stages make the count 6 invalid below.
            changes = [("schedule", "interleaved"), ("schedule", "sequential"), ("split", "mid"),
                       ("split", "back"), ("schedule", "grouped")]
            split = notebook_panel(page).locator(".widget-select-multiple").filter(
                has_text="new stage at").locator("select").first
            original = split.evaluate("s => [...s.selectedOptions].map(o => o.label)")
            for what, option in changes:
                before = trace.inner_html()
                t = time.monotonic()
                if what == "schedule":
                    select_dropdown(page, "schedule", option)
                else:
                    labels = split.locator("option").all_text_contents()
                    chosen = [labels[len(labels) // 2]] if option == "mid" else original
                    split.select_option(label=chosen)
                    option = ", ".join(chosen)
                wait_for_html_change(trace, before, timeout=60_000)
                redraws.append(time.monotonic() - t)
                print(f"  {what} -> {option}: redrawn in {redraws[-1]:.2f} s")
            # The first playground's own output area: the notebook also prints the message.
            playground = notebook_panel(page).locator(".jp-OutputArea").filter(
                has=page.locator(f".{TRACE_CLASS}")).first
            message = playground.get_by_text("must be a multiple of 8, but it is 6")
            if message.count():
                failures.append("the SDK message shows before the invalid count is typed")
            count = playground.locator(".widget-inline-hbox").filter(
                has_text="gradient accumulation count").locator("input").first
            count.fill("6")
            count.press("Enter")
            message.first.wait_for(state="visible", timeout=60_000)
            print("  invalid count 6: SDK message shown")
            page.screenshot(path="/tmp/lite-check.png")

            print("warm start (reload, same browser cache)")
            warm = open_and_run(page, url, print)
            browser.close()
    finally:
        server.terminate()
        server.wait(10)
    size = subprocess.run(["du", "-sh", str(site)], capture_output=True, text=True).stdout.split()[0]
    print(json.dumps({"site_size": size, "requests": len(requests), "outside_127": outside,
                      "cold": cold, "warm": warm,
                      "redraw_s": [round(r, 2) for r in redraws],
                      "console_errors": console_errors[:10],
                      "http_errors": sorted(set(failed))}, indent=1, default=str))
    wheels = sorted({re.sub(r"\?.*", "", r.split("/")[-1]) for r in requests if ".whl" in r})
    print("wheels fetched:", ", ".join(wheels))
    if outside:
        failures.append(f"{len(outside)} requests left 127.0.0.1")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
