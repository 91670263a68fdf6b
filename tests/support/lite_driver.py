"""Helpers for the JupyterLite site's browser test: serve the built site, record where the
page's requests go, open a notebook in JupyterLite and time it.

The JupyterLab part (menus, kernel status, cell states, error outputs, widgets) is
lab_driver.py's: JupyterLite is JupyterLab's front end with the kernel in a
web worker.  What differs is here: no server or token (static files), the kernel starts
Pyodide (tens of seconds on two busy cores, not one), and the notebook and workspace state
live in the browser's storage, which ``clear_site_storage`` empties between notebooks.
"""
from __future__ import annotations

import http.client
import importlib.util
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from tests.support.lab_driver import (_ALL_EXECUTED_JS, TRACEBACK_PATTERN, click_menu, free_port,
                                     notebook_panel, wait_for_kernel_idle)

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT = 240_000   # ms: page open to kernel idle (Pyodide start-up, measured 35-50 s)
RUN_TIMEOUT = 180_000     # ms: Run All Cells, from the click to the last cell's end

# What the test measured so far; tests/lite/conftest.py sends it with each report to
# lite_report.py, which prints the summary at the end of the run.
NUMBERS: dict = {}


def site_dir() -> Path:
    """The built site: ``$IPU_LAB_LITE_SITE`` (relative to the current directory, as make
    passes it) or build/lite in the checkout."""
    given = os.environ.get("IPU_LAB_LITE_SITE")
    return Path(given).resolve() if given else REPO / "build" / "lite"


def bare_site_dir() -> Path:
    """The bare JupyterLite site `make lite` builds beside the site (lite/build.py
    --bare-out): ``$IPU_LAB_LITE_BARE``, or the site's folder name with ``-bare``."""
    given = os.environ.get("IPU_LAB_LITE_BARE")
    if given:
        return Path(given).resolve()
    site = site_dir()
    return site.with_name(site.name + "-bare")


def lite_build():
    """lite/build.py as a module (its names: NOTEBOOKS, BARE_NOTEBOOK)."""
    spec = importlib.util.spec_from_file_location("lite_build", REPO / "lite" / "build.py")
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    return build


def lite_notebooks() -> list[str]:
    """The notebooks the site holds (file names), from lite/build.py's NOTEBOOKS."""
    return [Path(nb).name for nb in lite_build().NOTEBOOKS]


