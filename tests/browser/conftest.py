"""Fixtures for the browser tests: JupyterLab + headless Chromium.  See ``lab_driver.py``.

``lab`` (one JupyterLab per run, on a temporary copy of ``notebooks/``), ``browser`` (one
headless Chromium per run) and ``page`` (a fresh browser context per test; afterwards its
kernels are shut down, and on failure ``failure.png`` and the server log's tail are kept).
Every test collected under this folder gets the ``browser`` marker.
"""
from pathlib import Path

import pytest

from tests.support.lab_driver import LabServer, chromium_for_tests, keep_failure_screenshot

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
    with chromium_for_tests() as chromium:
        yield chromium


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
            keep_failure_screenshot(page, report, tmp_path)
            report.sections.append(("JupyterLab log (tail)", lab.log_tail()))
        context.close()
        lab.shutdown_kernels()
