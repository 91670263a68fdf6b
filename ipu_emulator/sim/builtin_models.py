"""The built-in models: the tutorials' own networks, as ``model_layers`` layers.

    >>> [layer.name for layer in builtin_model("tutorial-convnet")]
    ['images', 'reshape', 'conv1', 'conv2', 'flatten', 'logits', 'cel']
"""
from __future__ import annotations

from typing import Dict, Tuple

from ipu_emulator.sim.model_layers import (Conv2D, Dense, Flatten, Input, Layer, Reshape,
                                           SoftmaxCrossEntropy)

# The pipelining tutorial's MLP (its step 4 lists: flatten, dense256, dense128, dense64,
# dense32, logits, cel); hidden layers use relu, the logits none; trained with plain SGD.
TUTORIAL_MLP = (
    Input((28, 28), name="images"),
    Flatten(name="flatten"),
    Dense(256, activation="relu", name="dense256"),
    Dense(128, activation="relu", name="dense128"),
    Dense(64, activation="relu", name="dense64"),
    Dense(32, activation="relu", name="dense32"),
    Dense(10, name="logits"),
    SoftmaxCrossEntropy(name="cel"),
)

# Tutorials 1-2's classifier: two separate 3x3 convolutions of 8 filters, then one dense
# layer giving 10 logits (trained there with Adam).
TUTORIAL_CONVNET = (
    Input((28, 28), name="images"),
    Reshape((28, 28, 1), name="reshape"),
    Conv2D(8, 3, padding="same", activation="relu", name="conv1"),
    Conv2D(8, 3, padding="same", activation="relu", name="conv2"),
    Flatten(name="flatten"),
    Dense(10, name="logits"),
    SoftmaxCrossEntropy(name="cel"),
)

# Tutorial 3's classifier (TensorFlow 2, Keras): flatten, 128 relu units, 10 logits.
TUTORIAL3_MLP = (
    Input((28, 28), name="images"),
    Flatten(name="flatten"),
    Dense(128, activation="relu", name="dense128"),
    Dense(10, name="logits"),
    SoftmaxCrossEntropy(name="cel"),
)

MODELS: Dict[str, Tuple[Layer, ...]] = {
    "tutorial-mlp": TUTORIAL_MLP,
    "tutorial-convnet": TUTORIAL_CONVNET,
    "tutorial3-mlp": TUTORIAL3_MLP,
}

# The pipelining tutorial's default ``--splits``: stage 1 begins at dense32.
TUTORIAL_MLP_SPLITS = ("dense32",)


def builtin_model(name: str) -> Tuple[Layer, ...]:
    """A built-in model's layers (an immutable tuple; build a new tuple to change it).

    >>> [layer.name for layer in builtin_model("tutorial-convnet")]
    ['images', 'reshape', 'conv1', 'conv2', 'flatten', 'logits', 'cel']
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; the built-in models are: "
                         f"{', '.join(sorted(MODELS))}")
    return MODELS[name]
