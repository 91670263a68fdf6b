"""The emulator gives freed heap memory back to the system once engine runs pause
(runtime/memory_release.py)."""
import platform
from contextlib import nullcontext
import time

import pytest

from ipu_emulator.runtime import memory_release


@pytest.fixture
def trims(monkeypatch):
    """A fresh releaser with a short idle time; counts the malloc_trim calls it makes."""
    made = []
    monkeypatch.setattr(memory_release, "_releaser",
                        memory_release._IdleReleaser(lambda pad: made.append(pad) or 1))
    monkeypatch.setattr(memory_release, "IDLE_S", 0.2)
    monkeypatch.delenv("IPU_EMULATOR_RELEASE_MEMORY", raising=False)
    return made


def wait_for(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def run(seconds=0.0):
    with memory_release.engine_run():
        time.sleep(seconds)


def test_released_once_after_the_runs_pause(trims):
    started = time.monotonic()
    for _ in range(5):                        # a loop of quick runs: nothing released meanwhile
        run()
        time.sleep(0.02)
    assert trims == [] or time.monotonic() - started > memory_release.IDLE_S
    assert wait_for(lambda: trims == [0])     # malloc_trim(0), once, after the pause
    time.sleep(3 * memory_release.IDLE_S)
    assert trims == [0]                       # no runs since: nothing more to give back
    run()
    assert wait_for(lambda: len(trims) == 2)  # the next pause releases again
    assert memory_release.releases() == 2


def test_a_long_run_is_not_a_pause(trims):
    run()
    assert wait_for(lambda: trims == [0])
    run(seconds=4 * memory_release.IDLE_S)    # the memory is in use all along
    assert trims == [0]
    assert wait_for(lambda: trims == [0, 0])  # released once it has ended


def test_switched_off_by_the_environment(trims, monkeypatch):
    monkeypatch.setenv("IPU_EMULATOR_RELEASE_MEMORY", "0")
    run()
    time.sleep(3 * memory_release.IDLE_S)
    assert trims == []


def test_found_exactly_on_glibc():
    on_glibc = platform.libc_ver()[0] == "glibc"
    assert (memory_release._glibc_malloc_trim() is not None) == on_glibc


def test_nothing_to_call_without_glibc(monkeypatch):
    monkeypatch.setattr(memory_release, "_malloc_trim", None)
    assert not memory_release.enabled()


def test_every_session_run_of_a_program_counts(monkeypatch):
    import tensorflow.compat.v1 as tf
    from ipu_emulator import ipu

    noted = []
    monkeypatch.setattr(memory_release, "engine_run", lambda: noted.append(1) or nullcontext())
    with tf.Graph().as_default():
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            [total] = ipu.ipu_compiler.compile(lambda: tf.constant(1.0) + 1.0, [])
        with tf.Session() as session:
            session.run(total)
            session.run(total)
            session.run(tf.constant(3.0))     # not an IPU program: no engine run
    assert len(noted) == 2


def test_release_now_only_after_runs(trims):
    assert memory_release._releaser.release_now() is False      # no run yet: nothing to give
    run()
    assert memory_release._releaser.release_now() is True
    assert trims == [0]
    assert memory_release._releaser.release_now() is False      # nothing new since
    time.sleep(3 * memory_release.IDLE_S)
    assert trims == [0]                                         # the idle thread has no more


class FakeShell:
    def __init__(self):
        self.callbacks = {}

    def register(self, event, callback):
        self.callbacks.setdefault(event, []).append(callback)

    @property
    def events(self):
        return self


def test_in_a_kernel_each_cell_with_runs_ends_with_a_release(trims, monkeypatch):
    import sys
    import types

    shell = FakeShell()
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    monkeypatch.setattr(memory_release, "_cell_hook_registered", False)
    monkeypatch.setattr(memory_release, "IDLE_S", 60.0)         # only the cell hook releases
    run()                                                       # a cell made an engine run
    [after_cell] = shell.callbacks["post_run_cell"]
    after_cell(None)
    assert trims == [0]
    after_cell(None)                                            # a cell without engine runs
    assert trims == [0]
    run()
    assert shell.callbacks["post_run_cell"] == [after_cell]     # registered once
