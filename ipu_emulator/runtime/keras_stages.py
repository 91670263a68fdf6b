"""IPU Keras pipelines on the runtime: which stage each layer runs in, the pipeline one
execution runs, and what each stage costs.

* ``entering_stage`` / ``leaving_stage`` (``ipu.keras.PipelineStage``): every Keras ``Node``
  made meanwhile carries its stage, read back with ``node_stage``;
* ``plan``: the pipeline of one ``fit``/``evaluate``/``predict`` execution (settings for the
  record), once the API front has checked the model's options with the SDK's messages; it
  applies the device and schedule rules (the stages' IPUs, the accumulation count);
* ``run_fields``: what an execution's engine run records: one ``StageCost`` per stage,
  measured once from the graph of Keras's compiled function.

What a pipeline computes is gradient accumulation: every stage sees each of the
``gradient_accumulation_steps_per_replica`` micro-batches once, and the weights are updated
once after all of them (Graphcore's IPU Keras documentation on pipelining).  So the
emulator trains a pipelined model through the extensions' gradient accumulation (same
numerics) and records each execution with its stages and the pipeline's settings, so the
simulated trace draws the pipeline over the stages' IPUs.  The stages are not placed on
separate CPU devices.
"""
from __future__ import annotations

import threading
import weakref

import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.sim import hardware, schedule_rules
from ipu_emulator.sim.cost_model import StageCost
from ipu_emulator.sim.schedule_rules import PipelineConfigurationError
from . import configured_system, graph_costs, pipeline_builder, tf2_programs

# --- the stage of each layer invocation --------------------------------------------------

_current = threading.local()
# The attribute of a Keras ``Node`` (one invocation of a layer) holding its stage.
_STAGE_ATTRIBUTE = "_ipu_pipeline_stage"
_tagging_init = None  # ``Node.__init__`` once wrapped by ``_tag_new_nodes``


def entering_stage(stage):
    """Layers called from now on (until ``leaving_stage``) run in pipeline stage ``stage``;
    nested stages: the innermost wins."""
    _tag_new_nodes()
    _stack().append(stage)


def leaving_stage():
    _stack().pop()


def node_stage(node):
    """The stage of a layer invocation, or None when it has none."""
    return vars(node).get(_STAGE_ATTRIBUTE)


def set_node_stage(node, stage):
    vars(node)[_STAGE_ATTRIBUTE] = stage


def clear_node_stage(node):
    vars(node).pop(_STAGE_ATTRIBUTE, None)


def _stack():
    if not hasattr(_current, "stages"):
        _current.stages = []
    return _current.stages


def _tag_new_nodes():
    """Tag every Keras ``Node`` made inside a stage with the stage (installed once)."""
    global _tagging_init
    from tf_keras.src.engine import node as keras_node
    if keras_node.Node.__init__ is _tagging_init:
        return
    original = keras_node.Node.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        stack = _stack()
        if stack:
            set_node_stage(self, stack[-1])

    keras_node.Node.__init__ = _tagging_init = __init__


# --- the pipeline a fit / evaluate / predict call runs ------------------------------------

class PipelinePlan:
    """The pipeline one call runs: its settings, and which stage each layer is in."""

    def __init__(self, settings, layer_stages, accumulation, mean, num_shards):
        self.settings = settings  # record.PipelineSettings
        self.layer_stages = layer_stages
        self.accumulation = accumulation  # micro-batches per weight update (training)
        self.mean = mean
        self.num_shards = num_shards


