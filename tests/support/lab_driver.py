"""Drive JupyterLab in a real, headless Chromium: reusable helpers for the browser tests.

The fixtures in ``tests/browser/conftest.py`` give each test:

- ``lab``: a :class:`LabServer`, one JupyterLab per test session, serving a temporary copy of
  ``notebooks/`` (so outputs never land in the repository's notebooks) with
  ``IPU_EMULATOR_DATA=sample``, isolated Jupyter config/data/runtime dirs (no user settings,
  kernels or workspaces leak in), no news or update checks, autosave off and notebook
  windowing off (every cell stays in the DOM, so locators see all outputs), JupyterLab's
  application exposed to the page as ``window.jupyterapp`` (``show_notebook`` uses it), and
  no Extension Manager, build check or language-server detection (each made the server run
  ``node``, most at every load of JupyterLab).  ``lab.url``,
  ``lab.token``, ``lab.root_dir`` (the copy) and ``lab.log_path`` (the server's log).
- ``browser``: one headless Chromium per session, the binary from ``IPU_LAB_CHROMIUM``, else
  Debian's ``/usr/bin/chromium-headless-shell``, else ``/usr/bin/chromium``
  (``scripts/ensure_browser.sh`` installs the first where it can), launched through
  Playwright's sync API with the flags a closed network needs.  Playwright gives each launch
  a fresh, empty profile (``--user-data-dir``).
- ``shared_page``: one page for the whole session, JupyterLab loaded once, in which each test
  opens its notebooks with ``show_notebook``; ``page``: a new browser context and page per
  test, closed afterwards.  When a test fails, a screenshot of the page is saved as
  ``failure.png`` in the test's ``tmp_path``.

The helpers below take a Playwright ``Page`` (and return ``Locator`` objects):

``open_notebook(page, lab, name)``
    Opens ``/lab/tree/<name>`` (logged in with the token, workspace reset), waits until the
    notebook is shown and its kernel is idle, and returns the notebook panel's locator.
``show_notebook(page, lab, name, kernel=True)``
    The same in the JupyterLab the page shows already, without loading it again (a load
    costs Chromium about 5 s of CPU): the notebook shown is closed and ``name`` opened with
    JupyterLab's own command; a page not showing JupyterLab yet loads it.  With
    ``kernel=False`` (a notebook opened to be looked at) it joins the kernel of the notebook
    it replaces instead of starting one of its own.
``close_notebooks(page)``
    Closes every notebook that page's JupyterLab shows (between modules sharing it).
``wait_for_notebook(page, name)``
    What both wait for: ``name`` shown in the current tab, its kernel idle (e.g. after
    ``page.reload()``).
``run_all_cells(page, timeout=...)``
    ``Run > Run All Cells`` from the menu bar, then waits until no cell shows ``[*]``, every
    code cell has an execution count (or the run stopped at an error), and the kernel is idle.
``run_cell(page, index)`` runs one code cell (by its index among code cells) and waits.
``error_outputs(page)``
    Texts of the outputs that are errors (tracebacks), not mere stderr such as warnings.
``output_images(page)``
    Locator of the rendered images (matplotlib figures) in output areas.
``code_cell(page, index)``, ``cell_outputs(page, index)``
    Locators of one code cell and of its output area (index among code cells).
``screenshot(locator)`` -> PNG bytes of that element (or of a whole ``Page``).
``pixel_difference(png_a, png_b)`` -> fraction (0..1) of pixels that differ; images of
    different sizes count as completely different (1.0).  ``images_differ(a, b, threshold)``.
``cell_states(page)``
    Per code cell: ``{"running", "count" (execution count, 0 if none), "error", "hidden"}``.
``wait_for_kernel_idle(page)``, ``save_notebook(page)``, ``saved_notebook(lab, name)``
    (the notebook JSON as JupyterLab saved it: ``output_type == "error"`` is exact).
ipywidgets: ``widget_dropdown(page, description)`` (the ``<select>``),
    ``select_dropdown(page, description, option_label)``, ``image_src(img)`` and
    ``wait_for_image_change(img, old_src)`` (ipywidgets' Image gets a new blob URL per value),
    ``widget_html(page, css_class)`` and ``wait_for_html_change(element, old_html)`` for an
    HTML widget (the playground draws its trace as inline SVG in one).

Example (what a widget test looks like; ``test_harness_drives_a_widget`` does this)::

    def test_schedule_changes_trace(shared_page, lab):
        page = shared_page
        show_notebook(page, lab, "08_pipeline_playground.ipynb")
        run_all_cells(page)
        trace = output_images(page).first
        before_png, before_src = screenshot(trace), image_src(trace)
        select_dropdown(page, "schedule", "Interleaved")
        wait_for_image_change(trace, before_src)
        assert images_differ(before_png, screenshot(trace))

Run only these tests with ``pytest -m browser``; skip them with ``-m "not browser"``.
"""
from __future__ import annotations

