"""What the SDK's compiler refuses when it compiles a program: checked at its first run.

On an IPU system a program is compiled when it first runs, for the device configured by
then, and the backend's checks fail that ``sess.run`` with their ``tf.errors`` (Graphcore's
TensorFlow user guide and API reference: device counts and replication, feed types, the
pipeline's gradient accumulation count, the accumulation optimizers).  The session hook
calls ``check`` at that moment, once per program and session, in the backend's order:

* the infeed's element types and the program's own types (IPU-unsupported dtypes);
* shards against the device's IPUs (the next power of two of the shards must divide them;
  the rest is replication, which is logged);
* each pipeline's gradient accumulation count against its schedule;
* a program whose feeds declared their replicas (SDK 2.0 and earlier) against the replicas
  the device gives it, and errors found while its replicas were built;
* every ``GradientAccumulationOptimizerV2`` inside a loop whose iterations it divides.
"""
from __future__ import annotations

import logging

import tensorflow as tf

from ipu_emulator.runtime import configured_system
from ipu_emulator.sim import schedule_rules
from . import device_types, programs, replication, shards

_logger = logging.getLogger("ipu_emulator")

_CHECK_CAN_BE_DISABLED = (
    "This check can be disabled with "
    "`XLA_FLAGS=\"--xla_disable_hlo_passes=gradient-accumulation-verifier\"`, however the "
    "compiler cannot guarantee correctness of results.")
ACCUMULATION_NOT_IN_LOOP_MESSAGE = (
    "Detected a gradient accumulation operation which is not inside a training loop. The "
    "model with the gradient accumulation operation needs to be wrapped in a training "
    "loop.\n" + _CHECK_CAN_BE_DISABLED)
ACCUMULATION_NOT_A_DIVISOR_MESSAGE = (
    "Detected a gradient accumulation operation with {} number of mini batches inside a loop "
    "with {} iterations.\nIt is required that the number of mini batches to accumulate evenly "
    "divides the number of loop iterations.\n" + _CHECK_CAN_BE_DISABLED)


def check(program) -> None:
    """Raise the backend's error for the first check ``program`` fails."""
    for infeed in program.infeeds:
        message = infeed.unsupported_dtype_message()
        if message is not None:
            raise tf.errors.FailedPreconditionError(None, None, message)
    message = device_types.unsupported_type_message(program)
    if message is not None:
        raise tf.errors.InvalidArgumentError(None, None, message)
    _check_shards(program)
    _check_pipeline_counts(program)
    _check_replication(program)
    for num_mini_batches, in_loop, iterations in program.gradient_accumulation_checks:
        message = accumulation_usage_error(num_mini_batches, in_loop, iterations)
        if message is not None:
            raise tf.errors.FailedPreconditionError(None, None, message)


def accumulation_usage_error(num_mini_batches, in_loop, loop_iterations):
    """The SDK's message for a misplaced gradient accumulation, or None."""
    if not in_loop:
        return ACCUMULATION_NOT_IN_LOOP_MESSAGE
    if loop_iterations is not None and loop_iterations % num_mini_batches:
        return ACCUMULATION_NOT_A_DIVISOR_MESSAGE.format(num_mini_batches, loop_iterations)
    return None


def _check_shards(program) -> None:
    num_ipus = configured_system.device(program.device_ordinal).num_ipus
    num_shards = shards.num_shards(program)
    mismatch = replication.shard_mismatch_message(num_ipus, num_shards)
    if mismatch:
        raise tf.errors.InternalError(None, None, mismatch)
    factor = replication.replication_factor(num_ipus, num_shards)
    if factor > 1:
        _logger.info("Automatically replicating the TensorFlow model by a factor of %d.",
                     factor)


def _check_pipeline_counts(program) -> None:
    for build in programs.pipelines_of(program):
        if not build.gac_is_static:
            continue  # a count given as a tensor is checked on the device, every run
        settings = build.settings
        try:
            schedule_rules.check_gradient_accumulation_count(
                settings.schedule, len(settings.device_mapping),
                settings.gradient_accumulation_count, settings.training,
                list(settings.device_mapping))
        except schedule_rules.PipelineConfigurationError as error:
            raise getattr(tf.errors, error.sdk_error)(None, None, error.message) from None


def _check_replication(program) -> None:
    message = replication.device_mismatch_message(program)
    if message is not None:
        raise tf.errors.FailedPreconditionError(None, None, message)
    for message in program.replication_errors:
        raise tf.errors.FailedPreconditionError(None, None, message)


__all__ = ["check", "accumulation_usage_error", "ACCUMULATION_NOT_IN_LOOP_MESSAGE",
           "ACCUMULATION_NOT_A_DIVISOR_MESSAGE"]
