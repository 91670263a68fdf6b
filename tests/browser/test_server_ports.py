"""The browser tests' servers start when the free port they were given is taken before they bind
it.  Under pytest-xdist another worker's kernel can bind that port first; once, JupyterLab's
start-up poll met that kernel's ZeroMQ socket, read a status line that was not HTTP
(``http.client.BadStatusLine``) and failed the test run.  Here a stranger holds the port and
answers every connection with ZeroMQ-like bytes.  Cost: about 6 s (two JupyterLab start-ups)."""
import socket
import threading

import nbformat
import pytest

from tests.support import lite_driver
from tests.support.lab_driver import LabServer, free_port

pytestmark = pytest.mark.browser

# What a kernel's ZeroMQ socket sent back, as the failed run printed it.
NOT_HTTP = b"\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f\x03kernel.status\r\n\r\n"


@pytest.fixture
def stranger_port():
    """A port held by a listener that is not an HTTP server."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def answer():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except (TimeoutError, OSError):
                continue
            with connection:
                connection.sendall(NOT_HTTP)

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    listener.close()


def test_jupyterlab_starts_on_another_port_when_a_stranger_holds_its_own(stranger_port, tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    nbformat.write(nbformat.v4.new_notebook(), notebooks / "empty.ipynb")
    server = LabServer(tmp_path / "lab", notebooks=notebooks)
    server.port, server.url = stranger_port, f"http://127.0.0.1:{stranger_port}/"
    with server:
        assert server.port != stranger_port
        assert server.api("api/status")["kernels"] == 0
    assert "already in use" in server.log_path.read_text()


def test_the_site_server_starts_on_another_port_when_a_stranger_holds_its_own(
        stranger_port, tmp_path, monkeypatch):
    (tmp_path / "jupyter-lite.json").write_text("{}")
    ports = iter([stranger_port])
    monkeypatch.setattr(lite_driver, "free_port", lambda: next(ports, None) or free_port())
    server = lite_driver.SiteServer(tmp_path, tmp_path / "server.log").start()
    try:
        assert not server.origin.endswith(f":{stranger_port}/")
        assert lite_driver.urllib.request.urlopen(server.origin + "jupyter-lite.json").read() == b"{}"
    finally:
        server.stop()
