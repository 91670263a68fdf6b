"""Fixtures for the JupyterLite site's browser test: the built site served on 127.0.0.1, one
headless Chromium, and one browser context whose every request is recorded.

``make test`` builds the site first (``make lite``, into build/lite); ``IPU_LAB_LITE_SITE``
points the test at another build.  Every test here gets the ``browser`` marker, like
tests/browser/, and the numbers the test measures are printed at the end of the run (and
written to build/lite_numbers.json).
"""
import json
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE.parent / "browser"))   # lab_driver: Chromium and JupyterLab helpers
sys.path.insert(0, str(HERE))

from lab_driver import chromium_for_tests, keep_failure_screenshot  # noqa: E402
from lite_driver import (NUMBERS, NetworkLog, SiteServer, lite_notebooks,  # noqa: E402
                         site_dir)

NUMBERS_JSON = REPO / "build" / "lite_numbers.json"
VIEWPORT = {"width": 1400, "height": 1000}


def pytest_collection_modifyitems(items):
    """Mark these tests ``browser`` and run them before tests/browser/'s.  Playwright's sync
    API allows one instance per thread, and tests/browser/ keeps its Chromium for the whole
    session; this folder's Chromium lives for its module only, so it must come first."""
    mine = [item for item in items if HERE in Path(item.path).parents]
    if not mine:
        return
    for item in mine:
        item.add_marker(pytest.mark.browser)
    others = [item for item in items if item not in mine]
    browser_tests = HERE.parent / "browser"
    first = next((i for i, item in enumerate(others)
                  if browser_tests in Path(item.path).parents), len(others))
    items[:] = others[:first] + mine + others[first:]


@pytest.fixture(scope="module")
def site():
    """The built site's folder; fails (never skips) when it is missing or out of date."""
    folder = site_dir()
    if not (folder / "lab" / "index.html").is_file():
        pytest.fail(f"No JupyterLite site in {folder}: build it with `make lite` "
                    "(`make test` does), or set IPU_LAB_LITE_SITE to a built site.",
                    pytrace=False)
    missing = [nb for nb in lite_notebooks() if not (folder / "files" / nb).is_file()]
    if missing:
        pytest.fail(f"The site in {folder} lacks {', '.join(missing)} (lite/build.py's "
                    "NOTEBOOKS): it is out of date; rebuild it with `make lite`.", pytrace=False)
    return folder


@pytest.fixture(scope="module")
def server(site, tmp_path_factory):
    """The site served on 127.0.0.1 (``SiteServer``: ``.origin``, ``.sent_bytes()``)."""
    with SiteServer(site, tmp_path_factory.mktemp("lite") / "http.log") as running:
        yield running


@pytest.fixture(scope="module")
def origin(server):
    """``http://127.0.0.1:<port>/``, where the site is served."""
    return server.origin


@pytest.fixture(scope="module")
def chromium():
    with chromium_for_tests() as browser:
        yield browser


@pytest.fixture(scope="module")
def context(chromium, origin):
    """One browser context for the module, so its HTTP cache is cold for the first page and
    warm afterwards, as for a learner; ``context.network`` records every request."""
    ctx = chromium.new_context(viewport=VIEWPORT)
    ctx.network = NetworkLog(ctx, origin)
    try:
        yield ctx
    finally:
        ctx.close()


@pytest.fixture
def page(context, request, tmp_path):
    """A new page (tab) in the shared context; on failure a screenshot is kept."""
    page = context.new_page()
    try:
        yield page
    finally:
        report = getattr(request.node, "_lite_report_call", None)
        if report is not None and report.failed:
            keep_failure_screenshot(page, report, tmp_path)
        page.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item._lite_report_call = report
    return report


def pytest_terminal_summary(terminalreporter):
    if not NUMBERS:
        return
    NUMBERS_JSON.parent.mkdir(exist_ok=True)
    NUMBERS_JSON.write_text(json.dumps(NUMBERS, indent=1) + "\n", encoding="utf-8")
    write = terminalreporter.write_line
    terminalreporter.section("JupyterLite site: size, start-up and redraw times")
    if "site_bytes" in NUMBERS:
        write(f"site size on disk          {NUMBERS['site_bytes'] / 1e6:6.1f} MB "
              f"({NUMBERS['site_files']} files)")
    if "downloaded_bytes" in NUMBERS:
        write(f"downloaded, first visit    {NUMBERS['downloaded_bytes'] / 1e6:6.1f} MB "
              f"({NUMBERS['requests']} requests, all to 127.0.0.1)")
    if "warm_downloaded_bytes" in NUMBERS:
        write(f"downloaded, second visit   {NUMBERS['warm_downloaded_bytes'] / 1e6:6.1f} MB "
              "(the rest from the browser's cache)")
    for key, label in (("cold", "first visit (cold cache)"), ("warm", "second visit (warm)")):
        times = NUMBERS.get(key)
        if times:
            write(f"notebook 00, {label:<24}  page open to kernel idle "
                  f"{times['kernel_idle_s']:5.1f} s, to first trace "
                  f"{times['first_trace_s']:5.1f} s, to all cells run "
                  f"{times['all_cells_s']:5.1f} s")
    if NUMBERS.get("redraw_s"):
        redraws = NUMBERS["redraw_s"]
        write(f"redraw after a widget change {min(redraws):.2f}-{max(redraws):.2f} s "
              f"({len(redraws)} changes)")
    for name, seconds in NUMBERS.get("notebooks_s", {}).items():
        write(f"{name:<44} open + run all {seconds:5.1f} s")
    write(f"(written to {NUMBERS_JSON.relative_to(REPO)})")
