"""`make lab` starts JupyterLab as the README says, for every user (root included: Jupyter
refuses root without --allow-root, which the Makefile adds for root alone), prints the URL to
open, and that URL serves the lab; its kernels find TensorBoard, and `%tensorboard`'s frame
reaches it through the server (jupyter/jupyter_server_config.py, jupyter-server-proxy)."""
import datetime
import json
import os
import queue
import re
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAB_URL = re.compile(r"http://127\.0\.0\.1:\d+/lab\?token=\w+")
START_TIMEOUT_S = 120


def read_until_url(process) -> tuple:
    """(the URL Jupyter printed, everything printed so far).  The lines are read by a thread:
    a select() on the pipe beside readline() misses lines that one read brought in together,
    which wait in the stream's buffer while the pipe is empty (on a loaded machine the server's
    last lines, its URL among them, came in one read and the wait ran out)."""
    lines = queue.Queue()

    def read():
        for line in process.stdout:
            lines.put(line)
        lines.put(None)   # the process closed its output

    threading.Thread(target=read, daemon=True).start()
    printed = ""
    deadline = time.monotonic() + START_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
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


def process_environment(group, *endings):
    """The environment of a process whose command line has an argument ending in one of
    ``endings``, in process group ``group`` (make lab's) unless that is None; or None."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if group is not None and os.getpgid(int(entry.name)) != group:
                continue
            command = (entry / "cmdline").read_bytes().split(b"\0")
            if not any(part.endswith(endings) for part in command):
                continue
            pairs = (entry / "environ").read_bytes().split(b"\0")
        except (OSError, ProcessLookupError):
            continue
        return dict(pair.decode().split("=", 1) for pair in pairs if b"=" in pair)
    return None


def kernel_environment(base, token):
    """Start a kernel through the server's REST API; the environment it was started with.
    (Jupyter starts each kernel in a session of its own: found by its connection file.)"""
    request = urllib.request.Request(f"{base}/api/kernels", data=b"{}", method="POST",
                                     headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.status == 201
        kernel = json.loads(response.read())["id"]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = process_environment(None, f"kernel-{kernel}.json".encode())
        if found:
            return found
        time.sleep(0.5)
    raise AssertionError("the kernel the server was asked for did not start")


def tensorboard_through_the_server(base, token, tmp_path):
    """A TensorBoard started as `%tensorboard` starts it (TENSORBOARD_BINARY: the server's),
    fetched through the lab's server at the path its frame uses: (TensorBoard's page, its data
    API's answer)."""
    from tensorboard import manager
    started = manager.start(["--logdir", str(tmp_path), "--port", "0"],
                            timeout=datetime.timedelta(seconds=60))
    assert isinstance(started, manager.StartLaunched), started
    try:
        proxied = f"{base}/proxy/{started.info.port}/"
        _status, page = fetch(f"{proxied}?token={token}")
        _status, environment = fetch(f"{proxied}data/environment?token={token}")
        return page, json.loads(environment)
    finally:
        os.kill(started.info.pid, signal.SIGTERM)


def test_make_lab_starts_the_lab_and_prints_its_url(tmp_path, monkeypatch):
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
        # The environment's bin/ comes first on the server's PATH (the lab's commands for its
        # kernels); `%tensorboard` in its kernels runs the lab's TensorBoard, found there, and
        # its frame asks the server for /proxy/<port>/, so it works wherever the browser is.
        server = process_environment(process.pid, b"jupyter", b"jupyter-lab")
        assert server, "no Jupyter server in make lab's process group"
        venv = ROOT / os.environ.get("VENV", ".venv")  # the Makefile's VENV
        assert Path(server["PATH"].split(os.pathsep)[0]).resolve() == (venv / "bin").resolve()
        base, token = url.split("/lab?token=")
        kernel = kernel_environment(base, token)
        assert kernel["TENSORBOARD_PROXY_URL"] == "/proxy/%PORT%/"
        found = kernel["TENSORBOARD_BINARY"]
        assert Path(found).resolve() == (venv / "bin" / "ipu-lab-tensorboard").resolve()
        monkeypatch.setenv("TENSORBOARD_BINARY", found)
        page, environment = tensorboard_through_the_server(base, token, tmp_path)
        assert "<tf-tensorboard" in page or "TensorBoard" in page, page[:500]
        assert environment["data_location"] == str(tmp_path)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
