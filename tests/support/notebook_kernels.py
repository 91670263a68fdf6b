"""How the notebook run (nbval) starts a notebook's kernel: on Unix sockets, its stderr kept.

nbval's kernels talk to the worker over TCP by default, on five ports that jupyter_client
picks by binding port 0 and letting go; the kernel binds them about a second later.  A process
that binds or connects in between may get one of them, and the kernel then exits ("Address
already in use") before it answers: nbval reports "Kernel died before replying to kernel_info"
for every cell of the notebook.  CI failed so on 2026-12-02 (notebook 12, `make test-colab`),
and tests/test_notebook_kernels.py shows a taken port doing it.  Over jupyter_client's other
transport, IPC, a kernel's sockets are files under a name of its own, which no other process
picks.  nbval also sends a kernel's stderr to /dev/null, which left that failure without its
cause: here it goes to a file, and a kernel that dies, before it answers or during a cell,
shows its last lines.  tests/notebooks/test_kernel_paths.py, which had met the same race and
started its kernel a second time, takes the manager too.  JupyterLab's kernels in the browser
tests and the hub's stay on TCP, as a learner's are.
"""
import functools
import tempfile
import uuid
from pathlib import Path

import nbval.kernel
import pytest
from jupyter_client.manager import KernelManager
from traitlets import default

from tests.support.notebook_checks import run_folder

# A Unix socket's path is at most 107 bytes: the temporary folder, not pytest's deeper ones.
SOCKET_FOLDER = Path(tempfile.gettempdir())
STDERR_LINES_SHOWN = 15
_PATCH = pytest.StashKey[pytest.MonkeyPatch]()


class UnixSocketKernelManager(KernelManager):
    @default("transport")
    def _transport_default(self):
        return "ipc"

    def _ip_default(self):
        # IPC's "ip" is the sockets' path prefix.  jupyter_client's default is relative, to
        # this process's folder, and nbval starts the kernel in the notebook's: one absolute
        # prefix per kernel, so neither a folder nor another worker's kernel shares it.
        return str(SOCKET_FOLDER / f"nbval-kernel-{uuid.uuid4().hex}")


def stderr_ending(manager) -> str:
    path = manager.stderr_path
    last_lines = path.read_text(errors="replace").splitlines()[-STDERR_LINES_SHOWN:]
    return f"its stderr ({path}) ended:\n" + "\n".join(last_lines)


def start_notebook_kernel(startup_timeout=60, kernel_name="python", stderr=None, *,
                          stderr_folder, manager_class=UnixSocketKernelManager, **kwargs):
    """nbval.kernel.start_new_kernel's work (a manager and a ready client), over IPC, with the
    kernel's stderr in a file in ``stderr_folder`` instead of nbval's /dev/null (``stderr`` is
    ignored); the manager's ``stderr_path`` names it."""
    manager = manager_class(kernel_name=kernel_name,
                            kernel_spec_manager=nbval.kernel.NbvalKernelspecManager())
    with tempfile.NamedTemporaryFile("w", dir=stderr_folder, prefix="kernel-stderr-",
                                     suffix=".txt", delete=False) as log:
        manager.stderr_path = Path(log.name)
        manager.start_kernel(stderr=log, **kwargs)   # the kernel writes to a copy of its own
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=startup_timeout)
    except RuntimeError as error:
        client.stop_channels()
        manager.shutdown_kernel()
        raise RuntimeError(f"{error}; {stderr_ending(manager)}") from None
    return manager, client


@pytest.hookimpl(trylast=True)  # after the tmp_path plugin has configured its factory
def pytest_configure(config):
    patch = config.stash[_PATCH] = pytest.MonkeyPatch()
    patch.setattr(nbval.kernel, "start_new_kernel", functools.partial(
        start_notebook_kernel, stderr_folder=run_folder(config, "kernel-stderr")))


def pytest_unconfigure(config):
    if _PATCH in config.stash:
        config.stash[_PATCH].undo()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A notebook cell that failed with its kernel gone carries the kernel's last words."""
    outcome = yield
    report = outcome.get_result()
    running = getattr(item.parent, "kernel", None)   # nbval's RunningKernel, once started
    manager = getattr(running, "km", None)           # (nbval deletes it once stopped)
    if report.failed and hasattr(manager, "stderr_path") and not manager.is_alive():
        report.sections.append(("the notebook's kernel died", stderr_ending(manager)))
