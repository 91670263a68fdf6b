"""Per-iteration compute cost of a program, read off the TensorFlow graph that ran.

``walk`` is the one pass over a program's ops that every cost comes from (one-IPU programs,
shards, pipeline stages, IPU Keras stages, TF2 functions): per IPU and phase, the ops' fixed
cycles, FLOPs and bytes, the activations kept for the backward pass and the tensors read from
other IPUs.  Each op's FLOPs follow from its static shapes (dense and convolution layers dominate; their
gradients cost as much as the forward op); element-wise ops count one FLOP per output element.
Ops are assigned to a phase by what built them: ``tf.gradients``/optimizer ``minimize`` put
backward ops under a ``gradients`` name scope, and optimizers update weights with ``Apply*``
ops.  Ops inside an on-device loop body are the per-iteration cost; a program without a loop
is one iteration.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import tensorflow as tf

from ipu_emulator.record import ComputeCost
from ipu_emulator.sim import hardware

from . import float16

_FREE_OPS = {
    "Const", "Identity", "IdentityN", "NoOp", "Placeholder", "Enter", "Exit", "Switch", "Merge",
    "NextIteration", "LoopCond", "Reshape", "Shape", "ShapeN", "Size", "Rank", "Squeeze",
    "ExpandDims", "ReadVariableOp", "VarHandleOp", "VarIsInitializedOp", "AssignVariableOp",
    "StopGradient", "PreventGradient", "IteratorGetNext", "Fill", "ZerosLike", "OnesLike",
    "BroadcastGradientArgs", "StridedSlice", "Pack", "Unpack", "ConcatV2", "Cast", "Less",
    "LessEqual", "Greater", "GreaterEqual", "Equal", "LogicalAnd", "Assert", "Range",
    "QueueEnqueueV2", "QueueDequeueManyV2", "QueueSizeV2", "FIFOQueueV2", "Tile",
    "TensorArrayV3", "TensorArrayWriteV3", "TensorArrayReadV3", "TensorArrayGatherV3",
    "TensorArraySizeV3", "Transpose", "ArgMax",
}
# Rough FLOPs per element for the transcendental-heavy ops.
_PER_ELEMENT_FLOPS = {"Softmax": 5, "LogSoftmax": 5, "Exp": 4, "Log": 4, "Tanh": 4,
                      "Sigmoid": 4, "Sqrt": 2, "Rsqrt": 2, "SparseSoftmaxCrossEntropyWithLogits": 6,
                      "SoftmaxCrossEntropyWithLogits": 6}
# Optimizer update kernels: FLOPs per parameter element (Adam reads/updates m, v and the weight).
_APPLY_FLOPS_PER_ELEMENT = {"Adam": 12, "GradientDescent": 2, "Momentum": 4, "Adagrad": 5,
                            "RMSProp": 8, "Ftrl": 10, "Adadelta": 8}


def _elements(tensor) -> int:
    count = tensor.shape.num_elements() if tensor.shape.rank is not None else None
    return int(count) if count is not None else 0


def tensor_bytes(tensor) -> int:
    """Bytes of a tensor's value (0 when its shape is not fully known, or for a handle,
    variant or string, whose type has no size).  A float32 or float64 result of an op that
    computes a float16 op wide (runtime/float16.py) counts at float16's two bytes."""
    if tensor.dtype in (tf.resource, tf.variant, tf.string):
        return 0
    if tensor.dtype in (tf.float32, tf.float64) and float16.is_marked(tensor.op):
        return _elements(tensor) * 2
    return _elements(tensor) * tensor.dtype.size


def variables_bytes(variables) -> int:
    """Bytes of the variables whose shapes are fully known."""
    return sum(int(v.shape.num_elements()) * v.dtype.size for v in variables
               if v.shape.is_fully_defined())


def _handle_bytes(handle) -> Optional[int]:
    """Bytes of the variable a ``VarHandleOp`` makes, or None when its shape is not known."""
    shape = tf.TensorShape(handle.get_attr("shape"))
    if not shape.is_fully_defined():
        return None
    return int(shape.num_elements()) * handle.get_attr("dtype").size


_MATRIX_PRODUCTS = frozenset({
    "MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv2D",
    "Conv2DBackpropInput", "Conv2DBackpropFilter"})


def half_matrix_product(op) -> bool:
    """A matmul or convolution of float16 operands, which the IPU's accumulating matrix
    units do at its float16 rate: four times float32's on every IPU.  (The emulator computes
    a float16 program's products in float64 and marks them: ``float16.is_marked``.)"""
    return op.type in _MATRIX_PRODUCTS and (
        float16.is_marked(op) or any(t.dtype == tf.float16 for t in op.inputs))