import contextlib
import http.client
import io
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
# Debian's chromium-headless-shell: the same Chromium (Blink, V8) without the browser's
# windowing layer, as Playwright itself drives headless runs.  The browser tests took 0.87 of
# the CPU on it that they took on the full browser, side by side (bench/headless_shell.py).
# The full browser where the shell is not installed.
HEADLESS_SHELL = "/usr/bin/chromium-headless-shell"
FULL_CHROMIUM = "/usr/bin/chromium"
# The browser window every test (and bench/idle_browser.py) opens its pages in.
VIEWPORT = {"width": 1400, "height": 1000}

# What a closed network needs: without the background-networking flags Chromium's own
# connections (updates, sync, field trials) are refused, many at a time.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# Settings written into the server's private user-settings dir.
LAB_USER_SETTINGS = {
    # Keep every cell in the DOM (no virtual scrolling), so locators see all outputs,
    # and start the notebook's kernel without asking ("Select Kernel" dialog).
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none", "autoStartDefaultKernel": True},
    # No autosave: the copy is thrown away anyway, and save dialogs never pop up.
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    # No "receive official Jupyter news?" toast over the page, and no fetching of news.
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}

SERVER_START_TIMEOUT = 90.0      # seconds until JupyterLab answers on 127.0.0.1
KERNEL_IDLE_TIMEOUT = 60_000     # ms, for a kernel to start or go idle
RUN_ALL_TIMEOUT = 120_000        # ms, for all cells of a notebook to execute

# An error output as JupyterLab renders it (stderr MIME type, like stream stderr): IPython's
# traceback header, its "Cell In[n], line m" frame line (SyntaxError has no header), or a
# final "SomeError: message" / "KeyboardInterrupt" line.  Warnings ("UserWarning: ...") and
# other stderr text match none of these.  Used by Python (re) and JavaScript (RegExp) alike.
TRACEBACK_PATTERN = (r"Traceback \(most recent call last\)"
                     r"|^\s*Cell In\[\d+\], line \d+"
                     r"|^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)(: |$)")
_TRACEBACK = re.compile(TRACEBACK_PATTERN, re.M)


