"""ipu_emulator: Graphcore's IPU TensorFlow API on stock TensorFlow (CPU), plus a simulator
that shows what an IPU would have done.

Layers (arrows point down only):
    ipu_emulator.ipu.*   API front: same names, signatures and error messages as
                         tensorflow.python.ipu; runs real numerics on CPU TensorFlow
    record               what ran: engine runs, loop trip counts, feeds, measured costs
    simulator            hardware -> timeline -> metrics   (pure Python, no TensorFlow)
    views                matplotlib trace, text summary, Chrome-trace/Perfetto JSON

Importing this package does not import TensorFlow; ``ipu_emulator.ipu`` does.
"""
import os as _os

# The tutorials' models need legacy Keras (Keras 3 breaks the shared-layer model), and the
# switch only works if it is set before TensorFlow first loads Keras.
_os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
# TensorFlow's C++ start-up chatter (CUDA probing, oneDNN notes) is noise for learners.
_os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

__version__ = "0.1.0"

# The simulator registers itself with the record so ``ProgramRecord.simulate()`` works (the
# record is data only and imports no simulator).  Plain Python: no TensorFlow is imported.
from . import live_trace as _simulator  # noqa: E402,F401  pylint: disable=wrong-import-position
