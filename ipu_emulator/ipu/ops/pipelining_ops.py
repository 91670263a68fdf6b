"""Pipelining: split a model into stages on different IPUs and stream micro-batches through.

Each stage is a Python function; stage ``k+1`` takes stage ``k``'s outputs.  Stage 0 takes
``inputs`` followed by the infeed element.  With an ``optimizer_function`` the pipeline
trains: each micro-batch's gradients are accumulated, and after
``gradient_accumulation_count`` micro-batches the optimizer applies them once.  The whole
pass repeats ``repeat_count`` times per ``sess.run``.

    def stage1(lr, images, labels):
        return lr, layers.Dense(256, activation=tf.nn.relu)(images), labels
    def stage2(lr, hidden, labels):
        logits = layers.Dense(10)(hidden)
        return lr, tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
    def optimizer_function(lr, loss):
        return pipelining_ops.OptimizerFunctionOutput(
            tf.train.GradientDescentOptimizer(lr), loss)
    def model(lr):
        return pipelining_ops.pipeline([stage1, stage2], gradient_accumulation_count=8,
                                       inputs=[lr], infeed_queue=infeed,
                                       outfeed_queue=outfeed,
                                       optimizer_function=optimizer_function)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        train = ipu.ipu_compiler.compile(model, inputs=[lr])

How the emulator runs it: one TensorFlow while loop over all ``gradient_accumulation_count
x repeat_count`` micro-batches, each stage on the CPU device standing for its IPU, with the
numerics of gradient accumulation; replicated when the device has more IPUs than the stages
need.  The order in which stages of different micro-batches overlap is the schedule's
business, which only the simulated trace of the run shows.  The builder and its details are
the runtime's (``ipu_emulator.runtime.pipeline_builder``).
"""
import enum
import logging

import tensorflow as tf
from tensorflow.python.util import nest

from ipu_emulator.runtime import pipeline_builder, programs
from ipu_emulator.sim import schedule_rules
from ipu_emulator.ipu import ipu_infeed_queue, ipu_outfeed_queue
from ipu_emulator.ipu.gradient_accumulation import GradientAccumulationReductionMethod
from . import _pipeline_checks as _checks

_logger = logging.getLogger("ipu_emulator")

_MAX_INT32 = 2 ** 31 - 1


class PipelineSchedule(enum.IntEnum):
    """How the stages of successive micro-batches are overlapped.

    ``Grouped`` (default): in each step all stages run forward passes, then all backward.
    ``Interleaved``: forward and backward passes alternate.  ``Sequential``: one stage at a
    time, like sharding.
    """
    Grouped = 0
    Interleaved = 1
    Sequential = 2


class RecomputationMode(enum.Enum):
    """How activations are recomputed in the backward pass (needs
    ``IPUConfig.allow_recompute = True``)."""
    Auto = 0
    RecomputeThenBackpropagate = 1
    RecomputeAndBackpropagateInterleaved = 2


class PipelineStageOptions:
    """Poplar options for one stage's convolutions, matmuls and slices (kept, not used: the
    CPU has no tile memory to trade)."""

    def __init__(self, convolution_options=None, matmul_options=None, slice_options=None):
        self.convolution_options = dict(convolution_options or {})
        self.matmul_options = dict(matmul_options or {})
        self.slice_options = dict(slice_options or {})

    def get_proto(self):
        return {"convolution_options": self.convolution_options,
                "matmul_options": self.matmul_options, "slice_options": self.slice_options}


class OptimizerFunctionOutput:
    """What ``optimizer_function`` returns: the optimizer and the loss to minimise, plus
    optional extra arguments for ``compute_gradients`` and ``apply_gradients``."""

    def __init__(self, opt, loss, compute_gradients_args=None, compute_gradients_kwargs=None,
                 apply_gradients_args=None, apply_gradients_kwargs=None, variables=None,
                 tape=None, gradient_capture_context=None, captured_gradient_outfeed=None):
        if not (pipeline_builder.is_v1_optimizer(opt)
                or pipeline_builder.is_keras_optimizer(opt)):
            raise TypeError("OptimizerFunctionOutput.opt must be a TensorFlow Optimizer or "
                            "Keras OptimizerV2 object.")
        if not isinstance(loss, tf.Tensor):
            raise TypeError("OptimizerFunctionOutput.loss must be a TensorFlow Tensor object.")
        for value, what, kind in (
                (compute_gradients_args, "compute_gradients_args", tuple),
                (apply_gradients_args, "apply_gradients_args", tuple),
                (compute_gradients_kwargs, "compute_gradients_kwargs", dict),
                (apply_gradients_kwargs, "apply_gradients_kwargs", dict)):
            if value is not None and not isinstance(value, kind):
                raise TypeError("OptimizerFunctionOutput.%s must be a %s." % (
                    what, "tuple" if kind is tuple else "dictionary"))
        if ((variables is not None or tape is not None)
                and not pipeline_builder.is_keras_optimizer(opt)):
            raise ValueError("OptimizerFunctionOutput.variables and OptimizerFunctionOutput.tape "
                             "can only be used with a Keras OptimizerV2.")
        if variables is not None and tape is not None:
            raise ValueError("Only one of OptimizerFunctionOutput.variables and "
                             "OptimizerFunctionOutput.tape can be set.")
        self.opt = opt
        self.loss = loss
        self.compute_gradients_args = compute_gradients_args or ()
        self.compute_gradients_kwargs = compute_gradients_kwargs or {}
        self.apply_gradients_args = apply_gradients_args or ()
        self.apply_gradients_kwargs = apply_gradients_kwargs or {}
        self.variables = variables
        self.tape = tape
        self.gradient_capture_context = gradient_capture_context
        self.captured_gradient_outfeed = captured_gradient_outfeed