def chromium_executable() -> str:
    """The browser binary to drive: ``$IPU_LAB_CHROMIUM``, else the headless shell where it is
    installed, else ``/usr/bin/chromium``."""
    given = os.environ.get("IPU_LAB_CHROMIUM")
    if given:
        return given
    return HEADLESS_SHELL if os.access(HEADLESS_SHELL, os.X_OK) else FULL_CHROMIUM


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LabServer:
    """A JupyterLab server in a subprocess, serving a copy of ``notebooks/`` under ``workdir``.

    Use as a context manager, or call :meth:`start` and :meth:`stop` (``stop`` is safe to call
    twice and after a failed start).
    """

    def __init__(self, workdir: Path, notebooks: Path = NOTEBOOKS, env: dict | None = None):
        self.workdir = Path(workdir)
        self.root_dir = self.workdir / "notebooks"
        self.log_path = self.workdir / "jupyterlab.log"
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.url = f"http://127.0.0.1:{self.port}/"
        self._notebooks = Path(notebooks)
        self._extra_env = env or {}
        self._proc: subprocess.Popen | None = None
        self._log = None

    # -- lifecycle --------------------------------------------------------------------------
    def _environment(self) -> dict:
        jupyter = self.workdir / "jupyter"
        config, data, runtime = jupyter / "config", jupyter / "data", jupyter / "runtime"
        for d in (config, data, runtime, jupyter / "ipython"):
            d.mkdir(parents=True, exist_ok=True)
        (config / "jupyter_server_config.json").write_text(json.dumps({
            "LabApp": {
                "news_url": None,
                "check_for_updates_class":
                    "jupyterlab.handlers.announcements.NeverCheckForUpdate",
            },
            # jupyter_lsp looks for language servers when the server starts, running `node`
            # (npm) to do it; no test uses one.
            "LanguageServerManager": {"autodetect": False},
        }))
        # At every load of JupyterLab the Extension Manager (in the sidebar) asks the server
        # for the installed extensions and the build check whether a build is recommended;
        # the server runs `node` (yarn's config, a version check) to answer both.  No test
        # uses either.
        labconfig = config / "labconfig"
        labconfig.mkdir(parents=True, exist_ok=True)
        (labconfig / "page_config.json").write_text(json.dumps({
            "disabledExtensions": {"@jupyterlab/extensionmanager-extension": True},
            "buildCheck": False}))
        settings = config / "lab" / "user-settings"
        for relpath, values in LAB_USER_SETTINGS.items():
            path = settings / relpath
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(values))

        env = dict(os.environ)
        # `make test` sets MPLBACKEND=Agg for pytest; inherited by the kernel it would stop
        # ipykernel from choosing the inline backend, and no figure would be shown.
        env.pop("MPLBACKEND", None)
        env.update({
            "IPU_EMULATOR_DATA": "sample",
            "JUPYTER_CONFIG_DIR": str(config),
            "JUPYTER_DATA_DIR": str(data),
            "JUPYTER_RUNTIME_DIR": str(runtime),
            "IPYTHONDIR": str(jupyter / "ipython"),
            "JUPYTER_PLATFORM_DIRS": "1",
            "PYTHONUNBUFFERED": "1",
        })
        env.update(self._extra_env)
        return env

    def start(self, timeout: float = SERVER_START_TIMEOUT, attempts: int = 3) -> "LabServer":
        """Copy the notebooks, start JupyterLab and wait until it answers.  If the free port
        it was given is taken meanwhile, try again on another one."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(self._notebooks, self.root_dir,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        env = self._environment()
        # Trusted, as `make lab` makes them: stored SVG traces and HTML show before a run.
        subprocess.run([sys.executable, "-m", "jupyter", "trust",
                        *map(str, sorted(self.root_dir.glob("*.ipynb")))],
                       env=env, check=True, capture_output=True, timeout=120)
        for attempt in range(1, attempts + 1):
            self._launch(env)
            try:
                self._wait_until_up(timeout)
                return self
            except RuntimeError:
                self.stop()
                if attempt == attempts or "already in use" not in self.log_tail():
                    raise
                self.port = free_port()
                self.url = f"http://127.0.0.1:{self.port}/"
            except BaseException:
                self.stop()
                raise
        return self

    def _launch(self, env: dict) -> None:
        cmd = [
            sys.executable, "-m", "jupyter", "lab",
            "--no-browser",
            "--ServerApp.open_browser=False",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--ServerApp.root_dir={self.root_dir}",
            "--ServerApp.terminals_enabled=False",
            "--LabApp.extension_manager=readonly",    # no PyPI queries from the server
            # window.jupyterapp: show_notebook opens a notebook with JupyterLab's own command
            # instead of loading all of JupyterLab again.
            "--LabApp.expose_app_in_browser=True",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--allow-root")                # CI and containers run as root
        self._log = open(self.log_path, "ab")
        self._proc = subprocess.Popen(cmd, cwd=self.root_dir, env=env,
                                      stdout=self._log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)

    def _wait_until_up(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        status = f"{self.url}api/status"
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with code {self._proc.returncode} "
                                   f"before it answered:\n{self.log_tail()}")
            try:
                request = urllib.request.Request(
                    status, headers={"Authorization": f"token {self.token}"})
                with urllib.request.urlopen(request, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError, http.client.HTTPException):
                # Not up yet; an answer that is not HTTP is something else on the port (once,
                # another worker's kernel bound it after free_port() chose it): JupyterLab
                # exits with "already in use", and start() tries another port.
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"JupyterLab did not answer on {self.url} within "
                                   f"{timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self, timeout: float = 20.0) -> None:
        """Shut the kernels and the server down: through the API first, then SIGTERM, then
        SIGKILL to the server's process group (kernels run in sessions of their own, which is
        why they are shut down first)."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                self.shutdown_kernels()
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            try:
                self.api("api/shutdown", method="POST", timeout=5)
            except (urllib.error.URLError, ConnectionError, OSError, ValueError):
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(proc, signal.SIGTERM)
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self._signal_group(proc, signal.SIGKILL)
                    proc.wait(timeout=10)
        self._proc = None
        if self._log is not None:
            self._log.close()
            self._log = None

    @staticmethod
    def _signal_group(proc: subprocess.Popen, sig: int) -> None:
        # Only while our server is alive: its group's id is its own pid (start_new_session).
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> "LabServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- REST API ---------------------------------------------------------------------------
    def api(self, path: str, method: str = "GET", timeout: float = 10.0):
        """Call the server's REST API (``path`` like ``"api/sessions"``); parsed JSON or None."""
        request = urllib.request.Request(
            f"{self.url}{path}", method=method, data=b"" if method != "GET" else None,
            headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
        return json.loads(body) if body else None

    def shutdown_kernels(self) -> None:
        """End every session and kernel, so the next notebook opened starts on a new kernel."""
        if self._proc is None or self._proc.poll() is not None:
            return
        for kind in ("sessions", "kernels"):
            for item in self.api(f"api/{kind}"):
                try:
                    self.api(f"api/{kind}/{item['id']}", method="DELETE", timeout=30)
                except urllib.error.HTTPError as error:
                    # Gone already: sessions that shared a kernel end with it.
                    if error.code != 404:
                        raise

    # -- URLs -------------------------------------------------------------------------------
    def lab_url(self, path: str = "", reset: bool = True) -> str:
        query = f"token={self.token}" + ("&reset" if reset else "")
        return f"{self.url}lab/tree/{path}?{query}" if path else f"{self.url}lab?{query}"


def _launch_options(executable: str | None = None) -> dict:
    """How the tests launch Chromium through Playwright: headless, with the closed-network
    flags (every browser of the tests, with or without a profile of its own)."""
    return dict(executable_path=executable or chromium_executable(), headless=True,
                chromium_sandbox=False, args=CHROMIUM_ARGS)


def launch_chromium(playwright, executable: str | None = None, **kwargs):
    """Headless Chromium through Playwright (``playwright.sync_api``), with the closed-network
    flags.  Playwright launches each browser with a fresh, empty ``--user-data-dir``."""
    return playwright.chromium.launch(**_launch_options(executable), **kwargs)


@contextlib.contextmanager
def context_with_profile(browser, profile: Path):
    """A browser context with a profile of its own in ``profile`` (an empty folder: a cold
    cache), as a learner's browser has one: its HTTP cache on disk.  The contexts
    ``browser.new_context()`` makes are off the record: their cache lives in memory and keeps
    no file above a few MB, so Pyodide's 9.6 MB of WebAssembly was fetched and compiled anew
    at every kernel start, and a second visit to the site was measured downloading it again.
    Playwright opens such a context in a Chromium of its own, launched like ``browser``; the
    CPU of its renderers is counted before it closes (unwaited_cpu.py)."""
    from tests.support import unwaited_cpu

    context = browser.browser_type.launch_persistent_context(
        str(profile), **_launch_options(), viewport=VIEWPORT)
    try:
        yield context
    finally:
        browser_pid = unwaited_cpu.browser_with_profile(profile)
        if browser_pid:
            unwaited_cpu.add_zygotes_of(browser_pid)
        context.close()
        if browser_pid:   # its zygotes leave our tree with it: counted once
            unwaited_cpu.wait_until_ended(browser_pid)
    # After the close, so that a failure leaves no browser behind; every run checks it.
    assert browser_pid or not os.path.isdir("/proc"), (
        f"no Chromium with --user-data-dir={profile} among the processes: its renderers' CPU "
        f"went uncounted")


@contextlib.contextmanager
def chromium_for_tests():
    """Headless Chromium for a pytest fixture (``with chromium_for_tests() as browser``); a
    missing binary or Playwright fails the test with how to get it.  Before it closes, the CPU
    its renderers used is counted for the test times (unwaited_cpu.py: nothing reaps them into
    this process's accounting)."""
    import pytest

    from tests.support import unwaited_cpu

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
        browser = launch_chromium(playwright, executable)
        try:
            yield browser
        finally:
            unwaited_cpu.add_zygotes_of(os.getpid())
            browser.close()
    finally:
        playwright.stop()


def keep_failure_screenshot(page, report, folder: Path) -> None:
    """After a failed test (``report``: its call report), a screenshot of ``page`` in
    ``folder``, named in the report's sections."""
    shot = folder / "failure.png"
    try:
        page.screenshot(path=str(shot))
        report.sections.append(("screenshot", str(shot)))
    except Exception as exc:  # the page may be gone
        report.sections.append(("screenshot", f"none: {exc}"))


# -- notebook helpers -----------------------------------------------------------------------

def notebook_panel(page):
    """The notebook panel that is shown (the current tab of the main area)."""
    return page.locator(".jp-NotebookPanel:visible").first


_KERNEL_IDLE_JS = """
panel => {
  // A "Select Kernel" dialog (should not appear: autoStartDefaultKernel) is accepted.
  const dialog = document.querySelector('.jp-Dialog');
  if (dialog && /Select Kernel/.test(dialog.textContent)) {
    dialog.querySelector('.jp-mod-accept')?.click();
    return false;
  }
  const name = panel.querySelector('.jp-KernelName')?.textContent.trim();
  const status = panel.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status');
  return !!name && name !== 'No Kernel' && status === 'idle';
}
"""


def wait_for_kernel_idle(page, timeout: int = KERNEL_IDLE_TIMEOUT) -> None:
    """Wait until the shown notebook has a kernel (not "No Kernel") and it is idle."""
    panel = notebook_panel(page)
    panel.locator(".jp-Notebook-ExecutionIndicator").wait_for(timeout=timeout)
    page.wait_for_function(_KERNEL_IDLE_JS, arg=panel.element_handle(), timeout=timeout,
                           polling=100)


def open_notebook(page, lab: LabServer, name: str, timeout: int = KERNEL_IDLE_TIMEOUT,
                  kernel: bool = True):
    """Open ``notebooks/<name>`` in JupyterLab, wait for its kernel to be idle (unless
    ``kernel`` is False: a notebook opened to be looked at), return its panel."""
    page.goto(lab.lab_url(name), wait_until="domcontentloaded", timeout=timeout)
    return wait_for_notebook(page, name, timeout, kernel)


def wait_for_notebook(page, name: str, timeout: int = KERNEL_IDLE_TIMEOUT, kernel: bool = True):
    """Wait until JupyterLab shows the notebook ``name`` in its current tab, its cells drawn
    and (unless ``kernel`` is False) its kernel idle; return its panel."""
    page.locator(".lm-TabBar-tab.lm-mod-current", has_text=name).first.wait_for(
        timeout=timeout)
    panel = notebook_panel(page)
    panel.wait_for(timeout=timeout)
    panel.locator(".jp-Cell").first.wait_for(timeout=timeout)
    if kernel:
        wait_for_kernel_idle(page, timeout)
    return panel


# Closes what JupyterLab's main area shows, without the "Save your work" dialog (a notebook
# whose kernel started is dirty: the kernel's language_info went into its metadata; the copy
# is thrown away); returns the id of the first kernel one of them had.
_CLOSE_MAIN_AREA_JS = """
app => {
  let kernel;
  for (const widget of Array.from(app.shell.widgets('main'))) {
    kernel = kernel || widget.sessionContext?.session?.kernel?.id;
    if (widget.context) widget.context.model.dirty = false;
    widget.close();
  }
  return kernel;
}"""

_SHOW_IN_PLACE_JS = f"""
async ([path, ownKernel]) => {{
  const app = window.jupyterapp;
  const kernel = ({_CLOSE_MAIN_AREA_JS})(app);
  await app.commands.execute('docmanager:open',
                             ownKernel || !kernel ? {{path}} : {{path, kernel: {{id: kernel}}}});
}}
"""


def close_notebooks(page):
    """Close every notebook the page's JupyterLab shows (``show_notebook``'s page)."""
    page.evaluate(f"() => {{ ({_CLOSE_MAIN_AREA_JS})(window.jupyterapp); }}")


def show_notebook(page, lab: LabServer, name: str, timeout: int = KERNEL_IDLE_TIMEOUT,
                  kernel: bool = True):
    """Like ``open_notebook``, in the JupyterLab the page already shows: what its main area
    shows is closed and ``name`` opened with JupyterLab's own command (``docmanager:open``),
    as a learner opens one from the file browser, without loading JupyterLab again (a load
    costs Chromium seconds of CPU).  A page not showing this lab's JupyterLab yet loads it
    (``open_notebook``).  With ``kernel=False`` the notebook is connected to the kernel of the
    notebook it replaces, as a learner can choose a running kernel, instead of starting a
    kernel of its own (each costs about a CPU second)."""
    if not (page.url.startswith(lab.url + "lab")
            and page.evaluate("() => !!window.jupyterapp")):
        return open_notebook(page, lab, name, timeout, kernel)
    page.evaluate(_SHOW_IN_PLACE_JS, [name, kernel])
    page.wait_for_function("n => document.querySelectorAll('.jp-NotebookPanel').length === n",
                           arg=1, timeout=timeout, polling=100)
    return wait_for_notebook(page, name, timeout, kernel)


def code_cells(page):
    return notebook_panel(page).locator(".jp-Notebook .jp-CodeCell")


def code_cell(page, index: int):
    """One code cell, by its index among the notebook's code cells."""
    return code_cells(page).nth(index)


def cell_outputs(page, index: int):
    """The output area of one code cell (index among code cells)."""
    return code_cell(page, index).locator(".jp-OutputArea")


_CELL_STATES_JS = """
([panel, traceback]) => {
  const isTraceback = new RegExp(traceback, 'm');
  return [...panel.querySelectorAll('.jp-Notebook .jp-CodeCell')].map(cell => {
    const prompt = cell.querySelector('.jp-InputArea-prompt')?.textContent.trim() || '';
    const count = Number((prompt.match(/\\[(\\d+)\\]/) || [0, 0])[1]);
    const error = [...cell.querySelectorAll(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
        .some(o => isTraceback.test(o.textContent));
    // A cell whose source is collapsed (a lesson check) shows a placeholder without a count.
    const hidden = !cell.querySelector('.jp-InputArea-prompt');
    return {running: prompt.includes('*'), count, error, hidden};
  });
}
"""

_ALL_EXECUTED_JS = """
([panel, traceback, started]) => {
  const status = panel.querySelector('.jp-Notebook-ExecutionIndicator')?.getAttribute('data-status');
  if (status !== 'idle') return false;
  const cells = (%s)([panel, traceback]);
  if (cells.some(c => c.running)) return false;
  // Done when every code cell that shows its count ran again (collapsed cells between them
  // ran too: Run All stops at an error), or when the run stopped at a cell that raised.
  return cells.filter(c => !c.hidden).every(c => c.count > started) ||
         cells.some(c => (c.hidden || c.count > started) && c.error);
}
""" % _CELL_STATES_JS.strip()


def cell_states(page) -> list[dict]:
    """For each code cell: ``{"running": bool, "count": execution count or 0, "error": bool,
    "hidden": bool}`` (hidden: its source is collapsed, so it shows no count)."""
    return page.evaluate(_CELL_STATES_JS, [notebook_panel(page).element_handle(),
                                           TRACEBACK_PATTERN])


def click_menu(page, menu: str, item: str) -> None:
    """Choose ``menu > item`` from JupyterLab's menu bar (e.g. ``"Run", "Run All Cells"``)."""
    page.locator("#jp-menu-panel .lm-MenuBar-itemLabel", has_text=re.compile(
        rf"^{re.escape(menu)}$")).click()
    page.locator(".lm-Menu:visible .lm-Menu-itemLabel", has_text=re.compile(
        rf"^{re.escape(item)}$")).click()


def run_all_cells(page, timeout: int = RUN_ALL_TIMEOUT) -> None:
    """``Run > Run All Cells``; return when every code cell ran (or one raised) and the
    kernel is idle again."""
    panel = notebook_panel(page)
    wait_for_kernel_idle(page)
    # Stored outputs carry execution counts from whoever executed the notebook last, and a
    # fresh kernel may count to the same numbers: clear them so "ran" means "ran now".
    click_menu(page, "Edit", "Clear Outputs of All Cells")
    page.wait_for_function(
        "([panel, traceback]) => (%s)([panel, traceback]).every(c => c.count === 0)"
        % _CELL_STATES_JS.strip(), arg=[panel.element_handle(), TRACEBACK_PATTERN],
        timeout=30_000, polling=100)
    started = 0
    click_menu(page, "Run", "Run All Cells")
    page.wait_for_function(_ALL_EXECUTED_JS, arg=[panel.element_handle(), TRACEBACK_PATTERN,
                                                  started],
                           timeout=timeout, polling=250)


def run_cell(page, index: int, timeout: int = RUN_ALL_TIMEOUT) -> None:
    """Run one code cell (Ctrl+Enter in its editor) and wait until it finished."""
    cell = code_cell(page, index)
    prompt = cell.locator(".jp-InputArea-prompt")
    before = prompt.text_content() or ""
    cell.locator(".jp-InputArea-editor").click()
    page.keyboard.press("Control+Enter")
    page.wait_for_function(
        """([p, before]) => { const t = p.textContent.trim();
                              return !t.includes('*') && /\\[\\d+\\]/.test(t) && t !== before; }""",
        arg=[prompt.element_handle(), before.strip()], timeout=timeout, polling=250)
    wait_for_kernel_idle(page)


def stderr_outputs(page):
    """Locator of every output rendered as stderr: stream stderr *and* error tracebacks."""
    return notebook_panel(page).locator(
        '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')


def error_outputs(page) -> list[str]:
    """Texts of the outputs that are errors (tracebacks).  JupyterLab renders both stderr
    streams and errors with the stderr MIME type; only those holding a traceback count, so
    warnings printed to stderr are not errors."""
    texts = stderr_outputs(page).all_text_contents()
    return [t for t in texts if _TRACEBACK.search(t)]


def output_images(page):
    """Locator of the images (e.g. matplotlib figures) rendered in output areas."""
    return notebook_panel(page).locator(".jp-OutputArea-output img")


def output_figures(page):
    """Locator of the figures in output areas: images, and SVG drawn inline (the traces of
    ``views.show_trace`` and the widgets)."""
    return notebook_panel(page).locator(".jp-OutputArea-output img, .jp-OutputArea-output svg")


# -- ipywidgets -----------------------------------------------------------------------------

def widget_dropdown(page, description: str):
    """The ``<select>`` of the ipywidgets ``Dropdown`` whose description is ``description``."""
    return notebook_panel(page).locator(".widget-dropdown").filter(
        has=page.locator("label", has_text=re.compile(rf"^\s*{re.escape(description)}\s*$"))
    ).locator("select")


def select_dropdown(page, description: str, option: str, index: int = 0) -> None:
    """Choose ``option`` (its label) in the ``index``-th Dropdown described ``description``
    (counted in page order: a notebook may show the same widget more than once)."""
    widget_dropdown(page, description).nth(index).select_option(label=option)


def image_src(image) -> str:
    """The ``src`` of an ``img`` locator (ipywidgets' Image gets a new blob URL per value)."""
    return image.get_attribute("src") or ""


def wait_for_image_change(image, old_src: str, timeout: int = KERNEL_IDLE_TIMEOUT) -> None:
    """Wait until an ``img`` shows a different, fully loaded picture than ``old_src``."""
    image.page.wait_for_function(
        "([img, old]) => img.src !== old && img.complete && img.naturalWidth > 0",
        arg=[image.element_handle(), old_src], timeout=timeout, polling=100)


def widget_html(page, css_class: str):
    """The element of the ipywidgets ``HTML`` widget given ``add_class(css_class)``."""
    return notebook_panel(page).locator(f".{css_class}").first


def wait_for_html_change(element, old_html: str, timeout: int = KERNEL_IDLE_TIMEOUT) -> None:
    """Wait until an element's inner HTML differs from ``old_html`` (a widget redrew)."""
    element.page.wait_for_function(
        "([el, old]) => el.innerHTML !== old", arg=[element.element_handle(), old_html],
        timeout=timeout, polling=100)


def save_notebook(page) -> None:
    """``File > Save Notebook`` and wait until the document is no longer dirty."""
    click_menu(page, "File", "Save Notebook")
    page.locator(".jp-mod-current.jp-mod-dirty").wait_for(state="detached", timeout=30_000)


def saved_notebook(lab: LabServer, name: str) -> dict:
    """The notebook's JSON as last saved in the server's copy of ``notebooks/``."""
    return json.loads((lab.root_dir / name).read_text())


# -- screenshots ----------------------------------------------------------------------------

def screenshot(target, path: str | os.PathLike | None = None) -> bytes:
    """PNG bytes of a ``Locator`` (just that element) or a ``Page``; also written to ``path``."""
    kwargs = {"path": str(path)} if path is not None else {}
    if hasattr(target, "goto"):                              # a Page
        return target.screenshot(full_page=True, **kwargs)
    target.scroll_into_view_if_needed()
    return target.screenshot(animations="disabled", **kwargs)


def _decode_png(png: bytes):
    """PNG bytes -> uint8 array (H, W, 4): Pillow if present, else matplotlib.image."""
    import numpy as np
    try:
        from PIL import Image
    except ImportError:
        import matplotlib.image as mpimg
        array = mpimg.imread(io.BytesIO(png), format="png")
        if array.dtype != np.uint8:
            array = np.round(array * 255).astype(np.uint8)
        if array.ndim == 2:
            array = np.stack([array] * 3, axis=-1)
        if array.shape[-1] == 3:
            array = np.concatenate(
                [array, np.full(array.shape[:2] + (1,), 255, np.uint8)], axis=-1)
        return array
    with Image.open(io.BytesIO(png)) as image:
        return np.asarray(image.convert("RGBA"))


def pixel_difference(png_a: bytes, png_b: bytes, tolerance: int = 8) -> float:
    """Fraction of pixels (0..1) whose colour differs by more than ``tolerance`` (0..255) in
    any channel.  Images of different sizes count as completely different (1.0)."""
    a, b = _decode_png(png_a), _decode_png(png_b)
    if a.shape != b.shape:
        return 1.0
    import numpy as np
    diff = np.abs(a.astype(np.int16) - b.astype(np.int16)).max(axis=-1) > tolerance
    return float(diff.mean())


def colour_share(png: bytes, colour: str, tolerance: int = 24) -> float:
    """Fraction of pixels (0..1) within ``tolerance`` of ``colour`` (``"#0072B2"``) in every
    channel: how much of a screenshot a trace's kind colour fills."""
    import numpy as np
    rgb = np.array([int(colour[i:i + 2], 16) for i in (1, 3, 5)], np.int16)
    pixels = _decode_png(png)[..., :3].astype(np.int16)
    return float((np.abs(pixels - rgb).max(axis=-1) <= tolerance).mean())


def screenshots_dir() -> Path:
    """Where the browser tests keep what a learner sees (``IPU_LAB_SCREENSHOTS``, default
    build/screenshots/ in the checkout, git-ignored): look at them after a run."""
    folder = Path(os.environ.get("IPU_LAB_SCREENSHOTS", Path(__file__).resolve().parents[2]
                                 / "build" / "screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def images_differ(png_a: bytes, png_b: bytes, threshold: float = 0.001) -> bool:
    """True when more than ``threshold`` of the pixels changed (default 0.1 %)."""
    return pixel_difference(png_a, png_b) > threshold
