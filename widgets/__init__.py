"""Interactive widgets for the IPU tutorial lab, built on ``ipu_emulator``'s pure simulator.

Importing this package never imports TensorFlow, so the playground starts fast and cheaply.
"""
from .playground import ConfigControls, PipelinePlayground  # noqa: F401
from .playground_model import PlaygroundConfig, PlaygroundResult, simulate  # noqa: F401