def site_size(site: Path) -> tuple[int, int]:
    """(bytes, files) of the built site on disk."""
    files = [p for p in site.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


class SiteServer:
    """``python -m http.server`` serving the site on 127.0.0.1.  Its log says what it sent:
    ``sent_bytes()`` adds up the files it answered with 200 (a 304 sends nothing: the browser
    revalidated its cached copy), which is what a learner's browser downloads."""

    def __init__(self, site: Path, log: Path):
        self.site, self.log = site, log
        self.origin = ""
        self._proc: subprocess.Popen | None = None

    def start(self, attempts: int = 3) -> "SiteServer":
        """Serve the site on a free port; if another process took the port meanwhile (another
        worker's kernel can bind it after free_port() chose it), try another."""
        for attempt in range(1, attempts + 1):
            port = free_port()
            self.origin = f"http://127.0.0.1:{port}/"
            with open(self.log, "wb") as log:
                self._proc = subprocess.Popen(
                    [sys.executable, "-u", "-m", "http.server", str(port), "--bind", "127.0.0.1",
                     "--directory", str(self.site)],
                    stdout=subprocess.DEVNULL, stderr=log)
            if self._wait_until_served():
                return self
            self.stop()
            printed = self.log.read_text()
            if attempt == attempts or "already in use" not in printed:
                raise RuntimeError(f"python -m http.server did not serve {self.site} on "
                                   f"{self.origin}:\n{printed[-2000:]}")
        return self

    def _wait_until_served(self, timeout: float = 30) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            try:
                urllib.request.urlopen(self.origin + "jupyter-lite.json", timeout=1).close()
                return True
            except (OSError, http.client.HTTPException):
                # HTTPException: a stranger answers on the port; our server is about to exit.
                if self._proc.poll() is not None or time.monotonic() > deadline:
                    return False
                time.sleep(0.1)

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(10)

    _LINE = re.compile(r'"GET (/[^ ?#]*)[^"]* HTTP/[\d.]+" 200 ')

    def sent_bytes(self) -> int:
        """Bytes of the files sent so far (status 200)."""
        total = 0
        for match in self._LINE.finditer(self.log.read_text(errors="replace")):
            path = self.site / urllib.parse.unquote(match.group(1)).lstrip("/")
            if path.is_dir():
                path = path / "index.html"
            total += path.stat().st_size if path.is_file() else 0
        return total

    def __enter__(self) -> "SiteServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class NetworkLog:
    """Where the context's pages and workers send requests: every URL, those that leave
    the site (``outside``), and the answers that are HTTP errors (``errors``)."""

    def __init__(self, context, origin: str):
        self.origin = origin
        self.urls: list[str] = []
        self.outside: list[str] = []
        self.errors: list[str] = []
        context.on("request", self._request)
        context.on("response", self._response)

    def _request(self, request) -> None:
        self.urls.append(request.url)
        if not request.url.startswith((self.origin, "data:", "blob:")):
            self.outside.append(request.url)

    def _response(self, response) -> None:
        if response.status >= 400:
            self.errors.append(f"{response.status} {response.url.replace(self.origin, '/')}")


def clear_site_storage(page, origin: str) -> None:
    """Empty the site's browser storage (the notebooks' saved copies, the workspace, the
    settings) and keep the HTTP cache: a second visit with nothing saved.  Without it the
    workspace reopens the notebooks of earlier tests, each starting a kernel of its own."""
    page.goto(origin + "jupyter-lite.json")
    page.evaluate("""async () => {
        localStorage.clear();
        sessionStorage.clear();
        for (const db of await indexedDB.databases()) {
            await new Promise(done => {
                const request = indexedDB.deleteDatabase(db.name);
                request.onsuccess = request.onerror = request.onblocked = done;
            });
        }
    }""")


def notebook_url(origin: str, name: str) -> str:
    return f"{origin}lab/index.html?path={name}"


def open_notebook(page, origin: str, name: str) -> float:
    """Open ``name`` in JupyterLite and wait until its kernel is idle; returns the seconds
    since the page was asked for."""
    t0 = time.monotonic()
    page.goto(notebook_url(origin, name), wait_until="domcontentloaded", timeout=START_TIMEOUT)
    panel = notebook_panel(page)
    panel.locator(".jp-Cell").first.wait_for(timeout=START_TIMEOUT)
    wait_for_kernel_idle(page, START_TIMEOUT)
    return time.monotonic() - t0


def start_run_all(page) -> None:
    """``Run > Run All Cells``: the site's notebooks come without outputs, so every
    execution count shown afterwards is from this run."""
    click_menu(page, "Run", "Run All Cells")


def wait_until_all_ran(page, timeout: int = RUN_TIMEOUT) -> None:
    """Wait until every code cell ran (or the run stopped at a cell that raised) and the
    kernel is idle: lab_driver's test, collapsed lesson checks included."""
    page.wait_for_function(_ALL_EXECUTED_JS, arg=[notebook_panel(page).element_handle(),
                                                  TRACEBACK_PATTERN, 0],
                           timeout=timeout, polling=250)


TRIVIAL_CELL, TRIVIAL_RESULT = "1 + 1", "2"


def kernel_ready(page, origin: str, name: str) -> float:
    """Open the empty notebook ``name``, wait for its kernel to be idle and run one trivial
    cell in it; returns the seconds from asking for the page to the cell's result shown: a
    kernel that has started and answers, the floor a site's first output cannot beat."""
    t0 = time.monotonic()
    open_notebook(page, origin, name)
    cell = notebook_panel(page).locator(".jp-CodeCell").first
    cell.locator(".cm-content").click()
    page.keyboard.type(TRIVIAL_CELL)
    page.keyboard.press("Control+Enter")
    cell.locator(".jp-OutputArea-output").filter(has_text=TRIVIAL_RESULT).wait_for(
        timeout=RUN_TIMEOUT)
    return time.monotonic() - t0


def open_in_running_kernel(page, name: str, kernel: str) -> str:
    """Open ``name`` in the page already showing a notebook and run it in that page's kernel
    ``kernel`` (its id, or the name of the notebook that started it: the id is then looked
    up in the dialog), not in a Pyodide of its own: each Pyodide costs tens of CPU seconds
    to start.

    JupyterLite starts a kernel for every notebook it opens (autoStartDefaultKernel); that
    one is shut down at once, before it has done much, then the notebook is connected to
    ``kernel`` (Kernel > Change Kernel..., "Connect to Existing python Kernel").  Returns
    the kernel's id."""
    click_menu(page, "File", "Open from Path…")
    page.locator(".jp-Dialog input").fill(name)
    page.keyboard.press("Enter")
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=name).wait_for(timeout=START_TIMEOUT)
    notebook_panel(page).locator(".jp-Cell").first.wait_for(timeout=START_TIMEOUT)
    click_menu(page, "Kernel", "Shut Down Kernel")
    notebook_panel(page).locator(".jp-KernelName", has_text="No Kernel").wait_for(
        timeout=START_TIMEOUT)
    click_menu(page, "Kernel", "Change Kernel…")
    select = page.locator(".jp-Dialog select")
    labels = select.locator("option").all_text_contents()
    chosen = [label for label in labels if label.startswith(kernel + " (")
              or label.endswith(f"({kernel})")]
    assert len(chosen) == 1, f"no one running kernel {kernel!r} among {labels}"
    select.select_option(label=chosen[0])
    page.locator(".jp-Dialog .jp-mod-accept").click()
    wait_for_kernel_idle(page, START_TIMEOUT)
    return chosen[0].rsplit("(", 1)[1].rstrip(")")
