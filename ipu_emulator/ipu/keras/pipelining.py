"""IPU Keras pipelining (SDK 2.2+): stage assignments, pipelining options and their checks.

    with strategy.scope():
        inputs = tf.keras.Input((784,))
        with ipu.keras.PipelineStage(0):
            x = tf.keras.layers.Dense(256, activation="relu")(inputs)
        with ipu.keras.PipelineStage(1):
            outputs = tf.keras.layers.Dense(10)(x)
        model = tf.keras.Model(inputs, outputs)
        model.set_pipelining_options(gradient_accumulation_steps_per_replica=8)
        model.compile(optimizer, loss, steps_per_execution=16)
        model.fit(dataset)

A Sequential model is pipelined with ``set_pipeline_stage_assignment([0, 0, 1, 1])`` (one
stage per layer); a functional model with ``PipelineStage`` contexts around the layer calls
or with assignments of its layer invocations (``get_pipeline_stage_assignment``).

What a pipeline computes is gradient accumulation: every stage sees each of the
``gradient_accumulation_steps_per_replica`` micro-batches once, and the weights are updated
once after all of them (IPU_API.md 6.4).  So the emulator trains a pipelined model through
the extensions' gradient accumulation (same numerics), checks what the SDK checks (the
options, the accumulation count against the schedule (6.5), the IPUs the stages need), and
records each execution with one ``StageCost`` per stage and the pipeline's settings, so the
simulated trace draws the pipeline over the stages' IPUs.  The stages are not placed on
separate CPU devices.
"""
from __future__ import annotations

import inspect
import threading
import weakref
from dataclasses import replace

import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.runtime import configured_system
from ipu_emulator.sim import hardware, schedule_rules, schedules
from ipu_emulator.sim.cost_model import StageCost
from ipu_emulator.ipu.ops import pipelining_ops
from .accumulation import check_accumulation_arguments
from ipu_emulator.runtime import graph_costs, tf2_programs
from ipu_emulator.sim.schedules import PipelineConfigurationError

# --- PipelineStage: stages of layer invocations while a functional model is built -------

_current = threading.local()


class PipelineStage:
    """Layers called inside ``with PipelineStage(k):`` are assigned to pipeline stage ``k``.

    The stage belongs to the invocation (the Keras ``Node`` the call creates), as in the SDK:
    a layer called twice may run in two stages.
    """

    def __init__(self, stage):
        if not isinstance(stage, int) or isinstance(stage, bool) or stage < 0:
            raise ValueError("Pipeline stage must be a non-negative integer, but got {}."
                             .format(stage))
        self._stage = stage

    def __enter__(self):
        _install_node_hook()
        _stack().append(self._stage)  # nested: the innermost stage wins
        return self

    def __exit__(self, *exc):
        _stack().pop()
        return False


def _stack():
    if not hasattr(_current, "stages"):
        _current.stages = []
    return _current.stages


def _install_node_hook():
    """Tag every Keras ``Node`` made inside a ``PipelineStage`` with its stage (once)."""
    from tf_keras.src.engine import node as keras_node
    if getattr(keras_node.Node.__init__, "_ipu_emulator_hook", False):
        return
    original = keras_node.Node.__init__

    def __init__(self, *args, **kwargs):
        original(self, *args, **kwargs)
        stack = _stack()
        if stack:
            self._ipu_pipeline_stage = stack[-1]  # pylint: disable=protected-access

    __init__._ipu_emulator_hook = True  # pylint: disable=protected-access
    keras_node.Node.__init__ = __init__


# --- assignments ---------------------------------------------------------------------------

class SequentialLayerPipelineStageAssignment:
    """A layer of a Sequential model and the pipeline stage it runs in."""

    def __init__(self, layer, pipeline_stage=None):
        self.layer = layer
        self.pipeline_stage = pipeline_stage

    def __repr__(self):
        return "SequentialLayerPipelineStageAssignment(layer={}, pipeline_stage={})".format(
            self.layer.name, self.pipeline_stage)


