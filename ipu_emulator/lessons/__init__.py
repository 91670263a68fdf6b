"""Helpers for the notebooks' cells, so a lesson's cell shows the lesson, not the plumbing.

Plain Python, like the simulator and the views below them (no TensorFlow, no NumPy;
matplotlib only when plotting), so the TensorFlow-free notebooks can use them in JupyterLite:

``progress``   a progress line for training loops that a notebook stores finished
``placement``  where each layer's ops ran, read from a TensorFlow trace's (device, node) pairs
``pipelines``  the pipelining notebooks' helpers: a recorded run with other pipeline settings,
               the tutorial's "follow the first mini-batch", the IPUs' span, the loss plot

May import: ``ipu_emulator.views``, ``ipu_emulator.sim``, ``ipu_emulator.record`` and the
standard library (``make test`` checks this with import-linter).

    >>> from ipu_emulator import lessons
    >>> for step in lessons.progress(range(2), "demo"):
    ...     pass
    demo: 2/2 in 0.0 s
"""
from ipu_emulator.lessons.pipelines import first_backward_end, ipu_span, plot_losses, rescheduled
from ipu_emulator.lessons.placement import devices_by_layer
from ipu_emulator.lessons.progress import progress

__all__ = ["progress", "devices_by_layer", "rescheduled", "first_backward_end", "ipu_span",
           "plot_losses"]
