"""TensorFlow's intra-op thread pool at one thread in the processes the tests start.

Each TensorFlow process sizes the pool that splits one op's work (a matmul's blocks, a
reduction's ranges) to the machine's cores, and its idle threads spin looking for work before
they sleep.  `make test` runs three workers and their children on two cores, so a second
intra-op thread never gains a core of its own: it spins and steals while the others wait
(``perf`` over a file of checks on the AVX2-only AMD EPYC: Eigen's ``GlobalSteal`` and
``PopBack`` and the scheduler's switches, about a fifth of the process's CPU).  With
``TF_NUM_INTRAOP_THREADS=1``, six files of checks and estimators on three workers took 0.89
of the CPU (``bench/intraop_threads.py``: 99.2 s against 111.7 s, medians of two rounds,
alternating).

The inter-op pool, which runs a graph's independent ops side by side, keeps its threads: the
judge compares the learner's weights with the reference's exactly, and ops run in a varying
order there as on a learner's laptop, so a weight that depended on that order would show.
How one op is split is fixed by its sizes and the thread count, the same in every process of
the run, so the learner's and the reference's runs still split each op alike.

TensorFlow reads the variable when it first makes a device, so the root conftest.py sets it in
``os.environ`` before pytest-xdist starts its workers, as ``malloc_reuse`` does: the workers
and all they start (the fork servers, the TF2 child, JupyterLab's kernels) run with it.  A
value the shell gives wins; ``IPU_LAB_ONE_INTRAOP_THREAD=0`` leaves it out.  A learner's
kernel on the hub gets only the spawner's environment, so the class runs as TensorFlow sizes
itself, and so do the notebook run's kernels (tests/support/kernel_paths.py: at one thread
Eigen's kernels gave oneDNN's float32 bits on one host, and the second path tested nothing).
"""
from __future__ import annotations

import os
from typing import MutableMapping

VARIABLE = "TF_NUM_INTRAOP_THREADS"
OPT_OUT = "IPU_LAB_ONE_INTRAOP_THREAD"


def apply(environ: MutableMapping[str, str] = os.environ) -> None:
    """Set ``VARIABLE`` to one thread in ``environ`` unless it is set or ``OPT_OUT`` is "0"."""
    if environ.get(OPT_OUT) != "0":
        environ.setdefault(VARIABLE, "1")


__all__ = ["VARIABLE", "OPT_OUT", "apply"]
