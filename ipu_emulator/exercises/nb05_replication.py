"""Notebook 05's numeric exercise: the size of the replicas' gradient all-reduce.

(The notebook's code exercise, replicating a training program, is
``ipu_emulator.code_exercises.nb05_replication``.)

    >>> check_all_reduce_bytes(101_800).ok, check_all_reduce_bytes(2 * 101_800).ok
    (True, False)
"""
from __future__ import annotations

from ipu_emulator.exercises import exercise, is_whole_number, not_yet, right

# 05.all-reduce-bytes: the notebook's model (784 -> 32 -> 10) with a mini-batch twice as big.
LAYER_SIZES = (784, 32, 10)


def _gradient_bytes() -> int:
    """4 bytes (float32) per weight and per bias of the dense layers."""
    return 4 * sum(inputs * outputs + outputs
                   for inputs, outputs in zip(LAYER_SIZES, LAYER_SIZES[1:]))


@exercise("05.all-reduce-bytes", solution=_gradient_bytes,
          wrong=(2 * 101_800, 101_800 // 2, 64, 25_450, "101,800"))
def check_all_reduce_bytes(count):
    """Bytes each replica all-reduces per weight update when the mini-batch grows from 32 to
    64 images."""
    if not is_whole_number(count):
        return not_yet("answer with a whole number of bytes, without quotes or commas (Python "
                       "accepts 1_000 for 1,000).")
    expected = _gradient_bytes()
    if count == expected:
        return right("the all-reduce carries the gradients, one float32 per weight: its size "
                     "is the model's, whatever the mini-batch. A bigger mini-batch (or "
                     "accumulating more mini-batches per update) gives each all-reduce more "
                     "compute to share its cost with.")
    if count == expected // 4:
        return not_yet("that is the number of weights; each one travels as a float32. How "
                       "many bytes is that?")
    if count > expected:
        return not_yet("does a bigger mini-batch add gradients? Each weight gets one gradient "
                       "per update, averaged over the images. Read the bytes the notebook "
                       "printed and think about what they count.")
    return not_yet("the all-reduce carries one float32 gradient per weight and bias of the "
                   "model. Read the bytes the notebook printed for the mini-batch of 32.")


__all__ = ["check_all_reduce_bytes"]
