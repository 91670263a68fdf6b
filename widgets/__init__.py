"""Interactive widgets for the IPU tutorial lab, built on ``ipu_emulator``'s pure simulator.

The repository's ``widgets/`` folder, installed as ``ipu_lab_widgets`` (a plain top-level
``widgets`` could clash with another package of that name)::

    from ipu_lab_widgets import PipelinePlayground

Importing this package never imports TensorFlow, so the playground starts fast and cheaply.
"""
from .playground import ConfigControls, PipelinePlayground  # noqa: F401
from .playground_model import PlaygroundConfig, PlaygroundResult, simulate  # noqa: F401
