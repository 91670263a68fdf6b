"""Fixtures for the JupyterLite site's browser test: the built site served on 127.0.0.1, one
headless Chromium, and one browser context whose every request is recorded.

``make test`` builds the site first (``make lite``, into build/lite); ``IPU_LAB_LITE_SITE``
points the test at another build.  Every test here gets the ``browser`` marker, like
tests/browser/, and the numbers the test measures are printed at the end of the run (and
written to build/lite_numbers.json, by ``tests/support/lite_report.py``).  Under pytest-xdist
the tests run on a worker; each report carries the numbers measured so far
(``user_properties``) to the controller, which prints them.
"""
import json
import os
from pathlib import Path

import pytest

from tests.support.foreground_cpu import foreground
from tests.support.lab_driver import (chromium_for_tests, context_with_profile,
                                      keep_failure_screenshot)
from tests.support.lite_driver import (NUMBERS, NetworkLog, SiteServer, bare_site_dir, lite_build,
                                       lite_notebooks, site_dir)
from tests.support.lite_report import NUMBERS_PROPERTY

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items):
    """Mark these tests ``browser`` and run them before tests/browser/'s.  Playwright's sync
    API allows one instance per thread, and tests/browser/ keeps its Chromium until its own
    last test; this folder's Chromium lives for its module only, so it must come first."""
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


@pytest.fixture(scope="module", autouse=True)
def browser_in_front():
    """This module's processes (the sites' servers, Playwright, Chromium) in a CPU cgroup that
    weighs more than the rest of the test run, where the machine allows it
    (tests/support/foreground_cpu.py): the floor and the site are timed as the application in
    front, alike, not under whatever load the other workers put beside each."""
    with foreground(f"ipu-lab-lite-{os.getpid()}") as placed:
        NUMBERS["browser_in_front"] = placed.said
        yield


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
def bare_site(site):
    """The bare JupyterLite site built beside the site; fails (never skips) when missing."""
    folder = bare_site_dir()
    if not (folder / "files" / lite_build().BARE_NOTEBOOK).is_file():
        pytest.fail(f"No bare JupyterLite site in {folder}: `make lite` builds it beside the "
                    "site (lite/build.py --bare-out), or set IPU_LAB_LITE_BARE.", pytrace=False)
    return folder


@pytest.fixture(scope="module")
def bare_server(bare_site, tmp_path_factory):
    """The bare site served on 127.0.0.1, like ``server``."""
    with SiteServer(bare_site, tmp_path_factory.mktemp("lite-bare") / "http.log") as running:
        yield running


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
def context(chromium, origin, tmp_path_factory):
    """One browser context for the module with a profile of its own, as a learner's browser:
    its HTTP cache, on disk, is cold for the first page and warm afterwards
    (``lab_driver.context_with_profile``); ``context.network`` records every request."""
    with context_with_profile(chromium, tmp_path_factory.mktemp("lite-profile")) as ctx:
        ctx.network = NetworkLog(ctx, origin)
        yield ctx


@pytest.fixture(scope="module")
def _one_page(context):
    page = context.new_page()
    page.kernel = None            # the kernel the notebooks share, once one has started it
    page.reset = None             # the notebook first opened after the reset, once it was
    try:
        yield page
    finally:
        page.close()


@pytest.fixture
def shared_page(_one_page, request, tmp_path):
    """One tab for the site's other notebooks, which run one after another in one kernel
    (``lite_driver.open_in_running_kernel``: a Pyodide costs tens of CPU seconds to start,
    and what it starts is the same for each); on failure a screenshot of it is kept."""
    try:
        yield _one_page
    finally:
        report = getattr(request.node, "_lite_report_call", None)
        if report is not None and report.failed:
            keep_failure_screenshot(_one_page, report, tmp_path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item._lite_report_call = report
    if HERE in Path(item.path).parents and report.when == "teardown":
        report.user_properties.append((NUMBERS_PROPERTY, json.loads(json.dumps(NUMBERS))))
    return report