def plan(layer_stages, schedule, device_mapping, accumulation, mean, pipelining_kwargs,
         steps_per_execution, training):
    """The pipeline a model runs for one execution: ``layer_stages`` ({layer name: stage}),
    the ``schedule``'s name, the ``device_mapping`` and the ``pipelining_kwargs`` of
    ``set_pipelining_options``, after the API front's checks of them
    (``ipu.keras.pipelining``).  Raises the SDK's errors for a pipeline the
    device or the schedule's rules refuse."""
    num_stages = max(layer_stages.values()) + 1
    mapping = list(device_mapping)
    if schedule == "interleaved" and training and len(set(mapping)) != len(mapping):
        raise NotImplementedError(schedule_rules.INTERLEAVED_SHARED_IPU_MESSAGE)
    # The stages' IPUs are shards: rounded up to a power of two, a divisor of the device.
    num_shards = hardware.next_power_of_two(max(mapping) + 1)
    num_ipus = configured_system.device(0).num_ipus
    if num_ipus % num_shards:
        raise ValueError("Current device has {} IPUs attached, however the current model "
                         "requires a multiple of {} IPUs.".format(num_ipus, num_shards))
    # The backend's count rule, on the micro-batches of one pass of the pipeline: the
    # accumulation steps when training, all the execution's steps in inference.
    count = accumulation if training else steps_per_execution
    try:
        schedule_rules.check_gradient_accumulation_count(schedule, num_stages, count, training,
                                                    mapping)
    except PipelineConfigurationError as error:
        raise getattr(tf.errors, error.sdk_error)(None, None, error.message) from None
    settings = record.PipelineSettings(
        schedule=schedule, gradient_accumulation_count=count,
        repeat_count=steps_per_execution // count, device_mapping=tuple(mapping),
        training=training,
        recompute=training and configured_system.current().allow_recompute,
        offload_weights=training and bool(
            pipelining_kwargs.get("offload_weight_update_variables")),
        offload_activations=training and bool(pipelining_kwargs.get("offload_activations")),
        unmodelled_options=pipeline_builder.unmodelled_memory_options(
            **{name: pipelining_kwargs.get(name)
               for name in pipeline_builder.UNMODELLED_MEMORY_OPTIONS}))
    return PipelinePlan(settings, layer_stages, accumulation, mean, num_shards)


def replication_factor(device_mapping=None):
    """How many replicas of a model the configured device holds: its IPUs over the model's
    shards (the pipeline's IPUs rounded up to a power of two; 1 for a model that is not
    pipelined), as the SDK's IPU Keras computes it.  A device the shards do not divide is
    left to ``plan``'s error: 1 here."""
    num_shards = 1 if not device_mapping else hardware.next_power_of_two(max(device_mapping) + 1)
    num_ipus = configured_system.device(0).num_ipus
    return num_ipus // num_shards if num_ipus % num_shards == 0 else 1


# --- what an execution of a pipelined model records ---------------------------------------

_stage_costs: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def run_fields(model, function, args, pipeline_plan, batch_bytes):
    """``fields()`` for ``tf2_programs.execute``: an engine run's pipeline settings and the
    cost of each stage, measured once from the graph of Keras's compiled function."""
    per_function = _stage_costs.setdefault(function, {})
    # The same function traced for another batch size costs differently: the key has it.
    key = (pipeline_plan.settings.training, tuple(sorted(pipeline_plan.layer_stages.items())),
           batch_bytes)

    def fields():
        stages = per_function.get(key)
        if stages is None:
            stages = per_function[key] = _measure_stages(model, function, args, pipeline_plan,
                                                         batch_bytes)
        settings = pipeline_plan.settings
        return dict(stages=stages, pipeline=settings, num_ipus=pipeline_plan.num_shards,
                    gradient_accumulation_count=settings.gradient_accumulation_count)

    return fields


