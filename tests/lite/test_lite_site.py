"""The zero-install JupyterLite site as a learner meets it: served as static files on
127.0.0.1, opened in headless Chromium, every notebook run in the browser's Pyodide kernel.

Notebook 08 is checked in detail: all cells run without an error, the playground's SVG trace
redraws at each of five schedule and split changes (widgets froze after a few changes in some
JupyterLite versions), an invalid gradient accumulation count shows the SDK's message, and
the learner saves an edit.  Its first trace, on a cold cache, must come within 1.5 times the
floor: a bare JupyterLite's kernel-ready time (the same JupyterLite, kernel and Pyodide with
nothing of ours), measured just before in the same browser.  Every other notebook of
lite/build.py's NOTEBOOKS runs top to bottom without an error.  Notebook 04 is the second
visit: it starts its own kernel (it shows widgets) after the reset notebooks/README.md gives
(clearing the site's data), on the warm cache; notebook 08 opened after it no longer holds
the learner's edit.  No request may leave 127.0.0.1: the site brings everything it needs.
The numbers (site size, downloads on the first and the second visit, page open to first
trace on a cold cache, the floor and the ratio, the second visit's start, redraw time) are
printed at the end of the run; README.md quotes them.
"""
import json
import re
import time
from pathlib import Path

import pytest

from tests.support.lab_driver import (VIEWPORT, code_cell, error_outputs, notebook_panel,
                                     save_notebook, screenshot, screenshots_dir,
                                     select_dropdown, stderr_outputs, wait_for_html_change,
                                     widget_html)
from tests.support.lite_driver import (NUMBERS, NetworkLog, clear_site_storage,
                                       kernel_ready, lite_build, lite_notebooks,
                                       open_in_running_kernel, open_notebook, site_size,
                                       start_run_all, wait_until_all_ran)

REPO = Path(__file__).resolve().parents[2]
PLAYGROUND = "08_pipeline_playground.ipynb"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
TRACE_CLASS = "ipu-playground-trace"
REDRAW_TIMEOUT = 60_000   # ms
# Five redraws; the split goes back to the notebook's own at the end, so the playground has
# four stages again and the accumulation count 6 below is invalid for Grouped (2N = 8).
CHANGES = [("schedule", "interleaved"), ("schedule", "sequential"), ("split", "middle"),
           ("split", "original"), ("schedule", "grouped")]
SDK_MESSAGE = re.compile(r"must be a multiple of \d+, but it is 6")
LEARNERS_EDIT = "a learner's edit, saved before the reset"
# A learner downloads the whole site on the first visit (a classroom's network carries it
# once per learner); 41 MB measured, mostly Pyodide and the JupyterLab front end.
MAX_SITE_MB = 60
# Issue 39: the playground's first trace within 1.5 times a bare JupyterLite's kernel-ready
# time (the same JupyterLite, kernel and Pyodide with nothing of ours, lite/build.py's bare
# site), both on a cold cache in this browser: what the site loads beyond that floor must
# wait until the first trace is drawn.
MAX_FLOOR_RATIO = 1.5


def assert_no_errors(page, network, name):
    errors = error_outputs(page)
    assert not errors, f"{name}: {len(errors)} cell(s) raised in the browser's kernel:\n" + \
        "\n---\n".join(e[-1500:] for e in errors)
    stderr = stderr_outputs(page).all_text_contents()
    assert not stderr, f"{name}: cells wrote to stderr:\n" + "\n---\n".join(stderr)
    assert not network.outside, (f"{len(network.outside)} request(s) left 127.0.0.1: "
                                 + ", ".join(network.outside[:10]))
    # Chromium asks for /favicon.ico on its own; JupyterLite's icon is lab/favicon.ico.
    missing = [e for e in network.errors if e != "404 /favicon.ico"]
    assert not missing, f"the site lacks what the page asked for: {missing}"


def test_the_site_serves_everything_itself(site):
    """The settings that keep the kernel off the internet, and the site's size."""
    config = json.loads((site / "jupyter-lite.json").read_text())["jupyter-config-data"]
    kernel = config["litePluginSettings"]["@jupyterlite/pyodide-kernel-extension:kernel"]
    assert kernel["disablePyPIFallback"] is True
    assert not re.match(r"https?:", kernel["pyodideUrl"]), kernel["pyodideUrl"]
    assert (site / kernel["pyodideUrl"]).is_file()
    lock = json.loads((site / "static/pyodide/pyodide-lock.json").read_text())
    absent = [p["file_name"] for p in lock["packages"].values()
              if not (site / "static/pyodide" / p["file_name"]).is_file()]
    assert not absent, f"pyodide-lock.json names wheels the site lacks: {absent}"
    size, files = site_size(site)
    NUMBERS.update(site_bytes=size, site_files=files)
    assert size < MAX_SITE_MB * 1e6, f"the site is {size / 1e6:.1f} MB"


