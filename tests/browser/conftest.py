"""Fixtures for the browser tests: JupyterLab + headless Chromium.  See ``lab_driver.py``.

``lab`` (one JupyterLab per run, on a temporary copy of ``notebooks/``), ``browser`` (one
headless Chromium per run) and ``page`` (a fresh browser context per test; afterwards its
kernels are shut down, and on failure ``failure.png`` and the server log's tail are kept);
``shared_page``: one page for all the tests of a module that only open notebooks and look.
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


def _new_page(browser):
    context = browser.new_context(viewport=VIEWPORT)
    context.set_default_timeout(DEFAULT_TIMEOUT_MS)
    return context.new_page()


def _report_failure(page, lab, request, tmp_path):
    report = getattr(request.node, "_report_call", None)
    if report is not None and report.failed:
        keep_failure_screenshot(page, report, tmp_path)
        report.sections.append(("JupyterLab log (tail)", lab.log_tail()))


@pytest.fixture
def page(browser, lab, request, tmp_path):
    """A new page in a fresh browser context.  Teardown shuts the server's kernels down, so
    the next test starts its notebooks on new kernels."""
    page = _new_page(browser)
    try:
        yield page
    finally:
        _report_failure(page, lab, request, tmp_path)
        page.context.close()
        lab.shutdown_kernels()


@pytest.fixture(scope="module")
def _module_page(browser, lab):
    page = _new_page(browser)
    try:
        yield page
    finally:
        page.context.close()
        lab.shutdown_kernels()


@pytest.fixture
def shared_page(_module_page, lab, request, tmp_path):
    """One page for the tests of a module that only look (JupyterLab's files stay in its HTTP
    cache from one test to the next); on failure a screenshot, as with ``page``."""
    try:
        yield _module_page
    finally:
        _report_failure(_module_page, lab, request, tmp_path)
