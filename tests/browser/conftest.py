"""Fixtures for the browser tests: JupyterLab + headless Chromium.  See ``lab_driver.py``.

``lab`` (one JupyterLab for this folder's tests, on a temporary copy of ``notebooks/``),
``browser`` (one headless Chromium for them; both close after the folder's last test: an idle
JupyterLab page keeps Chromium at about a sixth of a core), ``shared_page``: one page,
JupyterLab loaded once (a load costs Chromium about 5 s of CPU), for the tests that open
their notebooks with ``show_notebook`` (each closes the notebook before; kernels are shut down
after each module; on failure ``failure.png`` and the server log's tail are kept, and the next
module loads JupyterLab anew); ``page``, for a test that needs a browser context of its own
(a fresh one per test; afterwards its kernels are shut down, and on failure the same is kept).
Every test collected under this folder gets the ``browser`` marker.
"""
from pathlib import Path

import pytest

from tests.support.lab_driver import (VIEWPORT, LabServer, chromium_for_tests, close_notebooks,
                                      keep_failure_screenshot)

HERE = Path(__file__).parent
DEFAULT_TIMEOUT_MS = 30_000


# This module's test reloads JupyterLab's page, after which the next module must load JupyterLab
# anew (about 5 s of Chromium's CPU): it runs after the other modules that share the page.
RELOADS_THE_PAGE = "test_cell_edits.py"


def pytest_collection_modifyitems(items):
    positions = [i for i, item in enumerate(items) if HERE in Path(item.path).parents]
    ours = sorted((items[i] for i in positions),
                  key=lambda item: item.path.name == RELOADS_THE_PAGE)
    for i, item in zip(positions, ours):
        item.add_marker(pytest.mark.browser)
        items[i] = item


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"_report_{report.when}", report)
    return report


@pytest.fixture(scope="package")
def lab(tmp_path_factory):
    """A running JupyterLab (``LabServer``): ``.url``, ``.token``, ``.root_dir``, ``.log_path``."""
    server = LabServer(tmp_path_factory.mktemp("jupyterlab"))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="package")
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


@pytest.fixture(scope="package")
def _lab_page(browser):
    """One page for every test that takes ``shared_page``: JupyterLab is loaded once (a load
    costs Chromium about 5 s of CPU) and each notebook opened in it (``show_notebook``)."""
    page = _new_page(browser)
    page.failed = False
    try:
        yield page
    finally:
        page.context.close()


@pytest.fixture(scope="module")
def _module_page(_lab_page, lab):
    """The shared page for one module; afterwards its notebooks are closed and the server's
    kernels shut down.  After a failure the page leaves JupyterLab, so the next module loads
    it anew rather than inherit a dialog or half-run notebook."""
    try:
        yield _lab_page
    finally:
        try:
            if not _lab_page.failed:
                close_notebooks(_lab_page)
                _lab_page.locator(".jp-NotebookPanel").first.wait_for(state="detached",
                                                                      timeout=10_000)
        except Exception:
            _lab_page.failed = True
        if _lab_page.failed:
            _lab_page.goto("about:blank")
            _lab_page.failed = False
        lab.shutdown_kernels()


@pytest.fixture
def shared_page(_module_page, lab, request, tmp_path):
    """One page for the tests of a module (and across modules: JupyterLab stays loaded and
    its files in the HTTP cache); each opens its notebooks with ``show_notebook``, which
    closes the one before.  On failure a screenshot, as with ``page``."""
    try:
        yield _module_page
    finally:
        if any(getattr(getattr(request.node, f"_report_{when}", None), "failed", False)
               for when in ("setup", "call")):
            _module_page.failed = True
        _report_failure(_module_page, lab, request, tmp_path)
