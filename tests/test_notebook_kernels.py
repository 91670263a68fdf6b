"""tests/support/notebook_kernels.py: the notebook run's kernels talk to the worker over Unix
sockets, so no other process can take their ports before they bind them, and one that dies
shows why (two kernel starts: about 1 s of CPU, 0.5-1.0 s measured)."""
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import nbval.kernel
import pytest
from jupyter_client.manager import KernelManager

from tests.support import notebook_kernels
from tests.support.notebook_kernels import start_notebook_kernel

CHANNELS = ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")


def test_the_notebook_run_starts_its_kernels_this_way(tmp_path_factory):
    assert nbval.kernel.start_new_kernel.func is start_notebook_kernel
    # Their stderr in pytest's temporary folders, which pytest prunes, not in a folder of
    # /tmp nothing removes.
    stderr_folder = nbval.kernel.start_new_kernel.keywords["stderr_folder"]
    assert stderr_folder.is_relative_to(tmp_path_factory.getbasetemp())


def failed_cell_report(manager):
    """The report of a notebook cell that failed in the kernel ``manager`` runs, once the
    plugin's makereport hook has seen it."""
    report = SimpleNamespace(failed=True, sections=[])
    item = SimpleNamespace(parent=SimpleNamespace(kernel=SimpleNamespace(km=manager)))
    hook = notebook_kernels.pytest_runtest_makereport(item, call=None)
    next(hook)
    with pytest.raises(StopIteration):
        hook.send(SimpleNamespace(get_result=lambda: report))
    return report


def test_a_kernel_answers_over_unix_sockets_of_its_own_and_its_death_shows_its_stderr(
        tmp_path):
    manager, client = start_notebook_kernel(kernel_name="python3", startup_timeout=120,
                                            stderr_folder=tmp_path)
    try:
        info = manager.get_connection_info()
        sockets = [Path(f"{info['ip']}-{info[channel]}") for channel in CHANNELS]
        assert info["transport"] == "ipc" and sockets[0].is_absolute()
        shown = []
        client.execute_interactive("print(6 * 7)", timeout=60, output_hook=lambda message:
                                   shown.append(message["content"].get("text", "")))
        assert "".join(shown) == "42\n"
        assert all(path.is_socket() for path in sockets), sockets
        assert failed_cell_report(manager).sections == []   # alive: nothing to add

        client.execute("import os; os.write(2, b'planted last words\\n'); os._exit(3)")
        deadline = time.monotonic() + 30
        while manager.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        [(heading, text)] = failed_cell_report(manager).sections
        assert heading == "the notebook's kernel died"
        assert text.endswith("planted last words") and str(tmp_path) in text
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert not any(path.exists() for path in sockets)


def test_a_tcp_kernel_whose_port_is_taken_dies_and_its_stderr_says_why(tmp_path):
    taken = []

    class PortTakingKernelManager(KernelManager):
        """nbval's own transport, TCP, with another socket taking the kernel's shell port
        once jupyter_client has picked it: what CI's failing run met by chance."""

        def write_connection_file(self, **kwargs):
            super().write_connection_file(**kwargs)
            other = socket.socket()
            taken.append(other)
            other.bind((self.ip, self.shell_port))
            other.listen()

    try:
        with pytest.raises(RuntimeError) as error:
            start_notebook_kernel(kernel_name="python3", startup_timeout=120,
                                  stderr_folder=tmp_path, manager_class=PortTakingKernelManager)
    finally:
        for other in taken:
            other.close()
    assert "Kernel died before replying to kernel_info" in str(error.value)
    assert "Address already in use" in str(error.value)