class FunctionalLayerPipelineStageAssignment:
    """One invocation (``node_index``) of a layer of a functional model and its stage."""

    def __init__(self, layer, node_index, pipeline_stage=None):
        self.layer = layer
        self.node_index = node_index
        self.pipeline_stage = pipeline_stage

    @property
    def inbound_layers(self):
        return self.layer.inbound_nodes[self.node_index].inbound_layers

    def __repr__(self):
        return ("FunctionalLayerPipelineStageAssignment(layer={}, node_index={}, "
                "pipeline_stage={})".format(self.layer.name, self.node_index,
                                            self.pipeline_stage))


def _is_sequential(model):
    return isinstance(model, tf.keras.Sequential)


def _model_nodes(model):
    """The model's layer invocations in execution order (input layers left out)."""
    nodes_by_depth = getattr(model, "_nodes_by_depth", None) or {}
    ordered = []
    for depth in sorted(nodes_by_depth, reverse=True):
        for node in nodes_by_depth[depth]:
            if not isinstance(node.layer, tf.keras.layers.InputLayer):
                ordered.append(node)
    return ordered


def _check_stage(value, where):
    if value is None or not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError("The pipeline stage of {} must be a non-negative integer, but it is "
                         "{}.".format(where, value))


class PipeliningExtensions:
    """Pipelining methods of a Keras model built in an ``IPUStrategy`` scope (mixed into
    ``extensions.KerasExtensions``)."""

    # -- stage assignment ----------------------------------------------------------------

    def get_pipeline_stage_assignment(self):
        """The stage of every layer (Sequential) or layer invocation (functional)."""
        if _is_sequential(self):
            stages = self.__dict__.get("_ipu_sequential_stages") or [None] * len(self.layers)
            return [SequentialLayerPipelineStageAssignment(layer, stage)
                    for layer, stage in zip(self.layers, stages)]
        return [FunctionalLayerPipelineStageAssignment(
                    node.layer, node.layer.inbound_nodes.index(node),
                    getattr(node, "_ipu_pipeline_stage", None))
                for node in _model_nodes(self)]

    def set_pipeline_stage_assignment(self, pipeline_stage_assignment):
        """Assign stages: for a Sequential model a list of ints (or of
        ``SequentialLayerPipelineStageAssignment``), one per layer; for a functional model the
        list ``get_pipeline_stage_assignment`` returns, with ``pipeline_stage`` set."""
        if not isinstance(pipeline_stage_assignment, (list, tuple)):
            raise ValueError("`pipeline_stage_assignment` needs to be a list.")
        if _is_sequential(self):
            self.__dict__["_ipu_sequential_stages"] = self._ipu_sequential_assignment(
                list(pipeline_stage_assignment))
        else:
            self._ipu_set_functional_assignment(list(pipeline_stage_assignment))
        self.__dict__["_ipu_pipeline_stages_cache"] = None

    def _ipu_sequential_assignment(self, assignment):
        if len(assignment) != len(self.layers):
            raise ValueError(
                "The size of the provided `pipeline_stage_assignment` ({}) does not match the "
                "number of layers in the model (currently {}). Each layer in a Sequential model "
                "needs to be assigned to a pipeline stage.".format(len(assignment),
                                                                   len(self.layers)))
        stages = []
        for index, item in enumerate(assignment):
            if isinstance(item, SequentialLayerPipelineStageAssignment):
                item = item.pipeline_stage
            elif not isinstance(item, int) or isinstance(item, bool):
                raise ValueError(
                    "All elements of `pipeline_stage_assignment` need to be instances of either "
                    "`int` or `SequentialLayerPipelineStageAssignment`.")
            _check_stage(item, "layer {} ({})".format(index, self.layers[index].name))
            if stages and item < stages[-1]:
                raise ValueError(
                    "Layer {} in pipeline stage {} has a dependency from a pipeline stage {} "
                    "which is after the current stage.".format(
                        self.layers[index].name, item, stages[-1]))
            stages.append(item)
        return stages

    def _ipu_set_functional_assignment(self, assignment):
        nodes = _model_nodes(self)
        if len(assignment) != len(nodes):
            raise ValueError(
                "The size of the provided `pipeline_stage_assignment` ({}) does not match the "
                "total number of invocations of layers in the model (currently {})."
                .format(len(assignment), len(nodes)))
        by_node = {}
        for item in assignment:
            if not isinstance(item, FunctionalLayerPipelineStageAssignment):
                raise ValueError("All elements of `pipeline_stage_assignment` need to be "
                                 "instances of `FunctionalLayerPipelineStageAssignment`.")
            inbound = getattr(item.layer, "inbound_nodes", [])
            if not isinstance(item.node_index, int) or not 0 <= item.node_index < len(inbound):
                raise ValueError("Layer {} has no invocation {}.".format(
                    getattr(item.layer, "name", item.layer), item.node_index))
            _check_stage(item.pipeline_stage, "layer {} (invocation {})".format(
                item.layer.name, item.node_index))
            by_node[id(inbound[item.node_index])] = item.pipeline_stage
        missing = [node for node in nodes if id(node) not in by_node]
        if missing:
            raise ValueError("Layer {} (invocation {}) has not been assigned a pipeline stage."
                             .format(missing[0].layer.name,
                                     missing[0].layer.inbound_nodes.index(missing[0])))
        _check_dependencies(nodes, lambda node: by_node[id(node)])
        for node in nodes:
            node._ipu_pipeline_stage = by_node[id(node)]  # pylint: disable=protected-access

    def reset_pipeline_stage_assignment(self):
        """Forget every stage assignment: the model is no longer pipelined."""
        self.__dict__["_ipu_sequential_stages"] = None
        if not _is_sequential(self):
            for node in _model_nodes(self):
                node.__dict__.pop("_ipu_pipeline_stage", None)
        self.__dict__["_ipu_pipeline_stages_cache"] = None

    def print_pipeline_stage_assignment_summary(self, line_length=None, print_fn=None):
        """A table of the layers (invocations) and their pipeline stages."""
        print_fn = print_fn or print
        if _is_sequential(self):
            rows = [(a.layer.name, type(a.layer).__name__, a.pipeline_stage)
                    for a in self.get_pipeline_stage_assignment()]
            header = ("Layer (type)", "Pipeline Stage")
            lines = [("{} ({})".format(name, kind), str(stage)) for name, kind, stage in rows]
        else:
            header = ("Layer (type) (node index)", "Input Layers", "Pipeline Stage")
            lines = [("{} ({}) ({})".format(a.layer.name, type(a.layer).__name__, a.node_index),
                      ", ".join(layer.name for layer in _as_list(a.inbound_layers)),
                      str(a.pipeline_stage)) for a in self.get_pipeline_stage_assignment()]
        widths = [max(len(row[i]) for row in [header] + lines) + 2 for i in range(len(header))]
        total = line_length or sum(widths)
        print_fn("Model: \"{}\"".format(self.name))
        print_fn("_" * total)
        print_fn("".join(text.ljust(width) for text, width in zip(header, widths)))
        print_fn("=" * total)
        for line in lines:
            print_fn("".join(text.ljust(width) for text, width in zip(line, widths)))
        print_fn("=" * total)

    # -- options -------------------------------------------------------------------------

    def set_pipelining_options(self, gradient_accumulation_steps_per_replica=None,
                               device_mapping=None, accumulate_outfeed=None,
                               experimental_normalize_gradients=None,
                               gradient_accumulation_reduction_method="sum",
                               **pipelining_kwargs):
        """How the pipelined model runs (``pipelining_kwargs`` go to ``pipeline``)."""
        method = check_accumulation_arguments(gradient_accumulation_steps_per_replica,
                                              experimental_normalize_gradients,
                                              gradient_accumulation_reduction_method)
        for key, alternative in (("gradient_accumulation_count",
                                  "gradient_accumulation_steps_per_replica"),
                                 ("device_mapping", "device_mapping"),
                                 ("accumulate_outfeed", "accumulate_outfeed")):
            if key in pipelining_kwargs:
                raise ValueError("Found `{}` key in `pipelining_kwargs`. Set the `{}` argument "
                                 "to `set_pipelining_options` instead.".format(key, alternative))
        for keys, reason in ((("computational_stages", "repeat_count", "inputs", "infeed_queue",
                               "outfeed_queue", "optimizer_function"),
                              "This argument is automatically set by Keras."),
                             (("outfeed_loss", "outfeed_mask", "batch_serialization_iterations"),
                              "This argument is not compatible with Keras.")):
            for key in keys:
                if key in pipelining_kwargs:
                    raise ValueError("Found `{}` key in `pipelining_kwargs`. {}".format(
                        key, reason))
        if device_mapping is not None and (
                not isinstance(device_mapping, (list, tuple))
                or not all(isinstance(i, int) and not isinstance(i, bool)
                           for i in device_mapping)):
            raise ValueError("Expected `device_mapping` to be a list of integers.")
        self.__dict__["_ipu_pipelining_settings"] = {
            "gradient_accumulation_steps_per_replica": gradient_accumulation_steps_per_replica,
            "device_mapping": None if device_mapping is None else list(device_mapping),
            "accumulate_outfeed": accumulate_outfeed,
            "mean": (method != "sum" or bool(experimental_normalize_gradients)),
            "pipelining_kwargs": dict(pipelining_kwargs)}

    def _ipu_pipelining_options(self):
        return self.__dict__.get("_ipu_pipelining_settings") or {
            "gradient_accumulation_steps_per_replica": None, "device_mapping": None,
            "accumulate_outfeed": None, "mean": False, "pipelining_kwargs": {}}

    # -- which layer runs in which stage -------------------------------------------------

    def _ipu_layer_stages(self):
        """{layer name: stage} of a pipelined model, None if the model is not pipelined."""
        if _is_sequential(self):
            stages = self.__dict__.get("_ipu_sequential_stages")
            if not stages:
                return None
            return {layer.name: stage for layer, stage in zip(self.layers, stages)}
        nodes = _model_nodes(self)
        assigned = [node for node in nodes if hasattr(node, "_ipu_pipeline_stage")]
        if not assigned:
            return None
        missing = [node for node in nodes if not hasattr(node, "_ipu_pipeline_stage")]
        if missing:
            raise ValueError(
                "All layers of a pipelined model must have an associated pipeline stage. "
                "However, layer {} (invocation {}) has not been assigned to one."
                .format(missing[0].layer.name, missing[0].layer.inbound_nodes.index(missing[0])))
        _check_dependencies(nodes, lambda node: node._ipu_pipeline_stage)  # pylint: disable=protected-access
        stages = {}
        for node in nodes:  # a layer invoked in several stages is costed in its first
            stages.setdefault(node.layer.name, node._ipu_pipeline_stage)  # pylint: disable=protected-access
        return stages


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _check_dependencies(nodes, stage_of):
    """A layer invocation cannot use the output of a later stage."""
    known = {id(node) for node in nodes}
    for node in nodes:
        for parent in node.parent_nodes:
            if id(parent) in known and stage_of(parent) > stage_of(node):
                raise ValueError(
                    "Layer {} in pipeline stage {} has a dependency from a pipeline stage {} "
                    "which is after the current stage.".format(
                        node.layer.name, stage_of(node), stage_of(parent)))


