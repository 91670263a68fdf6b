"""glibc's malloc settings for the processes the tests start: freed memory kept for reuse.

TensorFlow copies a graph's constants several times over while it builds and runs a session
(the graph into the session, its partitions, the function library, a checkpoint's meta graph),
and a program that feeds a dataset with ``from_tensor_slices`` (Graphcore's layouts do) holds
it as one such constant: 61 MB for the CIFAR stand-in.  glibc serves each copy above its mmap
threshold (at most 32 MB) with fresh pages from the kernel and unmaps them when freed, so
every copy faults in and zeroes its pages anew.  One estimator layout took 817,000 page faults
and 2.2 s of system CPU of its 4.4 s.  With mmap off (``glibc.malloc.mmap_max=0``: large
blocks come from the heap) and the heap not trimmed at every free
(``glibc.malloc.trim_threshold``), freed blocks are reused: 284,000 faults and 3.5 s of CPU;
the estimators' and configuration folders 22.7-24.0 s of CPU against 27.1-27.6 s, a whole
`make test` 384 s against 405 s (bench/malloc_reuse.py measures it).  The notebooks' kernels
peaked as before (notebook_resources.json: within 2 %).  The lab's kernels still give freed
memory back once they are idle (ipu_emulator/runtime/memory_release.py: ``malloc_trim`` works
with these settings).

GLIBC_TUNABLES is read when a process starts, so the root conftest.py sets it in
``os.environ`` before pytest-xdist starts its workers: the workers and everything they start
(the fork servers, the TF2 child, the notebooks' kernels, JupyterLab, the hub, Chromium) run
with it.  Settings the shell already gives come after ours and win;
``IPU_LAB_MALLOC_REUSE=0`` leaves the variable as the shell gave it (bench/malloc_reuse.py's
other side).  Other C libraries ignore the variable.
"""
from __future__ import annotations

import os
from typing import MutableMapping

VARIABLE = "GLIBC_TUNABLES"
# The trim threshold is in bytes: 4 GB, above any peak the suite's processes reach.
SETTINGS = "glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=4294967296"


def apply(environ: MutableMapping[str, str] = os.environ) -> None:
    """Put ``SETTINGS`` first in ``environ``'s GLIBC_TUNABLES (once), unless
    IPU_LAB_MALLOC_REUSE=0."""
    given = environ.get(VARIABLE, "")
    # Already there: a worker's conftest.py runs again, with the controller's setting.
    if environ.get("IPU_LAB_MALLOC_REUSE") == "0" or SETTINGS in given:
        return
    environ[VARIABLE] = f"{SETTINGS}:{given}" if given else SETTINGS


__all__ = ["VARIABLE", "SETTINGS", "apply"]