def _measure_stages(model, function, args, pipeline_plan, batch_bytes):
    """One ``StageCost`` per stage.  Ops under a layer's name scope (``model/layer/...``,
    forward or its gradient) belong to that layer's stage; the loss and metrics to the last
    stage (where the SDK computes them); the weight update is shared by the stages in
    proportion to the weights they hold (an optimizer's ops do not name the layer).  In
    training the model accumulates gradients (see ``ipu.keras.extensions``): the update is the
    branch taken once per accumulation."""
    layer_stages = pipeline_plan.layer_stages
    num_stages = len(pipeline_plan.settings.device_mapping)
    concrete = function.get_concrete_function(*args)
    body = tf2_programs.loop_body_graph(concrete.graph)
    ops, in_branch = _ops_with_branches(body if body is not None else concrete.graph)
    stage_of_op = _stages_of_ops(ops, model.name, layer_stages, num_stages)
    accumulating = pipeline_plan.settings.training

    def phase(op):
        found = tf2_programs.phase_of(op)
        if accumulating:
            # The update runs in the branch taken once per accumulation (scaling the sums
            # included); adding a micro-batch's gradients to the sums is part of each
            # backward pass.
            if op in in_branch:
                return "weight_update"
            if found == "weight_update":
                return "backward"
        return found

    # The weight update is one unit (-1), shared out below: an optimizer's ops do not name
    # the layer whose weights they update.
    units = graph_costs.walk(
        ops, unit_of=lambda op: -1 if phase(op) == "weight_update" else stage_of_op[op.name],
        phase_of_op=phase)
    empty = graph_costs.UnitWork()
    update = units.get(-1, empty)
    weights = _stage_weight_bytes(model, layer_stages, num_stages)
    total_weights = sum(weights) or 1
    state = _optimizer_state_bytes(model) if pipeline_plan.settings.training else 0
    crossing = [sum(nbytes for (when, source), (nbytes, _) in units.get(k + 1, empty).reads.items()
                    if when == "forward" and source == k) for k in range(num_stages)]
    stages = []
    for k in range(num_stages):
        work, share = units.get(k, empty), weights[k] / total_weights
        stages.append(StageCost(
            name="stage%d" % k,
            layers=tuple(name for name, stage in layer_stages.items() if stage == k),
            forward_flops=work.flops[0], backward_flops=work.flops[1],
            weight_update_flops=update.flops[2] * share,
            forward_bytes_accessed=work.traffic[0], backward_bytes_accessed=work.traffic[1],
            parameter_bytes=weights[k], optimizer_state_bytes=int(state * share),
            activation_bytes=work.kept_bytes,
            input_bytes=int(batch_bytes) if k == 0 else crossing[k - 1],
            output_bytes=crossing[k],
            op_cycles=(work.cycles[0], work.cycles[1], update.cycles[2] * share),
            half_flops=(work.half_flops[0], work.half_flops[1], update.half_flops[2] * share)))
    return tuple(stages)


def _stages_of_ops(ops, model_name, layer_stages, num_stages):
    """{op name: stage}.  An op under a layer's scope is in the layer's stage.  Another op
    that is not forward (adding a layer's gradient to its accumulator) goes with the first
    of its inputs that is in a stage; the rest (loss, metrics) run in the last stage."""
    scoped = {}
    for op in ops:
        parts = op.name.split("/")
        for i, part in enumerate(parts[:-1]):
            if part == model_name and parts[i + 1] in layer_stages:
                scoped[op.name] = layer_stages[parts[i + 1]]
                break
    stages = dict(scoped)
    for op in ops:
        if op.name in stages:
            continue
        stage = num_stages - 1
        if tf2_programs.phase_of(op) != "forward":
            found = [scoped[t.op.name] for t in op.inputs if t.op.name in scoped]
            stage = found[0] if found else stage
        stages[op.name] = stage
    return stages


def _ops_with_branches(graph, depth=0, branch=False):
    """The graph's ops and those of the functions it calls, ``tf.cond`` branches included
    (the accumulated weight update runs in one), and the set of the ops in branches."""
    ops = list(graph.get_operations())
    in_branch = set(ops) if branch else set()
    if depth > 4:
        return ops, in_branch
    for op in list(ops):
        for attr in ("f", "then_branch", "else_branch"):
            called = tf2_programs.called_graph(graph, op, attr)
            if called is not None:
                nested, nested_branch = _ops_with_branches(called, depth + 1,
                                                           branch or attr != "f")
                ops += nested
                in_branch |= nested_branch
    return ops, in_branch


def _stage_weight_bytes(model, layer_stages, num_stages):
    weights = [0] * num_stages
    for layer in model.layers:
        stage = layer_stages.get(layer.name)
        if stage is not None:
            weights[stage] += graph_costs.variables_bytes(layer.weights)
    return weights


def _optimizer_state_bytes(model):
    """The optimizer's slots (momentum, Adam's moments), whatever optimizer API it has."""
    optimizer = getattr(model, "optimizer", None)
    variables = getattr(optimizer, "variables", ())
    if callable(variables):
        variables = variables()
    return graph_costs.variables_bytes(v for v in variables if v.shape.rank)  # scalars: counters


__all__ = ["entering_stage", "leaving_stage", "node_stage", "set_node_stage",
           "clear_node_stage", "PipelinePlan", "plan", "run_fields"]
