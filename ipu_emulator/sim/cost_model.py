"""Per-layer and per-stage costs of a model, for the pipeline simulator (pure Python).

A model is a declarative list of layers (``model_layers``: ``Input``, ``Dense``, ``Conv2D``, ...).
Cutting it at split points gives pipeline stages; each stage's ``StageCost`` says what one
micro-batch costs it: forward/backward FLOPs, the activations it must keep until its backward
pass, the bytes it sends to the next stage, and its weights and optimizer state.

The same ``StageCost`` records can come from a recorded TensorFlow run (the API front measures
each pipeline stage's ops), so a widget's hypothetical model and a real run are simulated
alike.

    >>> from ipu_emulator.sim.builtin_models import builtin_model
    >>> model = builtin_model("tutorial-mlp")
    >>> [stage.layers for stage in stage_costs(model, ["dense32"], batch_size=32)]
    [('flatten', 'dense256', 'dense128', 'dense64'), ('dense32', 'logits', 'cel')]

The FLOP and memory conventions of each layer are in ``model_layers``.

Pure Python: no TensorFlow import (the simulator layer never imports it).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, Iterable, List, Sequence, Tuple, Union

from ipu_emulator.record import ComputeCost
from ipu_emulator.sim.hardware import op_cycles
from ipu_emulator.sim.model_layers import (LABEL_BYTES, Input, Layer, Shape, SoftmaxCrossEntropy,
                                           check_positive_int, elements)


# The int32 mini-batch counter a gradient accumulation optimizer keeps.
ACCUMULATION_COUNTER_BYTES = 4


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
    ``op_cycles`` is the fixed cost of the (forward, backward, weight update) ops in IPU
    cycles (``hardware.OP_CYCLES``): on an IPU every op costs cycles however small, on top of
    its FLOPs and bytes.  A pipeline adds every micro-batch's gradients into accumulators, one
    op per variable, in the backward pass.
    ``half_flops`` are the (forward, backward, weight update) FLOPs done by float16 matrix
    products, part of the phases' FLOPs, at the IPU's float16 rate (recorded programs only;
    the layer models here are float32).
    ``reads`` are the tensors this stage's ops take from another stage's IPU, as
    ``(phase, source stage, bytes, tensors)``: per micro-batch in the forward and backward
    phases, per weight update in the ``"weight_update"`` phase.  Shards have them (the SDK
    runs an op in the shard of the scope it is built in, so gradients computed in the last
    shard read the activations and weights of the first); pipeline stages pass only their
    ``output_bytes`` forward and the same size of gradients back, and leave them empty.
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
    op_cycles: Tuple[float, float, float] = (0.0, 0.0, 0.0)
    reads: Tuple[Tuple[str, int, int, int], ...] = ()
    half_flops: Tuple[float, float, float] = (0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Optimizer:
    """What an optimizer costs per trainable parameter.

    ``state_copies`` is how many parameter-sized slot variables it keeps (momentum: the
    velocity; Adam: first and second moments).
    """

    update_flops_per_parameter: int
    state_copies: int


OPTIMIZERS: Dict[str, Optimizer] = {
    "sgd": Optimizer(update_flops_per_parameter=2, state_copies=0),       # w -= lr * g
    "momentum": Optimizer(update_flops_per_parameter=4, state_copies=1),
    "adam": Optimizer(update_flops_per_parameter=12, state_copies=2),
}


# --- a model: a sequence of layers, shapes propagated from the input ------------------

@dataclass(frozen=True)
class LayerShapes:
    """One layer in a model with the shapes it sees at a given batch size."""

    layer: Layer
    input_shape: Shape
    output_shape: Shape

    @property
    def name(self) -> str:
        return self.layer.name


def layer_shapes(layers: Sequence[Layer], batch_size: int) -> Tuple[LayerShapes, ...]:
    """Each layer with its input and output shapes (batch dimension first).

    The model must start with one ``Input``; layer names must be unique (splits and
    traces refer to layers by name).

    >>> from ipu_emulator.sim.builtin_models import builtin_model
    >>> [s.output_shape for s in layer_shapes(builtin_model("tutorial-mlp"), 32)][:3]
    [(32, 28, 28), (32, 784), (32, 256)]
    """
    check_positive_int(batch_size, "batch_size")
    layers = tuple(layers)
    _check_model(layers)
    shape: Shape = (batch_size,)
    result = []
    for layer in layers:
        output = layer.output_shape(shape)
        result.append(LayerShapes(layer, shape, output))
        shape = output
    return tuple(result)


def _check_model(layers: Tuple[Layer, ...]) -> None:
    if not layers or not isinstance(layers[0], Input):
        raise ValueError("a model must start with an Input layer, e.g. Input((28, 28))")
    if any(isinstance(layer, Input) for layer in layers[1:]):
        raise ValueError("a model has exactly one Input layer, and it comes first")
    seen = set()
    for layer in layers:
        if layer.name in seen:
            raise ValueError(f"layer name {layer.name!r} is used more than once; "
                             f"splits refer to layers by name, so names must be unique")
        seen.add(layer.name)


# --- per-layer costs ----------------------------------------------------------------

@dataclass(frozen=True)
class LayerCost:
    """One layer's costs for one micro-batch.

    ``saved`` maps the tensors the backward pass reads to their element counts.  Tensors
    are named after the layer that produced them (a view is named after its source), so a
    tensor kept by two layers appears under one name; ``private`` tensors are named
    ``"<layer>/saved"``.
    """

    name: str
    output_shape: Shape
    parameters: int
    forward_flops: float
    backward_flops: float
    forward_bytes: float
    backward_bytes: float
    saved: Tuple[Tuple[str, int], ...] = ()
    forward_op_cycles: float = 0.0
    backward_op_cycles: float = 0.0
    variables: int = 0
    backward_weight_elements: int = 0


def layer_costs(layers: Sequence[Layer], batch_size: int,
                dtype_bytes: int = 4) -> Tuple[LayerCost, ...]:
    """The cost of every layer, the ``Input`` included (it costs nothing).

    >>> from ipu_emulator.sim.builtin_models import builtin_model
    >>> first_dense = layer_costs(builtin_model("tutorial-mlp"), 32)[2]
    >>> first_dense.name, first_dense.backward_flops == first_dense.forward_flops
    ('dense256', True)
    """
    check_positive_int(dtype_bytes, "dtype_bytes")
    costs = []
    trainable_before = False
    tensor_of_input = ""  # which tensor feeds the current layer
    for shapes in layer_shapes(layers, batch_size):
        layer, shape = shapes.layer, shapes.input_shape
        # Only a trainable layer upstream needs this layer's input gradient.
        input_gradient = trainable_before
        output_tensor = tensor_of_input if layer.is_view else layer.name
        saved = {}
        if layer.saves_input():
            saved[tensor_of_input] = elements(shape)
        if layer.saves_output():
            saved[output_tensor] = elements(shapes.output_shape)
        if layer.private_saved_elements(shape):
            saved[f"{layer.name}/saved"] = layer.private_saved_elements(shape)
        parameters = layer.parameter_count(shape)
        costs.append(LayerCost(
            name=layer.name,
            output_shape=shapes.output_shape,
            parameters=parameters,
            forward_flops=layer.forward_flops(shape),
            backward_flops=layer.backward_flops(shape, input_gradient),
            forward_bytes=layer.forward_bytes(shape, dtype_bytes),
            backward_bytes=layer.backward_bytes(shape, dtype_bytes, input_gradient),
            saved=tuple(saved.items()),
            forward_op_cycles=op_cycles(layer.forward_ops()),
            backward_op_cycles=op_cycles(layer.backward_ops(input_gradient)),
            variables=layer.variable_count() if parameters else 0,
            backward_weight_elements=layer.backward_weight_elements(shape, input_gradient),
        ))
        trainable_before = trainable_before or parameters > 0
        tensor_of_input = output_tensor
    return tuple(costs)


def describe(layers: Sequence[Layer], batch_size: int) -> str:
    """A printable per-layer table: output shape, parameters, forward and backward FLOPs.

    >>> from ipu_emulator.sim.builtin_models import builtin_model
    >>> print(describe(builtin_model("tutorial-mlp"), 32))
    layer     output shape   params   fwd FLOPs   bwd FLOPs
    images    (32, 28, 28)        0           0           0
    flatten   (32, 784)           0           0           0
    dense256  (32, 256)     200,960  12,861,440  12,861,440
    dense128  (32, 128)      32,896   2,105,344   4,202,496
    dense64   (32, 64)        8,256     528,384   1,052,672
    dense32   (32, 32)        2,080     133,120     264,192
    logits    (32, 10)          330      20,800      41,280
    cel       ()                  0       2,144         352
    total                   244,522  15,651,232  18,422,432
    """
    costs = layer_costs(layers, batch_size)
    rows = [(c.name, str(c.output_shape), f"{c.parameters:,}", f"{c.forward_flops:,.0f}",
             f"{c.backward_flops:,.0f}") for c in costs]
    rows.append(("total", "", f"{sum(c.parameters for c in costs):,}",
                 f"{sum(c.forward_flops for c in costs):,.0f}",
                 f"{sum(c.backward_flops for c in costs):,.0f}"))
    header = ("layer", "output shape", "params", "fwd FLOPs", "bwd FLOPs")
    widths = [max(len(row[i]) for row in rows + [header]) for i in range(len(header))]

    def line(row):
        left = [row[i].ljust(widths[i]) for i in range(2)]
        right = [row[i].rjust(widths[i]) for i in range(2, len(row))]
        return "  ".join(left + right).rstrip()

    return "\n".join(line(row) for row in [header] + rows)


# --- pipeline stages ----------------------------------------------------------------

def split_stages(layers: Sequence[Layer], splits: Union[str, Iterable[str]]
                 ) -> Tuple[Tuple[str, ...], ...]:
    """The layer names of each stage.  Each split names the first layer of the *next* stage.

    This follows step 4 of Graphcore's pipelining tutorial (``--splits``: "the layer that
    will be assigned to the *next* stage"), so N splits give N+1 stages.  The ``Input`` is
    the model's input, not a layer of any stage.

    >>> from ipu_emulator.sim.builtin_models import builtin_model
    >>> split_stages(builtin_model("tutorial-mlp"), ["dense128", "dense32"])
    (('flatten', 'dense256'), ('dense128', 'dense64'), ('dense32', 'logits', 'cel'))
    """
    splits = [splits] if isinstance(splits, str) else list(splits)
    layers = tuple(layers)
    _check_model(layers)
    names = [layer.name for layer in layers[1:]]
    _check_splits(names, splits)
    starts = [0] + [names.index(split) for split in splits] + [len(names)]
    return tuple(tuple(names[begin:end]) for begin, end in zip(starts, starts[1:]))


def _check_splits(names: List[str], splits: List[str]) -> None:
    for split in splits:
        if not isinstance(split, str) or split not in names:
            raise ValueError(f"unknown split layer {split!r}; a split names the first layer "
                             f"of the next stage, one of: {', '.join(names)}")
    for position, split in enumerate(splits):
        if split in splits[:position]:
            raise ValueError(f"split layer {split!r} is given more than once; each split "
                             f"starts a new stage, so a repeat would leave a stage empty")
    for earlier, later in zip(splits, splits[1:]):
        if names.index(later) < names.index(earlier):
            raise ValueError(f"splits must follow the layer order of the model: {later!r} "
                             f"comes before {earlier!r}")
    if splits and splits[0] == names[0]:
        raise ValueError(f"split {names[0]!r} would leave stage 0 empty: a split names the "
                         f"first layer of the next stage, and {names[0]!r} is the model's "
                         f"first layer")


def stage_costs(layers: Sequence[Layer], splits: Union[str, Iterable[str]], batch_size: int,
                dtype_bytes: int = 4, optimizer: str = "sgd",
                recompute: bool = False) -> List[StageCost]:
    """Cut a model into pipeline stages and say what each costs per micro-batch.

    ``splits`` name the first layer of each new stage (tutorial step 4's ``--splits``);
    ``batch_size`` is the micro-batch; ``dtype_bytes`` sizes activations and weights (4 for
    float32, 2 for float16); ``optimizer`` is ``"sgd"``, ``"momentum"`` or ``"adam"``.

    With ``recompute=True`` a stage keeps only its input (and the labels, if it holds the
    loss) per in-flight micro-batch and re-runs its forward pass just before its backward
    pass, so ``backward_flops`` and ``backward_bytes_accessed`` include a second forward.

    ``output_bytes`` is what a stage's last layer sends on, plus the labels while a later
    stage still needs them for the loss (the tutorial's stages pass ``labels`` along).

    >>> from ipu_emulator.sim.builtin_models import builtin_model
    >>> stages = stage_costs(builtin_model("tutorial-mlp"), ["dense32"], batch_size=32)
    >>> [(s.name, s.output_bytes) for s in stages]
    [('stage0', 8320), ('stage1', 0)]
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {optimizer!r}; use one of: "
                         f"{', '.join(OPTIMIZERS)}")
    layers = tuple(layers)
    stages = split_stages(layers, splits)
    cost_of = {cost.name: cost for cost in layer_costs(layers, batch_size, dtype_bytes)}
    shapes = {s.name: s for s in layer_shapes(layers, batch_size)}
    loss_stage = _loss_stage(stages, shapes)
    label_bytes = LABEL_BYTES * batch_size
    result = []
    for index, stage in enumerate(stages):
        activation_in = dtype_bytes * elements(shapes[stage[0]].input_shape)
        activation_out = dtype_bytes * elements(shapes[stage[-1]].output_shape)
        # Labels ride along with the activations up to the stage that computes the loss.
        labels_in = label_bytes if index <= loss_stage else 0
        labels_out = label_bytes if index < loss_stage else 0
        result.append(_one_stage_cost(
            name=f"stage{index}",
            layer_names=stage,
            costs=[cost_of[name] for name in stage],
            dtype_bytes=dtype_bytes,
            optimizer=OPTIMIZERS[optimizer],
            recompute=recompute,
            input_bytes=activation_in + labels_in,
            kept_input_bytes=activation_in + (label_bytes if index == loss_stage else 0),
            output_bytes=0 if index == len(stages) - 1 else activation_out + labels_out,
        ))
    return result


def shard_costs(layers: Sequence[Layer], splits: Union[str, Iterable[str]], batch_size: int,
                dtype_bytes: int = 4, optimizer: str = "sgd",
                colocate_gradients: bool = False) -> List[StageCost]:
    """The model cut at ``splits`` into shards that run in turn, as ``ipu_shard`` scopes do
    (the pipelining tutorial's step 2: no pipeline), with ``minimize`` built in the last
    shard's scope, and what each shard reads from the others (``StageCost.reads``).

    The SDK runs an op in the shard of the scope it is built in, so every gradient (and its
    accumulator) is computed in the last shard: it reads the other shards' kept activations
    and the weights its input gradients need, and at each weight update the shards whose
    variables they are read their accumulated gradients back.  With ``colocate_gradients``
    (``minimize(colocate_gradients_with_ops=True)``) each gradient runs with its forward op:
    a shard's backward pass reads only the gradient of its output from the next shard.

    >>> from ipu_emulator.sim.builtin_models import builtin_model
    >>> first, last = shard_costs(builtin_model("tutorial-mlp"), ["dense32"], batch_size=32)
    >>> first.backward_flops, sorted(last.reads)[0]
    (0.0, ('backward', 0, 313344, 5))
    """
    layers = tuple(layers)
    stages = stage_costs(layers, splits, batch_size, dtype_bytes, optimizer)
    names = split_stages(layers, splits)
    costs = {c.name: c for c in layer_costs(layers, batch_size, dtype_bytes)}
    shapes = {s.name: s for s in layer_shapes(layers, batch_size)}
    shard_of = {name: k for k, stage in enumerate(names) for name in stage}
    shard_of[layers[0].name] = 0  # the input arrives on the first shard
    last, loss = len(stages) - 1, _loss_stage(names, shapes)
    reads: List[Dict[Tuple[str, int], List[int]]] = [{} for _ in stages]

    def read(shard, phase, source, nbytes):
        if source != shard and nbytes > 0:
            entry = reads[shard].setdefault((phase, source), [0, 0])
            entry[0] += nbytes
            entry[1] += 1

    arrived = set()  # tensors the last shard already has from the forward pass
    for k in range(1, len(stages)):
        tensor = _producer(layers, names[k - 1][-1])
        read(k, "forward", k - 1, dtype_bytes * elements(shapes[names[k - 1][-1]].output_shape))
        arrived.add((k, tensor))
    if loss > 0:
        read(loss, "forward", 0, LABEL_BYTES * batch_size)
    result = []
    for k, stage in enumerate(stages):
        if colocate_gradients or len(stages) == 1:
            if k < last:  # the gradient of its output, from the next shard's input gradient
                read(k, "backward", k + 1, stage.output_bytes - (
                    LABEL_BYTES * batch_size if k < loss else 0))
            result.append(replace(stage, parameter_bytes=stage.parameter_bytes
                                  + _accumulator_bytes([stage])))
            continue
        if k < last:
            for name in names[k]:
                for tensor, count in costs[name].saved:
                    if (last, tensor) not in arrived and not tensor.endswith("/saved"):
                        arrived.add((last, tensor))
                        read(last, "backward", shard_of[tensor], dtype_bytes * count)
                read(last, "backward", k, dtype_bytes * costs[name].backward_weight_elements)
            weights = sum(costs[name].variables for name in names[k])
            if stage.parameter_bytes:
                reads[k][("weight_update", last)] = [stage.parameter_bytes, weights]
            # its accumulators live with the gradients, on the last shard
            result.append(replace(stage, backward_flops=0.0, backward_bytes_accessed=0.0,
                                  activation_bytes=0,
                                  op_cycles=(stage.op_cycles[0], 0.0, stage.op_cycles[2]),
                                  half_flops=(stage.half_flops[0], 0.0, stage.half_flops[2])))
        else:
            everything = stages
            result.append(replace(
                stage, parameter_bytes=stage.parameter_bytes + _accumulator_bytes(everything),
                backward_flops=sum(s.backward_flops for s in everything),
                backward_bytes_accessed=sum(s.backward_bytes_accessed for s in everything),
                activation_bytes=dtype_bytes * sum(dict(
                    saved for layer in costs.values() for saved in layer.saved).values()),
                op_cycles=(stage.op_cycles[0], sum(s.op_cycles[1] for s in everything),
                           stage.op_cycles[2]),
                half_flops=(stage.half_flops[0], sum(s.half_flops[1] for s in everything),
                            stage.half_flops[2])))
    return [replace(stage, name=f"shard{k}", reads=tuple(sorted(
        (phase, source, nbytes, count) for (phase, source), (nbytes, count) in reads[k].items())))
        for k, stage in enumerate(result)]


def _accumulator_bytes(stages: Sequence[StageCost]) -> int:
    """A gradient accumulation optimizer's accumulators (one per weight, the weight's type)
    and its mini-batch counter: resident where the gradients are computed."""
    return sum(s.parameter_bytes for s in stages) + ACCUMULATION_COUNTER_BYTES


def _producer(layers: Sequence[Layer], name: str) -> str:
    """The tensor a layer's output is: its own, or (a view) the tensor it re-labels."""
    tensor = layers[0].name
    for layer in layers[1:]:
        tensor = tensor if layer.is_view else layer.name
        if layer.name == name:
            return tensor
    raise ValueError(f"no layer {name!r}")


def step_cost(layers: Sequence[Layer], batch_size: int) -> ComputeCost:
    """One training step of the whole model on one IPU, as the record's ``ComputeCost`` the
    engine-run simulator takes (for a model that ran nowhere: a what-if).

    >>> from ipu_emulator.sim.builtin_models import builtin_model
    >>> step_cost(builtin_model("tutorial3-mlp"), 32).parameter_bytes
    407080
    """
    [stage] = stage_costs(layers, (), batch_size)
    return ComputeCost(
        forward_flops=stage.forward_flops, backward_flops=stage.backward_flops,
        weight_update_flops=stage.weight_update_flops,
        bytes_accessed=stage.forward_bytes_accessed + stage.backward_bytes_accessed,
        parameter_bytes=stage.parameter_bytes, activation_bytes=stage.activation_bytes,
        # Every op's fixed cost, as a recorded program carries it: for a model this small it,
        # not the FLOPs, is most of a step.
        phase_op_cycles=stage.op_cycles)


def _loss_stage(stages, shapes) -> int:
    """Index of the stage holding the loss (the last reader of the labels), -1 if none."""
    holding = [index for index, stage in enumerate(stages)
               if any(isinstance(shapes[name].layer, SoftmaxCrossEntropy) for name in stage)]
    return holding[-1] if holding else -1


def _one_stage_cost(name, layer_names, costs, dtype_bytes, optimizer, recompute,
                    input_bytes, kept_input_bytes, output_bytes) -> StageCost:
    parameters = sum(c.parameters for c in costs)
    forward_flops = sum(c.forward_flops for c in costs)
    forward_bytes = sum(c.forward_bytes for c in costs)
    backward_flops = sum(c.backward_flops for c in costs)
    backward_bytes = sum(c.backward_bytes for c in costs)
    forward_cycles = sum(c.forward_op_cycles for c in costs)
    variable_cycles = op_cycles({"variable": sum(c.variables for c in costs)})
    # Every micro-batch's gradients are added into their accumulators: one op per variable.
    backward_cycles = sum(c.backward_op_cycles for c in costs) + variable_cycles
    if recompute:
        # The forward pass runs again, from the kept stage input, before the backward pass.
        backward_flops += forward_flops
        backward_bytes += forward_bytes
        backward_cycles += forward_cycles
        activation_bytes = kept_input_bytes
    else:
        saved = {}
        for cost in costs:
            saved.update(cost.saved)  # a tensor kept by two layers is stored once
        activation_bytes = dtype_bytes * sum(saved.values())
    return StageCost(
        name=name,
        layers=tuple(layer_names),
        forward_flops=forward_flops,
        backward_flops=backward_flops,
        weight_update_flops=float(optimizer.update_flops_per_parameter * parameters),
        forward_bytes_accessed=forward_bytes,
        backward_bytes_accessed=backward_bytes,
        parameter_bytes=dtype_bytes * parameters,
        optimizer_state_bytes=dtype_bytes * parameters * optimizer.state_copies,
        activation_bytes=activation_bytes,
        input_bytes=input_bytes,
        output_bytes=output_bytes,
        op_cycles=(forward_cycles, backward_cycles, variable_cycles),  # a kernel per variable
    )