def bare_kernel_ready(chromium, bare_server) -> float:
    """The floor: seconds from opening the bare site's empty notebook to a trivial cell's
    result, in a browser context of its own (a cold cache)."""
    context = chromium.new_context(viewport=VIEWPORT)
    network = NetworkLog(context, bare_server.origin)
    try:
        page = context.new_page()
        seconds = kernel_ready(page, bare_server.origin, lite_build().BARE_NOTEBOOK)
        assert_no_errors(page, network, "the bare JupyterLite site")
    finally:
        context.close()
    return round(seconds, 1)


def check_the_playground(page, context, server, chromium, bare_server):
    """Notebook 08 in detail: its first visit (cold cache) against the bare site's floor,
    five redraws, the SDK's message, and the learner's saved edit (the reset before notebook
    04's visit must drop it: ``test_the_reset_dropped_the_learners_edit``)."""
    network, origin = context.network, server.origin
    NUMBERS["bare"] = {"kernel_ready_s": bare_kernel_ready(chromium, bare_server)}
    NUMBERS["cold"] = run_playground(page, origin)
    NUMBERS["floor_ratio"] = round(NUMBERS["cold"]["first_trace_s"]
                                   / NUMBERS["bare"]["kernel_ready_s"], 2)
    NUMBERS["floor_ratio_limit"] = MAX_FLOOR_RATIO
    NUMBERS.update(downloaded_bytes=server.sent_bytes(), requests=len(network.urls))
    assert_no_errors(page, network, PLAYGROUND)

    trace = widget_html(page, TRACE_CLASS)
    split = notebook_panel(page).locator(".widget-select-multiple").filter(
        has_text="new stage at").locator("select").first
    original = split.evaluate("s => [...s.selectedOptions].map(o => o.label)")
    redraws = []
    for what, option in CHANGES:
        before = trace.inner_html()
        started = time.monotonic()
        if what == "schedule":
            select_dropdown(page, "schedule", option)
        else:
            labels = split.locator("option").all_text_contents()
            chosen = [labels[len(labels) // 2]] if option == "middle" else original
            assert chosen != split.evaluate("s => [...s.selectedOptions].map(o => o.label)")
            split.select_option(label=chosen)
        try:
            wait_for_html_change(trace, before, timeout=REDRAW_TIMEOUT)
        except Exception:
            pytest.fail(f"change {len(redraws) + 1} of {len(CHANGES)} ({what} -> {option}): "
                        "the trace did not redraw (the widgets froze)", pytrace=False)
        redraws.append(round(time.monotonic() - started, 2))
        trace.locator("svg").first.wait_for(state="visible", timeout=1000)
        if what == "schedule":
            assert option in trace.inner_text(), f"the trace does not say {option}"
    NUMBERS["redraw_s"] = redraws

    # The message in the playground's own output area (the notebook prints it in a cell too).
    playground = notebook_panel(page).locator(".jp-OutputArea").filter(
        has=page.locator(f".{TRACE_CLASS}")).first
    assert not playground.get_by_text(SDK_MESSAGE).count(), "the message shows too early"
    last_trace = trace.inner_html()
    count = playground.locator(".widget-inline-hbox").filter(
        has_text="gradient accumulation count").locator("input").first
    count.fill("6")
    count.press("Enter")
    playground.get_by_text(SDK_MESSAGE).first.wait_for(state="visible", timeout=REDRAW_TIMEOUT)
    assert trace.inner_html() == last_trace, "the last valid trace should stay"
    assert_no_errors(page, network, PLAYGROUND)
    screenshot(playground, screenshots_dir() / "lite_08_playground_invalid_count.png")

    # The learner edits a cell and saves (into the browser's storage, the site's only place
    # for it); then resets the site as notebooks/README.md says: clearing the site's data.
    first_cell = code_cell(page, 0)
    first_cell.locator(".cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type("\n# " + LEARNERS_EDIT)
    assert LEARNERS_EDIT in first_cell.inner_text()
    save_notebook(page)

    assert NUMBERS["floor_ratio"] <= MAX_FLOOR_RATIO, (
        f"the playground's first trace took {NUMBERS['cold']['first_trace_s']} s on a cold "
        f"cache, {NUMBERS['floor_ratio']} times a bare JupyterLite's kernel-ready time "
        f"({NUMBERS['bare']['kernel_ready_s']} s): load less before the first trace")


def run_playground(page, origin) -> dict:
    """Open notebook 08, run all cells; seconds from asking for the page to the kernel being
    idle, the first trace drawn and every cell run."""
    started = time.monotonic()
    times = {"kernel_idle_s": open_notebook(page, origin, PLAYGROUND)}
    start_run_all(page)
    trace = notebook_panel(page).locator(f".{TRACE_CLASS} svg").first
    trace.wait_for(state="visible", timeout=180_000)
    times["first_trace_s"] = time.monotonic() - started
    wait_until_all_ran(page)
    times["all_cells_s"] = time.monotonic() - started
    return {k: round(v, 1) for k, v in times.items()}


# The playground first: its first visit is the cold-cache measurement.
NOTEBOOKS = sorted(lite_notebooks(), key=lambda name: name != PLAYGROUND)


def test_the_playground_runs_in_the_browser(shared_page, context, server, chromium, bare_server):
    check_the_playground(shared_page, context, server, chromium, bare_server)
    # The other notebooks may run in its kernel.
    shared_page.kernel = shared_page.first = PLAYGROUND


def shows_widgets(name: str) -> bool:
    """Whether the notebook, as stored in notebooks/ with its outputs, displays a widget."""
    stored = json.loads((REPO / "notebooks" / name).read_text(encoding="utf-8"))
    return any(WIDGET_VIEW in out.get("data", {}) for cell in stored["cells"]
               for out in cell.get("outputs", []))


@pytest.mark.parametrize("name", [name for name in NOTEBOOKS if name != PLAYGROUND])
def test_the_notebook_runs_in_the_browser(shared_page, context, server, name):
    """Every other notebook of the site runs top to bottom in one tab, in as few kernels as
    it can: each Pyodide costs tens of CPU seconds to start, and what it starts is the same
    for every notebook.  A notebook that shows widgets is opened as a learner opens it and
    starts its own kernel (JupyterLite draws a kernel's widgets only in the notebook that
    started it); the others connect to the kernel running in the tab, the playground's.  A
    shared kernel keeps the names of the notebooks before; nbval runs each notebook in a
    fresh kernel, so a name a notebook forgot to define fails there, and what only the
    browser's kernel can get wrong (a package the site lacks, a module Pyodide cannot run,
    stderr) fails here as in a kernel of its own."""
    page, origin = shared_page, server.origin
    second_visit = page.kernel is not None and shows_widgets(name) and not page.reset
    started = time.monotonic()
    if page.kernel is None or shows_widgets(name):
        # The reset notebooks/README.md gives: the site's data cleared, the HTTP cache kept.
        clear_site_storage(page, origin)
        sent = server.sent_bytes()
        kernel_idle = open_notebook(page, origin, name)
        page.kernel = page.first = name
        how = "its own kernel"
    else:
        how = f"the kernel of {page.first[:2]}"
        page.kernel = open_in_running_kernel(page, name, page.kernel)
    start_run_all(page)
    wait_until_all_ran(page)
    NUMBERS.setdefault("notebooks_s", {})[name] = [round(time.monotonic() - started, 1), how]
    if second_visit:
        # The first notebook after the reset: a second visit, with a warm cache.
        page.reset = name
        NUMBERS["warm"] = {"notebook": name, "kernel_idle_s": round(kernel_idle, 1),
                           "all_cells_s": round(time.monotonic() - started, 1)}
        NUMBERS["warm_downloaded_bytes"] = server.sent_bytes() - sent
    loading = notebook_panel(page).get_by_text("Loading widget...")
    try:
        loading.first.wait_for(state="detached", timeout=REDRAW_TIMEOUT)
    except Exception:
        pytest.fail(f"{name}: {loading.count()} widget(s) never displayed", pytrace=False)
    screenshot(page, screenshots_dir() / f"lite_{name.removesuffix('.ipynb')}.png")
    assert_no_errors(page, context.network, name)


def test_the_reset_dropped_the_learners_edit(shared_page):
    """Notebook 08 opened after the reset (in the tab of the second visit, connected to its
    kernel) is the site's own again: the edit the learner saved is gone."""
    page = shared_page
    assert page.reset, "no notebook started a kernel of its own after the reset"
    page.kernel = open_in_running_kernel(page, PLAYGROUND, page.kernel)
    first_cell = code_cell(page, 0).inner_text()
    assert first_cell.strip(), "notebook 08's first cell is empty"
    assert LEARNERS_EDIT not in first_cell, "the reset kept the edit"


def test_the_playground_is_in_the_site():
    assert PLAYGROUND in NOTEBOOKS