def op_flops(op) -> float:
    kind = op.type
    if kind in _FREE_OPS or float16.is_rounding(op):
        return 0.0
    if kind in ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        a = op.inputs[0].shape
        if a.rank is None or a.rank < 2:
            return 0.0
        transpose_a = kind == "MatMul" and op.get_attr("transpose_a")
        inner = a.as_list()[-2] if transpose_a else a.as_list()[-1]
        return 2.0 * _elements(op.outputs[0]) * (inner or 0)
    if kind in ("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
                "DepthwiseConv2dNative"):
        return _conv_flops(op)
    if kind.startswith(("ResourceApply", "Apply", "ResourceSparseApply")):
        name = kind.replace("ResourceSparseApply", "").replace("ResourceApply", "").replace("Apply", "")
        per_element = _APPLY_FLOPS_PER_ELEMENT.get(name, 4)
        return float(per_element * _variable_elements(op))
    outputs = sum(_elements(t) for t in op.outputs)
    if kind in ("Sum", "Mean", "Max", "Min", "Prod", "BiasAddGrad"):
        return float(_elements(op.inputs[0]))
    return float(_PER_ELEMENT_FLOPS.get(kind, 1) * outputs)


def _conv_flops(op) -> float:
    """2 x (output positions) x (kernel volume): the same for the forward op and both
    gradients, which is why a convolution's backward pass costs about twice its forward."""
    if op.type == "Conv2D":
        out, kernel = op.outputs[0], op.inputs[1]
    elif op.type == "Conv2DBackpropInput":
        out, kernel = op.inputs[2], op.inputs[1]
    elif op.type == "Conv2DBackpropFilter":
        out, kernel = op.inputs[2], op.outputs[0]
    else:  # depthwise: one input channel per filter
        out, kernel = op.outputs[0], op.inputs[1]
        shape = kernel.shape
        if shape.rank != 4 or not shape.is_fully_defined():
            return 0.0
        return 2.0 * _elements(out) * shape.as_list()[0] * shape.as_list()[1]
    shape = kernel.shape
    if shape.rank != 4 or not shape.is_fully_defined():
        return 0.0
    kernel_height, kernel_width, in_channels, _ = shape.as_list()
    return 2.0 * _elements(out) * kernel_height * kernel_width * in_channels


def _variable_elements(apply_op) -> int:
    """Elements of the variable an ``Apply*`` op updates (its gradient input has that shape)."""
    best = 0
    for tensor in apply_op.inputs:
        if tensor.dtype != tf.resource:
            best = max(best, _elements(tensor))
    return best


def _updated_variable_bytes(op) -> int:
    """An optimizer kernel reads and writes its variable and slots through resource handles,
    which carry no shape: count the weight, each slot (Adam: m and v) both ways."""
    if not op.type.startswith(("ResourceApply", "Apply", "ResourceSparseApply")):
        return 0
    variables = sum(1 for t in op.inputs if t.dtype == tf.resource)
    element_bytes = _variable_elements(op) * op.get_attr("T").size
    return 2 * variables * element_bytes


def phase_of(op) -> str:
    if op.type.startswith(("ResourceApply", "Apply", "ResourceSparseApply")) or (
            float16.is_weight_update(op)):
        return "weight_update"
    parts = op.name.split("/")
    if any(part == "gradients" or part.startswith("gradients_") for part in parts):
        return "backward"
    return "forward"


def _loop_depth(op) -> int:
    depth, context = 0, op._get_control_flow_context()  # pylint: disable=protected-access
    while context is not None:
        if context.IsWhileContext():
            depth += 1
        context = context.outer_context
    return depth


def loop_step_ops(new_ops):
    """The ops of one iteration: the outermost loop body's, or all of them without a loop."""
    ops = list(new_ops)
    looped = [op for op in ops if _loop_depth(op) > 0]
    return looped if looped else ops


def program_cost(new_ops, outputs=None) -> ComputeCost:
    """Per-iteration cost of a program's ops on one IPU (``walk``; ``outputs``: its fetched
    tensors, when known)."""
    ops = list(new_ops)
    step_ops = loop_step_ops(ops)
    return cost_of(walk(step_ops, outputs=outputs), parameter_bytes=parameter_bytes(ops),
                   gradient_bytes=_trained_weight_bytes(step_ops))


_VARIABLE_UPDATE_PREFIXES = ("ResourceApply", "Apply", "ResourceSparseApply", "AssignAdd",
                             "AssignSub")
