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

What a pipeline computes is gradient accumulation: the emulator trains a pipelined model
through the extensions' gradient accumulation (same numerics), checks what the SDK checks
(the options here; the accumulation count against the schedule and the IPUs the stages
need in the runtime), and records each execution with one ``StageCost`` per stage and the
pipeline's settings, so the simulated trace draws the pipeline over the stages' IPUs
(``ipu_emulator.runtime.keras_stages``).
"""
from __future__ import annotations

import inspect

import tensorflow as tf

from ipu_emulator.runtime import keras_stages
from ipu_emulator.ipu.ops import _pipeline_checks, pipelining_ops
from .accumulation import check_accumulation_arguments

# --- PipelineStage: stages of layer invocations while a functional model is built -------


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
        keras_stages.entering_stage(self._stage)  # nested: the innermost stage wins
        return self

    def __exit__(self, *exc):
        keras_stages.leaving_stage()
        return False


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
                    keras_stages.node_stage(node))
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
            keras_stages.set_node_stage(node, by_node[id(node)])

    def reset_pipeline_stage_assignment(self):
        """Forget every stage assignment: the model is no longer pipelined."""
        self.__dict__["_ipu_sequential_stages"] = None
        if not _is_sequential(self):
            for node in _model_nodes(self):
                keras_stages.clear_node_stage(node)
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
        assigned = [node for node in nodes if keras_stages.node_stage(node) is not None]
        if not assigned:
            return None
        missing = [node for node in nodes if keras_stages.node_stage(node) is None]
        if missing:
            raise ValueError(
                "All layers of a pipelined model must have an associated pipeline stage. "
                "However, layer {} (invocation {}) has not been assigned to one."
                .format(missing[0].layer.name, missing[0].layer.inbound_nodes.index(missing[0])))
        _check_dependencies(nodes, keras_stages.node_stage)
        stages = {}
        for node in nodes:  # a layer invoked in several stages is costed in its first
            stages.setdefault(node.layer.name, keras_stages.node_stage(node))
        return stages

    # -- the pipeline one execution runs -------------------------------------------------

    def _ipu_replication_factor(self):
        """Replicas of this model on the configured device (IPUs over the model's shards)."""
        layer_stages = self._ipu_layer_stages()
        if layer_stages is None:
            return keras_stages.replication_factor()
        mapping = self._ipu_pipelining_options()["device_mapping"]
        if mapping is None:
            mapping = list(range(max(layer_stages.values()) + 1))
        return keras_stages.replication_factor(list(mapping))

    def _ipu_pipeline_plan(self, steps_per_execution, training):
        """The pipeline this model runs for one execution (a ``keras_stages.PipelinePlan``),
        or None if it is not pipelined.  Raises the SDK's errors for a pipeline it would
        refuse to run: the options' here, the device's and the schedule's in the runtime."""
        layer_stages = self._ipu_layer_stages()
        if layer_stages is None:
            return None
        options = self._ipu_pipelining_options()
        accumulation = options["gradient_accumulation_steps_per_replica"]
        if training and accumulation is None:
            raise ValueError(
                "The model which you are attempting to train is pipelined, however "
                "`gradient_accumulation_steps_per_replica` has not been set through "
                "`set_pipelining_options()`. You need to set this value as pipelined models "
                "will perform gradient accumulation when training.")
        if training and steps_per_execution % accumulation:
            raise RuntimeError(
                "The pipelined model has been configured to use gradient accumulation for "
                "training, however the current `steps_per_execution` value (set to {}) is not "
                "divisible by `gradient_accumulation_steps_per_replica` ({}). You need to "
                "adjust either `steps_per_execution` or`gradient_accumulation_steps_per_replica` "
                "to make sure that `steps_per_execution` is divisible by "
                "`gradient_accumulation_steps_per_replica`.".format(steps_per_execution,
                                                                    accumulation))
        num_stages = max(layer_stages.values()) + 1
        kwargs = options["pipelining_kwargs"]
        schedule = _schedule(kwargs)
        mapping = options["device_mapping"]
        mapping = list(range(num_stages)) if mapping is None else list(mapping)
        # What ``pipelining_ops.pipeline`` checks when Keras builds the pipeline.
        _pipeline_checks.check_device_mapping(num_stages, mapping)
        if any(ipu < 0 for ipu in mapping):
            raise ValueError("Expected `device_mapping` to be a list of integers.")
        for what in ("forward_propagation_stages_poplar_options",
                     "backward_propagation_stages_poplar_options"):
            _pipeline_checks.check_stage_options(kwargs.get(what), what, num_stages,
                                                 pipelining_ops.PipelineStageOptions)
        return keras_stages.plan(layer_stages, schedule, mapping, accumulation, options["mean"],
                                 kwargs, steps_per_execution, training)


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


def _schedule(kwargs):
    """The schedule's name (``schedule_rules.SCHEDULE_NAMES``) from ``pipeline_schedule``, after
    the checks ``pipeline`` makes of its keyword arguments."""
    inspect.signature(pipelining_ops.pipeline).bind_partial(**kwargs)  # unknown keys: TypeError
    schedule = kwargs.get("pipeline_schedule")
    if schedule is None:
        schedule = pipelining_ops.PipelineSchedule.Grouped
    _pipeline_checks.check_member(schedule, pipelining_ops.PipelineSchedule,
                                  "pipeline_schedule")
    mode = kwargs.get("recomputation_mode")
    if mode is not None:
        _pipeline_checks.check_member(mode, pipelining_ops.RecomputationMode,
                                      "recomputation_mode")
    return schedule.name.lower()


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


__all__ = ["PipelineStage", "SequentialLayerPipelineStageAssignment",
           "FunctionalLayerPipelineStageAssignment", "PipeliningExtensions"]
