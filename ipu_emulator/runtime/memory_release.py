"""Give the heap memory TensorFlow has freed back to the operating system once a kernel is idle.

TensorFlow's CPU kernels (convolution gradients most of all) allocate and free tens of MB per
step, from several threads.  glibc keeps what they free in its per-thread arenas, for reuse,
so a notebook kernel's resident memory climbs through a training cell and stays up while the
learner reads: in notebook 02 the first training cell added 25 to 117 MB from run to run,
and one ``malloc_trim(0)`` afterwards gave back about 125 MB.  In a classroom, 40 kernels on
one server, memory held by idle kernels decides how big the server must be.

So once no engine run has been running for ``IDLE_S`` seconds, a background thread asks glibc
to return its free pages (``malloc_trim(0)``, tens of milliseconds); in a notebook kernel,
also as soon as a cell that made engine runs has finished.  Not between the runs of
a training loop: there the memory is about to be used again, and giving it back would only
make the next step fault it in anew (trimming after every run, at most once a second, made
a training 14 % slower).  bench/memory_release.py measures it: the peak barely moves
(1.00x), an idle kernel keeps 0.95x the private memory (0.74x while sessions still ran
Grappler's rewrites, which allocated most of what glibc kept).  Where the C library is not glibc
(macOS, musl) nothing happens; ``IPU_EMULATOR_RELEASE_MEMORY=0`` turns it off.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
import threading
import time

IDLE_S = 2.0


def _glibc_malloc_trim():
    """glibc's ``malloc_trim``, or None on another C library."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    trim = getattr(libc, "malloc_trim", None)
    if trim is not None:
        trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


_malloc_trim = _glibc_malloc_trim()


class _IdleReleaser:
    """One daemon thread, started at the first engine run, that releases after IDLE_S of quiet."""

    def __init__(self, trim):
        self.trim = trim            # malloc_trim
        self.changed = threading.Condition()
        self.running = 0            # engine runs in progress (a long one is not a pause)
        self.last_run = None        # when the last engine run ended, if not yet released since
        self.thread = None
        self.releases = 0

    def run_starts(self):
        with self.changed:
            self.running += 1

    def run_ends(self):
        with self.changed:
            self.running -= 1
            self.last_run = time.monotonic()
            if self.thread is None:
                self.thread = threading.Thread(target=self._run, daemon=True,
                                               name="ipu-emulator-memory-release")
                self.thread.start()
                _release_after_each_cell()
            self.changed.notify()

    def _run(self):
        while True:
            with self.changed:
                while True:
                    if self.last_run is None or self.running:
                        self.changed.wait()
                        continue
                    quiet_for = time.monotonic() - self.last_run
                    if quiet_for >= IDLE_S:
                        self.last_run = None
                        break
                    self.changed.wait(IDLE_S - quiet_for)
            self._release()

    def release_now(self) -> bool:
        """Release at once if engine runs have ended since the last release (and none is
        running); True if it did."""
        with self.changed:
            if self.last_run is None or self.running:
                return False
            self.last_run = None
        self._release()
        return True

    def _release(self):
        self.trim(0)                    # outside the lock: an engine run never waits for it
        self.releases += 1


_releaser = _IdleReleaser(_malloc_trim)
# A forked child has no thread: it starts its own at its first engine run.
os.register_at_fork(after_in_child=lambda: globals().update(_releaser=_IdleReleaser(_malloc_trim)))


_cell_hook_registered = False


def _release_after_each_cell():
    """In a notebook kernel, also release when a cell that made engine runs has finished: the
    learner reads now, and the next cell starts from what the last one really kept (so a
    kernel's peak is its largest cell, not the sum of what every cell left free)."""
    global _cell_hook_registered
    ipython = sys.modules.get("IPython")      # a kernel has it loaded; a script does not
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None or _cell_hook_registered:
        return
    shell.events.register("post_run_cell", lambda result: _releaser.release_now())
    _cell_hook_registered = True


def enabled() -> bool:
    return _malloc_trim is not None and os.environ.get("IPU_EMULATOR_RELEASE_MEMORY", "1") != "0"


@contextlib.contextmanager
def engine_run():
    """Around an engine run: freed memory goes back to the system once the runs pause."""
    if not enabled():
        yield
        return
    releaser = _releaser
    releaser.run_starts()
    try:
        yield
    finally:
        releaser.run_ends()


def releases() -> int:
    """How many times freed memory was given back (for tests and benchmarks)."""
    return _releaser.releases


__all__ = ["IDLE_S", "enabled", "engine_run", "releases"]
