"""Fixtures for the browser tests: JupyterLab + headless Chromium.  See ``lab_driver.py``.

``lab`` (one JupyterLab per run, on a temporary copy of ``notebooks/``), ``browser`` (one
headless Chromium per run) and ``page`` (a fresh browser context per test; afterwards its
kernels are shut down, and on failure ``failure.png`` and the server log's tail are kept).
Every test collected under this folder gets the ``browser`` marker.
"""
from pathlib import Path

import pytest

from lab_driver import LabServer, chromium_executable, launch_chromium

HERE = Path(__file__).parent
VIEWPORT = {"width": 1400, "height": 1000}
DEFAULT_TIMEOUT_MS = 30_000


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in Path(item.path).parents:
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"_report_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """A running JupyterLab (``LabServer``): ``.url``, ``.token``, ``.root_dir``, ``.log_path``."""
    server = LabServer(tmp_path_factory.mktemp("jupyterlab"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium driven by Playwright (sync API)."""
    executable = chromium_executable()
    if not Path(executable).is_file():
        pytest.fail(f"No Chromium at {executable}. Run scripts/ensure_browser.sh (make test does), "
                    "or set IPU_LAB_CHROMIUM to a Chrome/Chromium binary; "
                    "deselect these tests with -m 'not browser'.", pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("Playwright is missing: pip install -e '.[test]' (make test does).",
                    pytrace=False)
    playwright = sync_playwright().start()
    try:
        chromium = launch_chromium(playwright, executable)
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()


@pytest.fixture
def page(browser, lab, request, tmp_path):
    """A new page in a fresh browser context.  Teardown shuts the server's kernels down, so
    the next test starts its notebooks on new kernels."""
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    page = context.new_page()
    try:
        yield page
    finally:
        report = getattr(request.node, "_report_call", None)
        if report is not None and report.failed:
            try:
                page.screenshot(path=str(tmp_path / "failure.png"))
                report.sections.append(("screenshot", str(tmp_path / "failure.png")))
            except Exception as exc:  # the page may be gone
                report.sections.append(("screenshot", f"none: {exc}"))
            report.sections.append(("JupyterLab log (tail)", lab.log_tail()))
        context.close()
        lab.shutdown_kernels()
