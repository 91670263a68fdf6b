"""ipu_emulator: Graphcore's IPU TensorFlow API on stock TensorFlow (CPU), plus a simulator
that shows what an IPU would have done.

The folders are the layers; each may import only the layers below it, never one above
(``make test`` checks this with import-linter, ``pyproject.toml`` [tool.importlinter];
``docs/layout.md`` is the map):

    cli/       the command line: run an original script, simulate a schedule, the import
               hook.  compat/, in the same layer, holds the SDK's other module trees.
    ipu/       API front: tensorflow.python.ipu's module tree, with the SDK's names,
               signatures, defaults and error messages and nothing else (its helpers are
               private modules); real numerics on CPU TensorFlow.
    runtime/   the TensorFlow-side emulation behind it: the configured system, compiled
               programs, loops and pipelines, replicas, shards, Session.run, graph costs.
               In the same layer, each on its own: data/ (data sets offline), lessons/
               (the notebooks' helpers) and exercises/ (the notebooks' checks).
    views/     pictures and text of a timeline: matplotlib, SVG, summary, Perfetto JSON
    sim/       the simulator: hardware, costs, schedules -> timeline -> metrics
    record.py  what ran, as plain data: engine runs, trip counts, feeds, measured costs
    tensorflow_import.py  TensorFlow's first import without the garbage collector's passes,
               then frozen (installed below)

``sim/``, ``views/``, ``lessons/``, ``exercises/`` and ``record.py`` are plain Python:
importing this package, the simulator or the views does not import TensorFlow;
``ipu_emulator.ipu`` does.  The widgets, installed as ``ipu_lab_widgets`` (the repository's
``widgets/``), build on the simulator and the views.
"""
import os as _os

# The tutorials' models need legacy Keras (Keras 3 breaks the shared-layer model), and the
# switch only works if it is set before TensorFlow first loads Keras.
_os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# TensorFlow's C++ start-up chatter (CUDA probing, oneDNN notes) is noise for learners.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"

# TensorFlow's first import runs without the garbage collector's passes, then is frozen: about
# half a second of CPU less per process, and shorter full collections ever after (a kernel on
# notebook 12: 0.4 s in them against 3.5 s).  Plain Python.
from . import tensorflow_import as _tensorflow_import  # noqa: E402  pylint: disable=wrong-import-position
_tensorflow_import.install()

# The simulator registers itself with the record so ``ProgramRecord.simulate()`` works (the
# record is data only and imports no simulator).  Plain Python: no TensorFlow is imported.
from .sim import recorded_runs as _simulator  # noqa: E402,F401  pylint: disable=wrong-import-position
