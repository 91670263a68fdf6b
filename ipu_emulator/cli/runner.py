"""``python -m ipu_emulator run [--tf1] script.py ARGS...``: run an unmodified IPU script.

Before the script starts, the runner
* makes ``tensorflow.python.ipu`` and ``tensorflow.contrib.ipu`` resolve to the emulator
  (and ``tensorflow.python.keras`` to legacy Keras, the Keras of the SDK's TensorFlow),
* with ``--tf1``, switches TensorFlow to TF 1.15-style graph mode (the SDK's TF1 flavour),
  with the TF1 names (``tf.Session``...) on ``import tensorflow as tf`` too,
  and, with ``--seed``, seeds the graph, NumPy and Python for reproducible runs,
* routes ``tf.keras.datasets.mnist``/``fashion_mnist`` through ``ipu_emulator.data.datasets`` so
  the script works offline (a one-line warning says when the bundled sample is used).
After the script ends it prints a one-line summary of what the simulated IPU did, and with
``--trace FILE`` writes the simulated execution trace as Chrome-trace JSON for Perfetto.
``POPLAR_ENGINE_OPTIONS`` (``autoReport.all``/``autoReport.directory``) writes the trace and
a text summary into that directory; ``TF_POPLAR_FLAGS=--use_synthetic_data`` makes the
simulated infeed free of host transfers.  A shell script (``run profile.sh ARGS``) runs with
its ``python3 x.py`` calls routed through the runner.
"""
from __future__ import annotations

import argparse
import atexit
import gc
import os
import runpy
import sys

from ipu_emulator.sim import hardware


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tf1", action="store_true",
                        help="TF 1.15-style graph mode (for scripts written for the TF1 SDK)")
    parser.add_argument("--seed", type=int, default=None,
                        help="seed TensorFlow's graph, NumPy and Python for repeatable runs")
    parser.add_argument("--trace", metavar="FILE", default=None,
                        help="write the simulated IPU trace of all engine runs (Chrome-trace JSON)")
    parser.add_argument("--ipu-version", default="ipu2", choices=hardware.IPU_VERSIONS,
                        help="IPU generation the trace is simulated for (default ipu2)")
    parser.add_argument("--quiet", action="store_true", help="no summary line at the end")
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")


def prepare(tf1: bool = False, seed: int | None = None) -> None:
    """Set up this process so an original Graphcore script runs against the emulator."""
    import ipu_emulator  # noqa: F401  (environment switches before TensorFlow loads)
    from ipu_emulator.cli import import_aliases
    from ipu_emulator.data import datasets
    import_aliases.install()
    import tensorflow as tf
    import_aliases.install_keras()  # tensorflow.python.keras -> legacy Keras, as in the SDK's TF
    if tf1:
        tf.compat.v1.disable_v2_behavior()
        from ipu_emulator.compat import tf1_names
        tf1_names.install()  # tf.Session, tf.placeholder... for ``import tensorflow as tf``
    if seed is not None:
        import random
        import numpy as np
        random.seed(seed)
        np.random.seed(seed)
        if tf1:
            tf.compat.v1.set_random_seed(seed)
        else:
            tf.random.set_seed(seed)
    datasets.patch_keras_datasets()
    import ipu_emulator.ipu  # noqa: F401  (installs the session hook)
    from ipu_emulator.compat import tf_estimator
    tf_estimator.install()  # tf.estimator.ModeKeys for IPU estimator scripts (gone in TF 2.16+)


def run(options: argparse.Namespace) -> int:
    script = os.path.abspath(options.script)
    if not os.path.isfile(script):
        print("ipu_emulator: no such script: %s" % options.script, file=sys.stderr)
        return 2
    from ipu_emulator.cli import shell_wrappers
    if not shell_wrappers.is_python_script(script):
        # A shell wrapper (e.g. a profiling script): its ``python3 x.py`` calls run here.
        return shell_wrappers.run_wrapper(script, options.args, _forwarded_flags(options))
    prepare(tf1=options.tf1, seed=options.seed)
    # On the way out, after the script's own atexit handlers: TensorFlow's objects need no
    # last garbage collection (1.3-1.7 s of CPU; the system frees the memory: bench/exit_cost.py).
    atexit.register(gc.freeze)
    from ipu_emulator import record

    sys.argv = [script] + list(options.args)
    sys.path.insert(0, os.path.dirname(script))
    exit_code = 0
    with record.capture() as runs:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as stop:
            exit_code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        finally:
            _report(runs, options)
    return exit_code


def _report(runs, options) -> None:
    if not runs.runs:
        if not options.quiet:
            print("ipu_emulator: the script ran no IPU programs", file=sys.stderr)
        return
    from ipu_emulator import views
    from ipu_emulator.sim import recorded_runs
    simulated = None
    if options.trace or not any(run.stages for run in runs.runs):
        simulated = runs.simulate(target=options.ipu_version)  # sharded/pipelined: per stage
        makespan = simulated.metrics.makespan
    else:  # the summary line needs only the total, not a joined trace of every run
        makespan = recorded_runs.total_makespan(runs.runs, target=options.ipu_version)
    if not options.quiet:
        print("ipu_emulator: %d engine runs, %d loop iterations; simulated %s time %.3f s; "
              "host wall time %.3f s" % (
                  runs.engine_runs, runs.iterations, options.ipu_version,
                  makespan, runs.host_seconds), file=sys.stderr)
    if options.trace:
        views.save_chrome_trace(simulated, options.trace)
        if not options.quiet:
            print("ipu_emulator: trace written to %s (open it in https://ui.perfetto.dev)"
                  % options.trace, file=sys.stderr)
    _write_poplar_report(runs, options)


def _write_poplar_report(runs, options) -> None:
    """``POPLAR_ENGINE_OPTIONS`` autoReport: the simulated trace and a summary, in its
    ``autoReport.directory`` (see ``ipu_emulator.cli.profiling``)."""
    from ipu_emulator.cli import profiling
    profiling.report_if_requested(lambda: runs, target=options.ipu_version,
                                  quiet=options.quiet)


def _forwarded_flags(options) -> list:
    """The runner options a wrapper script's ``python3 x.py`` calls run with."""
    flags = ["--tf1"] if options.tf1 else []
    if options.seed is not None:
        flags += ["--seed", str(options.seed)]
    flags += ["--ipu-version", options.ipu_version]
    return flags + (["--quiet"] if options.quiet else [])