_VARIABLE_WRITERS = frozenset({"AssignVariableOp", "Assign"})


def updates_a_variable(op) -> bool:
    """An optimizer kernel, an in-place accumulation, or an add whose sum is written back to
    a variable (a gradient accumulator): work done once per variable."""
    if (op.type.startswith(_VARIABLE_UPDATE_PREFIXES) or float16.is_weight_update(op)
            or float16.is_accumulation(op)):
        return True
    return op.type in ("Add", "AddV2") and any(
        consumer.type in _VARIABLE_WRITERS for out in op.outputs for consumer in out.consumers())


_MATMUL_OPS = frozenset({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv2D",
                         "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative"})
_LOSS_OPS = frozenset({"SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits"})
_REDUCTION_OPS = frozenset({"Sum", "Mean", "Max", "Min", "Prod", "BiasAddGrad", "MaxPool",
                            "AvgPool"})


def op_kind(op) -> str:
    """What an op that does work is, for its fixed cost on an IPU (``hardware.OP_CYCLES``)."""
    if updates_a_variable(op):
        return "variable"
    if op.type in _MATMUL_OPS:
        return "matmul"
    if op.type in _LOSS_OPS:
        return "loss"
    if op.type in _REDUCTION_OPS:
        return "reduction"
    return "elementwise"


PHASES = ("forward", "backward", "weight_update")
# Ops that read only a tensor's shape, not its data (``Shape`` of a forward activation does
# not keep it for the backward pass, nor copy it to another IPU).
_SHAPE_READERS = frozenset({"Shape", "ShapeN", "Size", "Rank", "BroadcastGradientArgs"})
# Where a TensorFlow loop hands its values on: what flows there is used by the next iteration.
_LOOP_SINKS = frozenset({"NextIteration", "LoopCond", "Exit"})


@dataclass
class UnitWork:
    """What the ops of one IPU (a shard or a pipeline stage) do in one iteration, by phase
    (``PHASES``): fixed cycles (``hardware.OP_CYCLES``), FLOPs (and of them, those of float16
    matrix products: ``half_flops``) and tile-memory traffic; the bytes of the forward results
    its backward ops read (activations kept for them); and ``reads``, the tensors it takes
    from other IPUs: ``{(phase, source unit): [bytes, tensors]}``, each tensor counted once
    per reading IPU, in the first phase that reads it."""

    cycles: list = field(default_factory=lambda: [0.0, 0.0, 0.0])
    flops: list = field(default_factory=lambda: [0.0, 0.0, 0.0])
    half_flops: list = field(default_factory=lambda: [0.0, 0.0, 0.0])  # part of flops
    traffic: list = field(default_factory=lambda: [0.0, 0.0, 0.0])
    kept_bytes: int = 0
    reads: dict = field(default_factory=dict)


def walk(ops, unit_of=None, phase_of_op=None, outputs=None):
    """One pass over a program's ops: ``{unit: UnitWork}``.

    This is the one place the cost of TensorFlow ops is read off a graph (one-IPU programs,
    shards, pipeline stages, IPU Keras stages and TF2 functions all come here).  Each op that
    does work counts in its phase: forward, backward (by the name TensorFlow's gradients give
    it, or fed by a backward op) or weight update.  ``unit_of(op)`` says which IPU runs it
    (default: one IPU).  Left out, as the IPU compiler leaves them out:

    * dead gradient ops (with ``outputs``, the program's fetched tensors, given):
      ``tf.gradients`` builds a matmul's input gradient even for the first layer, whose input
      is data; nothing reads it, so XLA removes it;
    * scalar bookkeeping (loop and mini-batch counters, a learning rate's arithmetic): an
      op on scalars only is a few cycles on one tile, not a compute set over the chip.
    """
    ops = list(ops)
    unit_of = unit_of or (lambda op: 0)
    phases = _phases_by_dataflow(ops, phase_of_op or phase_of)
    live = _live(ops, phases, outputs)
    units = {}
    kept = {}       # (tensor name, reading unit) -> bytes
    copied = set()  # (tensor name, reading unit) already counted as a read
    for op in ops:
        if op not in live or float16.is_replaced(op):
            continue
        unit = unit_of(op)
        work = units.setdefault(unit, UnitWork())
        phase = PHASES.index(phases[op.name])
        _count_reads(op, unit, phase, unit_of, phases, work, kept, copied, live)
        flops = op_flops(op)
        what = op_kind(op)
        if (flops <= 0 and what != "variable") or _scalar_bookkeeping(op):
            continue
        work.cycles[phase] += hardware.OP_CYCLES[what]
        if flops <= 0:
            continue  # an in-place accumulation: its time is its op's, not FLOPs or bytes
        work.flops[phase] += flops
        if half_matrix_product(op):
            work.half_flops[phase] += flops
        work.traffic[phase] += sum(tensor_bytes(t) for t in op.inputs) + sum(
            tensor_bytes(t) for t in op.outputs) + _updated_variable_bytes(op)
    for (_, unit), nbytes in kept.items():
        units.setdefault(unit, UnitWork()).kept_bytes += nbytes
    return units