# --- the pipeline a fit / evaluate / predict call runs ------------------------------------

class PipelinePlan:
    """The pipeline one call runs: its settings, and which stage each layer is in."""

    def __init__(self, settings, layer_stages, accumulation, mean, num_shards):
        self.settings = settings  # record.PipelineSettings
        self.layer_stages = layer_stages
        self.accumulation = accumulation  # micro-batches per weight update (training)
        self.mean = mean
        self.num_shards = num_shards


def plan(model, steps_per_execution, training):
    """The pipeline ``model`` runs for one execution, or None if it is not pipelined.

    Raises the SDK's errors for a pipeline it would refuse to run."""
    layer_stages = model._ipu_layer_stages()  # pylint: disable=protected-access
    if layer_stages is None:
        return None
    options = model._ipu_pipelining_options()  # pylint: disable=protected-access
    accumulation = options["gradient_accumulation_steps_per_replica"]
    if training and accumulation is None:
        raise ValueError(
            "The model which you are attempting to train is pipelined, however "
            "`gradient_accumulation_steps_per_replica` has not been set through "
            "`set_pipelining_options()`. You need to set this value as pipelined models will "
            "perform gradient accumulation when training.")
    if training and steps_per_execution % accumulation:
        raise RuntimeError(
            "The pipelined model has been configured to use gradient accumulation for "
            "training, however the current `steps_per_execution` value (set to {}) is not "
            "divisible by `gradient_accumulation_steps_per_replica` ({}). You need to adjust "
            "either `steps_per_execution` or`gradient_accumulation_steps_per_replica` to make "
            "sure that `steps_per_execution` is divisible by "
            "`gradient_accumulation_steps_per_replica`.".format(steps_per_execution,
                                                                accumulation))
    num_stages = max(layer_stages.values()) + 1
    kwargs = options["pipelining_kwargs"]
    schedule = _schedule(kwargs)
    mapping = options["device_mapping"]
    mapping = list(range(num_stages)) if mapping is None else list(mapping)
    # What ``pipelining_ops.pipeline`` checks when Keras builds the pipeline (6.3).
    pipelining_ops._check_device_mapping(num_stages, mapping)  # pylint: disable=protected-access
    if any(ipu < 0 for ipu in mapping):
        raise ValueError("Expected `device_mapping` to be a list of integers.")
    for what in ("forward_propagation_stages_poplar_options",
                 "backward_propagation_stages_poplar_options"):
        pipelining_ops._check_stage_options(kwargs.get(what), what, num_stages)  # pylint: disable=protected-access
    if schedule == "interleaved" and training and len(set(mapping)) != len(mapping):
        raise NotImplementedError(schedule_rules.INTERLEAVED_SHARED_IPU_MESSAGE)
    # The stages' IPUs are shards: rounded up to a power of two, a divisor of the device.
    num_shards = hardware.next_power_of_two(max(mapping) + 1)
    num_ipus = configured_system.device(0).num_ipus
    if num_ipus % num_shards:
        raise ValueError("Current device has {} IPUs attached, however the current model "
                         "requires a multiple of {} IPUs.".format(num_ipus, num_shards))
    # The backend's count rule (6.5), on the micro-batches of one pass of the pipeline:
    # the accumulation steps when training, all the execution's steps in inference.
    count = accumulation if training else steps_per_execution
    try:
        schedules.check_gradient_accumulation_count(schedule, num_stages, count, training,
                                                    mapping)
    except PipelineConfigurationError as error:
        raise getattr(tf.errors, error.sdk_error)(None, None, error.message) from None
    settings = record.PipelineSettings(
        schedule=schedule, gradient_accumulation_count=count,
        repeat_count=steps_per_execution // count, device_mapping=tuple(mapping),
        training=training,
        recompute=training and configured_system.current().allow_recompute,
        offload_weights=training and bool(kwargs.get("offload_weight_update_variables")
                                          or kwargs.get("offload_weights")),
        offload_activations=training and bool(kwargs.get("offload_activations")))
    return PipelinePlan(settings, layer_stages, accumulation, options["mean"], num_shards)


