"""Per-layer and per-stage costs of a model, for the pipeline simulator (pure Python).

A model is a declarative list of layers (``Flatten``, ``Dense``, ``Conv2D``, ...).  Cutting it
at split points gives pipeline stages; each stage's ``StageCost`` says what one micro-batch
costs it: forward/backward FLOPs, the activations it must keep until its backward pass, the
bytes it sends to the next stage, and its weights and optimizer state.

The same ``StageCost`` records can come from a recorded TensorFlow run (the API front measures
each pipeline stage's ops), so a widget's hypothetical model and a real run are simulated
alike.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple


@dataclass(frozen=True)
class StageCost:
    """What one pipeline stage costs, per micro-batch unless said otherwise.

    ``weight_update_flops`` is per weight update (once per gradient-accumulation cycle);
    ``parameter_bytes`` and ``optimizer_state_bytes`` are resident for the whole run;
    ``activation_bytes`` is what one in-flight micro-batch keeps on this stage's IPU until its
    backward pass (less with recomputation: only the stage input is kept);
    ``input_bytes`` is the stage's input per micro-batch (for stage 0: the infeed element);
    ``output_bytes`` is what it sends to the next stage per micro-batch (and the gradient of
    the same size comes back in the backward pass).
    """

    name: str
    layers: Tuple[str, ...] = ()
    forward_flops: float = 0.0
    backward_flops: float = 0.0
    weight_update_flops: float = 0.0
    forward_bytes_accessed: float = 0.0
    backward_bytes_accessed: float = 0.0
    parameter_bytes: int = 0
    optimizer_state_bytes: int = 0
    activation_bytes: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