def _count_reads(op, unit, phase, unit_of, phases, work, kept, copied, live):
    """The tensors ``op`` reads: a forward result read by a backward op is kept for it (by
    the reading IPU); a tensor made on another IPU is copied over, once per reading IPU."""
    if op.type in _SHAPE_READERS:
        return
    for tensor in op.inputs:
        source = tensor.op
        if source not in live or tensor_bytes(tensor) <= 0 or _elements(tensor) <= 1:
            continue
        # Kept for the backward pass: what a backward op reads (a weight update reading a
        # forward-phase value, such as replicas' all-reduced gradients, keeps nothing).
        if (PHASES[phase] == "backward" and phases.get(source.name) == "forward"
                and op.type not in _FREE_OPS and not _is_variable_value(tensor)):
            kept[(tensor.name, unit)] = tensor_bytes(tensor)
        if op.type in _FREE_OPS:
            continue  # it only passes the tensor on: its reader copies it, if anyone does
        origin = _origin(tensor)
        source_unit = unit_of(origin.op)
        key = (origin.name, unit)
        if source_unit == unit or key in copied:
            continue
        copied.add(key)
        count = work.reads.setdefault((PHASES[phase], source_unit), [0, 0])
        count[0] += tensor_bytes(tensor)
        count[1] += 1


_VALUE_PLUMBING = frozenset({"Identity", "Enter", "Switch", "Merge", "Cast"})


def _origin(tensor):
    """Where a tensor's data was made: through ops that only pass it on (a reshape, a cast
    to its own type, loop plumbing), which move no data between IPUs."""
    for _ in range(16):
        op = tensor.op
        inputs = [t for t in op.inputs if t.dtype != tf.resource]
        if op.type not in _FREE_OPS or not inputs:
            return tensor
        tensor = inputs[0]
    return tensor


def _is_variable_value(tensor) -> bool:
    """A variable's value (a resource variable's read, a reference variable or its
    ``/read``, passed into a loop or cast): weights, not activations."""
    op = tensor.op
    for _ in range(8):
        if op.type in ("ReadVariableOp", "VariableV2", "Variable", "VarHandleOp"):
            return True
        if op.type not in _VALUE_PLUMBING or not op.inputs:
            return False
        op = op.inputs[0].op
    return False


def _scalar_bookkeeping(op) -> bool:
    """Arithmetic on scalars only (counters, a learning rate): no chip-wide compute set."""
    tensors = [t for t in list(op.inputs) + list(op.outputs) if t.dtype != tf.resource]
    return bool(tensors) and all(t.shape.rank is not None and _elements(t) <= 1
                                 and t.shape.is_fully_defined() for t in tensors)


def _live(ops, phases, outputs):
    """The ops whose results are used: everything, except gradient ops whose results nobody
    reads (when the program's ``outputs`` are known; a fetched gradient is used)."""
    if outputs is None:
        return set(ops)
    members = set(ops)
    fetched = {t.op for t in outputs}
    stack = [op for op in ops
             if op in fetched or op.type in _LOOP_SINKS or _is_stateful(op)
             or any(c not in members for t in op.outputs for c in t.consumers())
             or any(c not in members for c in op._control_outputs)  # pylint: disable=protected-access
             or (phases[op.name] != "backward"
                 and not any(t.consumers() for t in op.outputs))]
    live = set()
    while stack:
        op = stack.pop()
        if op in live:
            continue
        live.add(op)
        stack.extend(t.op for t in op.inputs if t.op in members)
        # A control dependency only orders ops: the one on a stateless op (``tf.tuple``
        # grouping a matmul's two gradients) does not keep it alive.
        stack.extend(c for c in op.control_inputs if c in members and _is_stateful(c))
    return live


def _is_stateful(op) -> bool:
    try:
        return op.op_def.is_stateful
    except (AttributeError, ValueError):
        return True


