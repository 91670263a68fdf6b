"""tests/support/malloc_reuse.py: the processes the tests start reuse the memory they free
instead of faulting in fresh pages for each large block (two bare Pythons: about 0.1 s)."""
import platform

import pytest

from tests.support import malloc_reuse
from tests.support.child_python import child_env, run_python

# Frees a 64 MB block (above glibc's largest mmap threshold, as TensorFlow's copies of a
# dataset's constant are), then counts the page faults of writing a new block of that size.
REFAULTS = """\
import ctypes, resource
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
SIZE = 64 << 20
block = libc.malloc(SIZE); libc.memset(block, 1, SIZE); libc.free(block)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
block = libc.malloc(SIZE); libc.memset(block, 1, SIZE)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""
PAGES = (64 << 20) // 4096


def refaults(env) -> int:
    result = run_python(REFAULTS, env=env).check()
    return int(result.stdout.split()[-1])


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the settings are glibc's")
def test_a_freed_large_block_is_reused_by_the_tests_children_and_faulted_anew_without():
    assert malloc_reuse.SETTINGS in child_env()[malloc_reuse.VARIABLE]
    assert refaults(child_env()) < PAGES / 20
    assert refaults(child_env(**{malloc_reuse.VARIABLE: None})) > PAGES / 2


def test_the_settings_go_first_once_the_shells_own_win_and_they_can_be_left_out():
    environ = {}
    malloc_reuse.apply(environ)
    assert environ == {"GLIBC_TUNABLES": malloc_reuse.SETTINGS}
    environ = {"GLIBC_TUNABLES": "glibc.malloc.arena_max=1"}
    malloc_reuse.apply(environ)
    malloc_reuse.apply(environ)   # a worker's conftest applies it again
    assert environ["GLIBC_TUNABLES"] == malloc_reuse.SETTINGS + ":glibc.malloc.arena_max=1"
    environ = {"IPU_LAB_MALLOC_REUSE": "0"}
    malloc_reuse.apply(environ)
    assert "GLIBC_TUNABLES" not in environ
