"""Notebook 04's exercises: replicated graphs, their feeds and their weight updates.

    >>> check_replication_factor(2).ok, check_replication_factor(8).ok
    (True, False)
    >>> check_accumulation_for_batch(4).ok
    True
    >>> check_all_reduce_bytes(101_800).ok
    True
"""
from __future__ import annotations

from ipu_emulator.exercises import exercise, is_whole_number, not_yet, right
from ipu_emulator.sim.hardware import next_power_of_two

# 04.replication-factor: a program sharded over 3 IPUs on a device of 8 IPUs.
SHARDS_USED = 3
DEVICE_IPUS = 8


def _replication_factor(shards: int = SHARDS_USED, ipus: int = DEVICE_IPUS) -> int:
    """The SDK's rule: the IPUs of the device over the shards rounded up to a power of two."""
    return ipus // next_power_of_two(shards)



@exercise("04.replication-factor", solution=_replication_factor, wrong=(8, 1, 3, 4, "2"))
def check_replication_factor(factor):
    """The ``replication_factor`` the feeds need for a program whose ops use ``ipu_shard(0)``,
    ``(1)`` and ``(2)``, on a device of 8 IPUs."""
    if not is_whole_number(factor):
        return not_yet("answer with a whole number of replicas, without quotes.")
    expected = _replication_factor()
    rounded = next_power_of_two(SHARDS_USED)
    if factor == expected:
        return right(f"the program's {SHARDS_USED} shards are rounded up to {rounded} IPUs "
                     f"(one of them idle), and {DEVICE_IPUS} / {rounded} = {expected} copies fit "
                     f"on the device. With SDK 2.0 and earlier the feeds must say "
                     f"replication_factor={expected}, or the first run stops with an error; "
                     "from SDK 2.1 the SDK works it out by itself and ignores the argument.")
    if factor == DEVICE_IPUS:
        return not_yet("that would be right for a program on one IPU. This one needs several "
                       "IPUs for each copy: how many IPUs does one copy take?")
    if factor == 1:
        return not_yet("the device has more IPUs than one copy of the program needs, and the "
                       "IPUs left over run further copies. How many copies fit?")
    if factor * SHARDS_USED <= DEVICE_IPUS:
        return not_yet("one copy takes more IPUs than its number of shards: the shard count is "
                       "rounded up to a power of two. Divide the device by that.")
    return not_yet("divide the IPUs of the device by the IPUs one copy takes (its shards, "
                   "rounded up to a power of two).")


# 04.accumulation-for-batch: 4 replicas of a one-IPU program, mini-batches of 32, and a
# recipe that wants 512 samples per weight update.
REPLICAS = 4
MINI_BATCH = 32
TARGET_BATCH = 512


@exercise("04.accumulation-for-batch", solution=lambda: TARGET_BATCH // (REPLICAS * MINI_BATCH),
          wrong=(16, 128, 2, 8, 4.5, "4"))
def check_accumulation_for_batch(count):
    """The gradient accumulation count that gives 512 samples per update with 4 replicas of
    mini-batches of 32."""
    if not is_whole_number(count):
        return not_yet("answer with a whole number of mini-batches, without quotes.")
    if count < 1:
        return not_yet("each replica accumulates at least one mini-batch per update.")
    effective = REPLICAS * MINI_BATCH * count
    if effective == TARGET_BATCH:
        return right(f"{REPLICAS} replicas x {MINI_BATCH} images x {count} mini-batches = "
                     f"{effective} images per weight update. Each replica accumulates {count} "
                     "mini-batches, then one all-reduce averages the four replicas' gradients.")
    if MINI_BATCH * count == TARGET_BATCH:
        return not_yet("that gives the target on one IPU, but every update also averages "
                       "over the replicas. Count them in.")
    return not_yet("effective batch = replicas x mini-batch x accumulation count; with your "
                   "count it is " + ("more" if effective > TARGET_BATCH else "less") +
                   " than the recipe's.")


# 04.all-reduce-bytes: the notebook's model (784 -> 32 -> 10) with a mini-batch twice as big.
LAYER_SIZES = (784, 32, 10)


def _gradient_bytes() -> int:
    """4 bytes (float32) per weight and per bias of the dense layers."""
    return 4 * sum(inputs * outputs + outputs
                   for inputs, outputs in zip(LAYER_SIZES, LAYER_SIZES[1:]))


@exercise("04.all-reduce-bytes", solution=_gradient_bytes,
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


__all__ = ["check_replication_factor", "check_accumulation_for_batch", "check_all_reduce_bytes"]