def _phases_by_dataflow(ops, phase_of_op=None):
    """``phase_of`` each op, except that an op fed by a backward op is backward too.

    Gradient accumulation adds each gradient into its accumulator outside any ``gradients``
    name scope; by name alone those adds would look like forward work and their results
    like activations kept for the backward pass.  ``ops`` are in graph (creation) order, so
    an op's inputs are classified before it.
    """
    phase_of_op = phase_of_op or phase_of
    phases = {}
    for op in ops:
        phase = phase_of_op(op)
        if phase == "forward" and any(phases.get(t.op.name) == "backward" for t in op.inputs):
            phase = "backward"
        phases[op.name] = phase
    return phases


def cost_of(units, **fields) -> ComputeCost:
    """All the units' work as one program's ``ComputeCost`` (``fields``: its other fields)."""
    total = UnitWork()
    for work in units.values():
        for phase in range(3):
            total.cycles[phase] += work.cycles[phase]
            total.flops[phase] += work.flops[phase]
            total.half_flops[phase] += work.half_flops[phase]
            total.traffic[phase] += work.traffic[phase]
        total.kept_bytes += work.kept_bytes
    return ComputeCost(
        forward_flops=total.flops[0], backward_flops=total.flops[1],
        weight_update_flops=total.flops[2], bytes_accessed=sum(total.traffic),
        phase_bytes=tuple(total.traffic), phase_op_cycles=tuple(total.cycles),
        phase_half_flops=tuple(total.half_flops),
        activation_bytes=total.kept_bytes, **fields)


def _trained_weight_bytes(ops):
    """Bytes of the weights optimizer kernels update (each needs a gradient), or None when
    the step has no optimizer kernel and the weights cannot be told from other variables."""
    trained, found = {}, False
    for op in ops:
        if not op.type.startswith(("ResourceApply", "ResourceSparseApply")):
            continue
        found = True
        handles = [_handle_source(t) for t in op.inputs if t.dtype == tf.resource]
        weight = handles[0] if handles else None
        if weight is not None and weight.type == "VarHandleOp":
            size = _handle_bytes(weight)
            if size is not None:
                trained[weight.name] = size
    return sum(trained.values()) if found else None


def parameter_bytes(ops) -> int:
    """Size of the variables the program uses (weights and optimizer slots, each once).

    Variables are reached through resource handles: read by ``ReadVariableOp``, updated by
    optimizer kernels.  Their size comes from the handle's ``VarHandleOp`` attributes, so it
    does not matter in which program the variable was created.
    """
    seen, total = set(), 0
    for op in ops:
        if op.type in _HANDLE_PLUMBING:
            continue  # it only passes a handle on (into a loop or a branch)
        for tensor in op.inputs:
            if tensor.dtype != tf.resource:
                continue
            handle = _handle_source(tensor)
            if handle is None or handle.type != "VarHandleOp" or handle.name in seen:
                continue
            seen.add(handle.name)
            total += _handle_bytes(handle) or 0
    return total


_HANDLE_PLUMBING = frozenset({"Enter", "Exit", "Switch", "Merge", "Identity", "NextIteration"})


def variable_bytes_by_role(ops, exclude=frozenset()):
    """``(weight bytes, optimizer state bytes)`` of the variables the loop body in ``ops`` uses.

    Optimizer state is the slots an ``Apply*`` kernel updates next to its weight (momentum's
    velocity, Adam's two moments): the handles after its first resource input.  Only ops
    inside a loop count, so a variable's initialiser (built wherever the variable was first
    made) does not tie it to that place.  Handle names in ``exclude`` are left out: buffers
    such as gradient accumulators that the caller accounts for itself.
    """
    slots, used = set(), {}
    for op in ops:
        # Loop and branch plumbing only passes a handle on; the ops that read or update
        # the variable say where it is used.
        if _loop_depth(op) == 0 or op.type in _HANDLE_PLUMBING:
            continue
        handles = [_handle_source(t) for t in op.inputs if t.dtype == tf.resource]
        handles = [h for h in handles if h is not None and h.type == "VarHandleOp"]
        if op.type.startswith(("ResourceApply", "ResourceSparseApply")):
            slots.update(h.name for h in handles[1:])
        for handle in handles:
            used[handle.name] = handle
    weights = state = 0
    for name, handle in used.items():
        size = _handle_bytes(handle)
        if name in exclude or size is None:
            continue
        if name in slots:
            state += size
        else:
            weights += size
    return weights, state


def _handle_source(tensor):
    """The op that created a resource handle, looking through loop plumbing."""
    op = tensor.op
    for _ in range(32):
        if op.type in ("VarHandleOp", "Placeholder"):
            return op
        if op.type in ("Enter", "Identity", "Switch", "Merge") and op.inputs:
            op = op.inputs[0].op
            continue
        return op
    return op