def _schedule(kwargs):
    """The schedule's name (``schedules.SCHEDULE_NAMES``) from ``pipeline_schedule``, after
    the checks ``pipeline`` makes of its keyword arguments."""
    inspect.signature(pipelining_ops.pipeline).bind_partial(**kwargs)  # unknown keys: TypeError
    schedule = kwargs.get("pipeline_schedule")
    if schedule is None:
        schedule = pipelining_ops.PipelineSchedule.Grouped
    check_member = pipelining_ops._check_member  # pylint: disable=protected-access
    check_member(schedule, pipelining_ops.PipelineSchedule, "pipeline_schedule")
    mode = kwargs.get("recomputation_mode")
    if mode is not None:
        check_member(mode, pipelining_ops.RecomputationMode, "recomputation_mode")
    return schedule.name.lower()


# --- what an execution of a pipelined model records ---------------------------------------

_stage_costs: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def completer(model, function, args, pipeline_plan, batch_bytes):
    """``complete(run)`` for ``tf2_programs.execute``: the run with the pipeline's settings
    and the cost of each stage, measured from the graph of Keras's compiled function."""
    per_function = _stage_costs.setdefault(function, {})
    # The same function traced for another batch size costs differently: the key has it.
    key = (pipeline_plan.settings.training, tuple(sorted(pipeline_plan.layer_stages.items())),
           batch_bytes)

    def complete(run):
        stages = per_function.get(key)
        if stages is None:
            stages = per_function[key] = _measure_stages(model, function, args, pipeline_plan,
                                                         batch_bytes)
        return replace(run, stages=stages, pipeline=pipeline_plan.settings,
                       num_ipus=pipeline_plan.num_shards,
                       gradient_accumulation_count=pipeline_plan.settings.gradient_accumulation_count)

    return complete


