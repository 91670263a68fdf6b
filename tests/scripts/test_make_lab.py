"""`make lab` starts JupyterLab as the README says, for every user (root included: Jupyter
refuses root without --allow-root, which the Makefile adds for root alone), prints the URL to
open, and that URL serves the lab."""
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAB_URL = re.compile(r"http://127\.0\.0\.1:\d+/lab\?token=\w+")
START_TIMEOUT_S = 120


def read_until_url(process) -> tuple:
    """(the URL Jupyter printed, everything printed so far)."""
    selector = selectors.DefaultSelector()
    selector.register(process.stdout, selectors.EVENT_READ)
    printed = ""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        if selector.select(timeout=1):
            line = process.stdout.readline()
            printed += line
            found = LAB_URL.search(line)
            if found:
                return found.group(0), printed
    return None, printed


def fetch(url, attempts=30):
    """(status, page) of the URL, retrying while the server is not yet accepting (it may
    print its URL a moment before it does, on a busy machine)."""
    for attempt in range(attempts):
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                return response.status, response.read().decode("utf-8", "replace")
        except urllib.error.URLError:
            if attempt == attempts - 1:
                raise
            time.sleep(1)


def server_environment(group):
    """The environment of the Jupyter server that `make lab` (process group ``group``) runs."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != group:
                continue
            command = (entry / "cmdline").read_bytes().split(b"\0")
            if not any(part.endswith((b"jupyter", b"jupyter-lab")) for part in command):
                continue
            pairs = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ProcessLookupError):
            continue
        return dict(pair.decode().split("=", 1) for pair in pairs if b"=" in pair)
    raise AssertionError("no Jupyter server in make lab's process group")


def test_make_lab_starts_the_lab_and_prints_its_url():
    # BROWSER=true: Jupyter "opens" the URL with the no-op command, not a real browser.
    env = dict(os.environ, BROWSER="true")
    process = subprocess.Popen(["make", "lab"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        url, printed = read_until_url(process)
        assert url, f"make lab printed no lab URL within {START_TIMEOUT_S} s:\n{printed[-3000:]}"
        assert "open the http://127.0.0.1:... URL it prints below" in printed
        assert "Running as root is not recommended" not in printed
        status, page = fetch(url)
        assert status == 200 and "<title>JupyterLab</title>" in page, (status, page[:500])
        # `%tensorboard` in its kernels runs the `tensorboard` command found on the server's
        # PATH: the environment's bin/ comes first.
        path = server_environment(process.pid)["PATH"].split(os.pathsep)
        found = shutil.which("tensorboard", path=os.pathsep.join(path))
        venv = ROOT / os.environ.get("VENV", ".venv")  # the Makefile's VENV
        assert found and Path(found).resolve() == (venv / "bin" / "tensorboard").resolve()
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