def recomputation_checkpoint(tensors, name=None):
    """Mark ``tensors`` as kept for recomputation (an identity here)."""
    with tf.name_scope(name or "recomputation_checkpoint"):
        return nest.map_structure(tf.identity, tensors)


def pipeline(computational_stages, gradient_accumulation_count=None,
             gradient_accumulation_dtype=None, gradient_accumulation_for_captured_grads=True,
             repeat_count=1, batch_serialization_iterations=1, inputs=None, infeed_queue=None,
             outfeed_queue=None, optimizer_function=None, device_mapping=None,
             pipeline_schedule=None, recomputation_mode=None,
             forward_propagation_stages_poplar_options=None,
             backward_propagation_stages_poplar_options=None,
             weight_update_poplar_options=None, offload_weight_update_variables=None,
             replicated_optimizer_state_sharding=False, offload_activations=None,
             offload_gradient_accumulation_buffers=None, replicated_weight_sharding=None,
             offload_weights=None, continuous_weight_updates=False, outfeed_loss=False,
             accumulate_outfeed=False, accumulate_outfeed_dtype=None, outfeed_mask=None,
             reduction_method=GradientAccumulationReductionMethod.SUM, name=None,
             pipeline_depth=None):
    """Build a pipelined computation; returns the ``tf.Operation`` that runs it.

    Accepts every historical signature (``pipeline_depth`` was the name of
    ``gradient_accumulation_count`` in SDK 1.x).  Results leave through ``outfeed_queue``.
    """
    del gradient_accumulation_for_captured_grads, weight_update_poplar_options
    unmodelled = pipeline_builder.unmodelled_memory_options(
        offload_weights=offload_weights, replicated_weight_sharding=replicated_weight_sharding,
        offload_gradient_accumulation_buffers=offload_gradient_accumulation_buffers)
    if gradient_accumulation_count is None:
        gradient_accumulation_count = pipeline_depth
    gac = gradient_accumulation_count
    # 1. the accumulation count
    if gac is None:
        raise ValueError("gradient_accumulation_count must be specified.")
    if not isinstance(gac, (tf.Tensor, tf.Variable)):
        gac = int(gac)
        if gac < 0:
            raise ValueError("gradient_accumulation_count must be >= 0.")
        if gac > _MAX_INT32:
            raise ValueError("gradient_accumulation_count must be < max int32.")
    # 2.-3. reduction method and unsupported modes
    reduction_method = GradientAccumulationReductionMethod.parse(reduction_method)
    if (reduction_method != GradientAccumulationReductionMethod.SUM
            and batch_serialization_iterations != 1):
        raise ValueError("batch_serialization_iterations != 1 is only supported when "
                         "reduction_method is GradientAccumulationReductionMethod.SUM")
    if continuous_weight_updates:
        raise NotImplementedError("Continuous weight updates are currently not supported.")
    # 4. inputs (variables are passed by value)
    inputs = _pipeline_inputs(inputs)
    # 5. schedule and recomputation mode
    if pipeline_schedule is None:
        pipeline_schedule = (PipelineSchedule.Sequential if batch_serialization_iterations > 1
                             else PipelineSchedule.Grouped)
    _checks.check_member(pipeline_schedule, PipelineSchedule, "pipeline_schedule")
    if batch_serialization_iterations > 1 and pipeline_schedule != PipelineSchedule.Sequential:
        raise NotImplementedError(
            "Batch serialization is only supported with the `Sequential` schedule.")
    if recomputation_mode is None:
        recomputation_mode = RecomputationMode.Auto
    _checks.check_member(recomputation_mode, RecomputationMode, "recomputation_mode")
    # 6.-9. stages, feeds and the device mapping
    if not isinstance(computational_stages, (list, tuple)):
        raise TypeError("computational_stages argument needs to be a list or a tuple.")
    if device_mapping is None:
        device_mapping = ([0] * len(computational_stages) if batch_serialization_iterations > 1
                          else list(range(len(computational_stages))))
    if infeed_queue is not None and not isinstance(infeed_queue,
                                                   ipu_infeed_queue.IPUInfeedQueue):
        raise TypeError("infeed_queue is not an instance of ipu_infeed_queue.IPUInfeedQueue")
    if outfeed_queue is not None and not isinstance(outfeed_queue,
                                                    ipu_outfeed_queue.IPUOutfeedQueue):
        raise TypeError("outfeed_queue is not an instance of ipu_outfeed_queue.IPUOutfeedQueue")
    _checks.check_device_mapping(len(computational_stages), device_mapping)
    training = optimizer_function is not None
    all_ipus = [ipu for entry in device_mapping for ipu in pipeline_builder.stage_ipus(entry)]
    # 10.-11. schedule restrictions
    if (pipeline_schedule == PipelineSchedule.Interleaved and training
            and len(set(all_ipus)) != len(all_ipus)):
        raise NotImplementedError(schedule_rules.INTERLEAVED_SHARED_IPU_MESSAGE)
    if (pipeline_schedule == PipelineSchedule.Sequential and batch_serialization_iterations > 1
            and len(set(all_ipus)) > 1):
        raise NotImplementedError("When using batch serialization, all the pipeline stages "
                                  "need to be mapped to a single IPU.")
    # 12. per-stage Poplar options
    for options, what in ((forward_propagation_stages_poplar_options,
                           "forward_propagation_stages_poplar_options"),
                          (backward_propagation_stages_poplar_options,
                           "backward_propagation_stages_poplar_options")):
        _checks.check_stage_options(options, what, len(computational_stages),
                                    PipelineStageOptions)
    # 13.-14. outfeed settings
    if outfeed_mask is not None and not training:
        raise ValueError("An optimizer_function must be provided when outfeed_mask is set.")
    if outfeed_loss and not training:
        raise ValueError("An optimizer_function must be provided when outfeed_loss is True.")
    if outfeed_loss and outfeed_mask is not None:
        raise ValueError("Only one of `outfeed_loss` and `outfeed_mask` can be set.")
    if accumulate_outfeed and outfeed_queue is None:
        raise ValueError("An outfeed_queue must be provided when accumulate_outfeed is True.")
    if accumulate_outfeed and outfeed_queue.outfeed_mode != ipu_outfeed_queue.IPUOutfeedMode.ALL:
        raise ValueError("To accumulate the outfeed, it must be in IPUOutfeedMode ALL.")
    # 15. settings that only matter when training
    if not training and (replicated_optimizer_state_sharding or offload_weight_update_variables):
        _logger.warning("Optimizer state sharding and weight update variable offloading only "
                        "apply to training pipelines; they are ignored for inference.")

    builder = pipeline_builder.PipelineBuilder(
        stages=list(computational_stages), device_mapping=list(device_mapping), gac=gac,
        repeat_count=repeat_count, inputs=inputs, infeed_queue=infeed_queue,
        outfeed_queue=outfeed_queue,
        optimizer_function=(_returning_output(optimizer_function) if training else None),
        accumulation_dtype=gradient_accumulation_dtype, reduction_method=reduction_method,
        outfeed_loss=outfeed_loss, outfeed_mask=outfeed_mask,
        accumulate_outfeed=accumulate_outfeed, accumulate_outfeed_dtype=accumulate_outfeed_dtype,
        schedule=pipeline_schedule)
    replicated = pipeline_builder.replicated_build(infeed_queue, outfeed_queue, max(all_ipus))
    with tf.name_scope(name or "pipeline"), pipeline_builder.single_replica():
        op = builder.build(replicated)
    program = programs.current_program()
    if program is not None:
        programs.register_pipeline(program, builder.registration(
            offload_weights=bool(offload_weight_update_variables),
            offload_activations=bool(offload_activations), unmodelled_options=unmodelled,
            recomputation_mode=recomputation_mode.name))
    return op


def _returning_output(optimizer_function):
    """``optimizer_function``, checked to return an ``OptimizerFunctionOutput`` whenever the
    builder calls it."""
    def checked(*args, **kwargs):
        result = optimizer_function(*args, **kwargs)
        if not isinstance(result, OptimizerFunctionOutput):
            raise TypeError("The optimizer_function must return an OptimizerFunctionOutput "
                            "instance.")
        return result
    return checked


def _pipeline_inputs(inputs):
    if inputs is None:
        return []
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    converted = []
    for value in inputs:
        if isinstance(value, tf.Variable) or getattr(value, "dtype", None) == tf.resource:
            _logger.warning("Passing tensor %s by value.", value)
            value = tf.convert_to_tensor(value.read_value() if isinstance(value, tf.Variable)
                                         else value)
        converted.append(tf.convert_to_tensor(value))
    return converted


__all__ = ["pipeline", "PipelineSchedule", "RecomputationMode", "OptimizerFunctionOutput",
           "PipelineStageOptions", "recomputation_checkpoint",
           "GradientAccumulationReductionMethod"]