def _measure_stages(model, function, args, pipeline_plan, batch_bytes):
    """One ``StageCost`` per stage.  Ops under a layer's name scope (``model/layer/...``,
    forward or its gradient) belong to that layer's stage; the loss and metrics to the last
    stage (where the SDK computes them); the weight update is shared by the stages in
    proportion to the weights they hold (an optimizer's ops do not name the layer).  In
    training the model accumulates gradients (see ``extensions``): the update is the branch
    taken once per accumulation."""
    layer_stages = pipeline_plan.layer_stages
    num_stages = len(pipeline_plan.settings.device_mapping)
    concrete = function.get_concrete_function(*args)
    body = tf2_programs._loop_body_graph(concrete.graph)  # pylint: disable=protected-access
    ops, in_branch = _ops_with_branches(body if body is not None else concrete.graph)
    stage_of_op = _stages_of_ops(ops, model.name, layer_stages, num_stages)
    accumulating = pipeline_plan.settings.training
    flops = [{"forward": 0.0, "backward": 0.0} for _ in range(num_stages)]
    traffic = [{"forward": 0.0, "backward": 0.0} for _ in range(num_stages)]
    activations = [0] * num_stages
    crossing = [0] * num_stages
    update_flops = 0.0
    # Fixed cycles of the ops (graph_costs.op_kind); the update's are shared like its FLOPs.
    cycles = [{"forward": 0.0, "backward": 0.0} for _ in range(num_stages)]
    update_cycles = 0.0
    for op in ops:
        work = graph_costs.op_flops(op)
        what = graph_costs.op_kind(op)
        if work <= 0 and what != "variable":
            continue
        op_cycles = hardware.OP_CYCLES[what]
        phase = tf2_programs.phase_of(op)
        if accumulating:
            # The update runs in the branch taken once per accumulation (scaling the sums
            # included); adding a micro-batch's gradients to the sums is part of each
            # backward pass.
            if op in in_branch:
                phase = "weight_update"
            elif phase == "weight_update":
                phase = "backward"
        if phase == "weight_update":  # its bytes: the simulator counts them from the weights
            update_flops += work
            update_cycles += op_cycles
            continue
        stage = stage_of_op[op.name]
        cycles[stage][phase] += op_cycles
        if work <= 0:
            continue
        flops[stage][phase] += work
        traffic[stage][phase] += sum(graph_costs.tensor_bytes(t)
                                     for t in list(op.inputs) + list(op.outputs))
        if phase == "forward":
            activations[stage] += sum(graph_costs.tensor_bytes(t) for t in op.outputs)
            for tensor in op.outputs:  # sent on to a later stage's forward pass
                if any(stage_of_op.get(c.name, stage) > stage
                       and tf2_programs.phase_of(c) == "forward" for c in tensor.consumers()):
                    crossing[stage] += graph_costs.tensor_bytes(tensor)
    weights = _stage_weight_bytes(model, layer_stages, num_stages)
    total_weights = sum(weights) or 1
    state = _optimizer_state_bytes(model) if pipeline_plan.settings.training else 0
    stages = []
    for k in range(num_stages):
        share = weights[k] / total_weights
        stages.append(StageCost(
            name="stage%d" % k,
            layers=tuple(name for name, stage in layer_stages.items() if stage == k),
            forward_flops=flops[k]["forward"], backward_flops=flops[k]["backward"],
            weight_update_flops=update_flops * share,
            forward_bytes_accessed=traffic[k]["forward"],
            backward_bytes_accessed=traffic[k]["backward"],
            parameter_bytes=weights[k], optimizer_state_bytes=int(state * share),
            activation_bytes=activations[k],
            input_bytes=int(batch_bytes) if k == 0 else crossing[k - 1],
            output_bytes=crossing[k],
            op_cycles=(cycles[k]["forward"], cycles[k]["backward"], update_cycles * share)))
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
            try:
                called = graph._get_function(op.get_attr(attr).name)  # pylint: disable=protected-access
            except (ValueError, AttributeError):
                continue
            if getattr(called, "graph", None) is not None:
                nested, nested_branch = _ops_with_branches(called.graph, depth + 1,
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


__all__ = ["PipelineStage", "SequentialLayerPipelineStageAssignment",
           "FunctionalLayerPipelineStageAssignment", "PipeliningExtensions", "plan",
           "completer"]
