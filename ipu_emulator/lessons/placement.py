"""Where each layer's ops ran, read from a TensorFlow trace (``RunMetadata.step_stats``).

A full trace lists, per device, the nodes that ran there.  ``devices_by_layer`` groups those
``(device, node name)`` pairs by the layer each node belongs to (the ``tf.variable_scope``
named in its path), so a notebook can show that a sharded layer really ran on its own IPU's
device.  Pure Python: the notebook hands it the pairs.

    >>> nodes = [("/job:localhost/replica:0/task:0/device:CPU:0", "dense256/dense/MatMul"),
    ...          ("/job:localhost/replica:0/task:0/device:CPU:1", "logits_1/dense_4/BiasAdd"),
    ...          ("/job:localhost/replica:0/task:0/device:CPU:1",
    ...           "optimizer/GradientAccumulationOptimizerV2/dense256/accumulator"),
    ...          ("/job:localhost/replica:0/task:0/device:CPU:0", "dense256/_send_12"),
    ...          ("/job:localhost/replica:0/task:0/device:CPU:0", "_SOURCE")]
    >>> devices_by_layer(nodes, ["dense256", "logits"])
    {'dense256': ['device:CPU:0'], 'logits': ['device:CPU:1'], '(gradient accumulators)': ['device:CPU:1']}
"""
from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Sequence, Tuple

ACCUMULATORS = "(gradient accumulators)"
# The scope GradientAccumulationOptimizerV2 builds its accumulators in.
ACCUMULATOR_SCOPE = "GradientAccumulationOptimizerV2"


def _unnumbered(part: str) -> str:
    """``softmax_ce_1`` -> ``softmax_ce``: a second program built from the same code gets its
    scopes numbered."""
    stem, _, number = part.rpartition("_")
    return stem if stem and number.isdigit() else part


def layer_of(node_name: str, layers: Sequence[str]) -> Optional[str]:
    """The layer of ``layers`` whose scope ``node_name`` is in, ``ACCUMULATORS`` for the
    optimizer's accumulators, or None (a transfer between devices, named ``_...`` or
    ``.../_<n>``, or a node outside the layers)."""
    parts = node_name.split("/")
    if node_name.startswith("_") or parts[-1].startswith("_"):
        return None
    parts = [_unnumbered(part) for part in parts]
    if ACCUMULATOR_SCOPE in parts:
        return ACCUMULATORS
    return next((layer for layer in layers if layer in parts), None)


def devices_by_layer(nodes: Iterable[Tuple[str, str]],
                     layers: Sequence[str]) -> Dict[str, List[str]]:
    """``{layer: sorted device names}`` for the ``(device, node name)`` pairs of a trace, in
    the order of ``layers`` (then the accumulators, if any ran); device names are shortened
    to their last part (``device:CPU:1``)."""
    found: Dict[str, set] = {}
    for device, node_name in nodes:
        layer = layer_of(node_name, layers)
        if layer is not None:
            found.setdefault(layer, set()).add(device.split("/")[-1])
    return {layer: sorted(found[layer]) for layer in [*layers, ACCUMULATORS] if layer in found}


__all__ = ["devices_by_layer", "layer_of", "ACCUMULATORS"]
