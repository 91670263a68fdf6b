"""Float16 programs computed wide, rounded to float16 where the IPU stores float16.

The IPU computes in float16 natively, and faster than in float32; stock TensorFlow's CPU
kernels for float16 are many times slower than for float32 (a ResNet-8 step: about 8x), and
what they compute depends on the host (its vector units, oneDNN or Eigen).  So once
``ipu_compiler.compile`` has built a program (forward pass, gradients, optimizer and loops;
``settle_program``), once ``IPUStrategy.run`` has traced a TF2 step inside a function
(``settle_function_step``), or as each op is made while a TF2 program is traced
(``computing_traced_ops_wide``), ``compute_wide`` rewrites each of its ops that computes in
float16 into: its float16 inputs cast to float64, the same op in float64, and each float16
result rounded to float32 (as the IPU's float32 partials hold it; the Poplar option
``partialsType``) and then to float16.  Every tensor the program's other ops see is still
float16 and holds exactly a float16 value, so what float16 does to a model survives: a result
past 65504 is inf, one below the smallest subnormal (about 6e-8) is 0, a gradient too small
for float16 vanishes unless the loss is scaled, and a weight update smaller than half a
float16 step is lost.

Why float64: a float16 product or sum computed in float32 comes out in whatever order the
host's kernel adds (oneDNN or Eigen, AVX2 or AVX-512, the number of threads), and a last-bit
difference in float32 moves the float16 result now and then; a training run then drifts
apart.  The products and sums of float16 values are exact or nearly so in float64, so the
float16 results are the same on every host (``tests/emulator/programs/test_float16_hosts.py``
checks oneDNN's kernels against Eigen's, bit for bit).  That costs time: float64 is several
times slower than float32 on a CPU, so ``IPU_EMULATOR_FLOAT16=fast`` computes in float32 by
the host's own kernels (``computes_in_float32``).  An op whose CPU kernel has no float64
version is computed in float32 (``_compute_dtype``), but for batch normalization, which is
written out in float64 (``_rewrite_batch_norm``).

Left as they are: casts, ops that only move data (reshape, slice, concatenate...), element-
wise ops whose float16 kernels round their one exact-or-float32 result once (``_EXACT_IN_
FLOAT16``: the same bits on every IEEE host), and stateful ops (variable reads and writes,
feeds), but for the weight updates of float16 variables by plain SGD, momentum and Adam
(``_UPDATES``), computed wide and rounded like any float16 result (stochastically with
``floating_point_behaviour.esr``), and, with esr, additions to float16 variables
(``_ACCUMULATIONS``: a gradient accumulator's).

Each op the rewrite makes carries the attribute ``_ipu_emulator_float16``: the cost model
(graph_costs.tensor_bytes) counts its wide results at float16's two bytes, so the simulated
IPU time is that of the float16 program.
"""
import contextlib
import os
import threading

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, types_pb2
from tensorflow.python.framework import kernels, op_callbacks

from . import ipu_backend

MARK_ATTR = "_ipu_emulator_float16"
# The rewrite's own helpers (stochastic rounding's arithmetic, a weight update's reads and
# casts): free for the cost model, as the IPU rounds in the same instruction.
ROUNDING_ATTR = "_ipu_emulator_rounding"
# The arithmetic of a float16 variable's rewritten weight update: the cost model's
# weight-update kernel.
WEIGHT_UPDATE_ATTR = "_ipu_emulator_weight_update"
# The addition of a float16 accumulator's rewritten ``assign_add``: an in-place accumulation
# for the cost model.
ACCUMULATION_ATTR = "_ipu_emulator_accumulation"

# Ops that only move or re-label data: exact in float16 and as fast, so not worth two casts.
_DATA_MOVEMENT = frozenset({
    "Cast", "Const", "Identity", "IdentityN", "Placeholder", "PlaceholderWithDefault",
    "Enter", "Exit", "Switch", "Merge", "NextIteration", "RefEnter", "RefSwitch",
    "Reshape", "Squeeze", "ExpandDims", "Transpose", "ConcatV2", "Concat", "Pack", "Unpack",
    "StridedSlice", "Slice", "Split", "SplitV", "Tile", "Fill", "ZerosLike", "OnesLike",
    "Shape", "ShapeN", "Size", "Rank", "StopGradient", "PreventGradient", "Snapshot",
    "GatherV2", "Gather", "Pad", "PadV2", "MirrorPad", "Reverse", "ReverseV2",
    "BroadcastTo", "EnsureShape", "CheckNumerics", "Bitcast", "StridedSliceGrad",
    "DynamicStitch", "ParallelDynamicStitch", "Select", "SelectV2", "OneHot",
})

# Element-wise ops whose TensorFlow float16 kernels give every host the bits the rewrite
# would: each result is exact (ReLU, max, a comparison...), or one sum, difference or product
# of two float16 values, which float32 holds exactly or within half a float32 step, so one
# rounding to float16 is the correctly rounded result (float32 has 24 bits, at least 2 x 11 +
# 2: double rounding is innocuous), whatever the host computes it in.  And they are as fast as
# float32 ones.  (Reductions are not among them: TensorFlow's CPU kernels add float16 sums in
# an order of their own.)
_EXACT_IN_FLOAT16 = frozenset({
    "Relu", "ReluGrad", "Relu6", "Relu6Grad", "Add", "AddV2", "Sub", "Mul", "Neg",
    "Maximum", "Minimum", "Square", "Abs", "Sign", "BiasAdd", "Greater", "GreaterEqual",
    "Less", "LessEqual", "Equal", "NotEqual",
})


def _exact_in_float16(op) -> bool:
    # A sum of two float16 tensors is rounded once, as an IPU's; TensorFlow's float16 AddN
    # of three or more rounds after each addition, so those are computed wide.
    return op.type in _EXACT_IN_FLOAT16 or (op.type == "AddN" and len(op.inputs) == 2)


_state = threading.local()


@contextlib.contextmanager
def disabled():
    """Build programs with TensorFlow's own float16 kernels (the benchmark's comparison)."""
    previous = getattr(_state, "disabled", False)
    _state.disabled = True
    try:
        yield
    finally:
        _state.disabled = previous


# A graph's {name of an op the rewrite replaced: the tensors that stand for its outputs};
# only a graph the rewrite has been in has it.
_REPLACED_OPS = "_ipu_emulator_float16_replaced"


def _replaced_ops(graph) -> dict:
    replaced = getattr(graph, _REPLACED_OPS, None)
    if replaced is None:
        replaced = {}
        setattr(graph, _REPLACED_OPS, replaced)
    return replaced


def is_replaced(op) -> bool:
    """True for an op the rewrite replaced: it stays in its graph, unused, and costs nothing."""
    return op.name in getattr(op.graph, _REPLACED_OPS, ())


def _stochastic_rounding_configured() -> bool:
    """esr ON or REPLICA_IDENTICAL_ONLY in the applied configuration (replicas here always
    compute alike)."""
    options = ipu_backend.applied_options()
    return options is not None and options.floating_point_behaviour.esr.value != 0


def _flag(op, name) -> bool:
    if not getattr(op.graph, _REPLACED_OPS, None):
        return False  # a graph the rewrite has not been in: the common case, asked cheaply
    try:
        return bool(op.get_attr(name))
    except ValueError:
        return False


def is_marked(op) -> bool:
    """True for an op the rewrite made (its wide results stand for float16 ones)."""
    return _flag(op, MARK_ATTR)


def is_rounding(op) -> bool:
    """True for a helper of the rewrite's rounding, which costs nothing on an IPU."""
    return _flag(op, ROUNDING_ATTR)


def is_weight_update(op) -> bool:
    """True for the arithmetic of a float16 variable's rewritten weight update."""
    return _flag(op, WEIGHT_UPDATE_ATTR)


def is_accumulation(op) -> bool:
    """True for the addition of a float16 accumulator's rewritten ``assign_add``."""
    return _flag(op, ACCUMULATION_ATTR)


def _with_flag(attrs, name):
    return dict(attrs, **{name: attr_value_pb2.AttrValue(b=True)})


def _half_attrs(op):
    """Names of the op's type attributes set to float16 (``T``, list types too)."""
    names = []
    for name, value in op.node_def.attr.items():
        if value.type == types_pb2.DT_HALF or types_pb2.DT_HALF in value.list.type:
            names.append(name)
    return names


def _rewritable(op, stochastic) -> bool:
    """Whether ``op`` computes in float16 and is to be computed wide (``stochastic``:
    its results are rounded stochastically, which TensorFlow's own kernels cannot do)."""
    if not (any(t.dtype == tf.float16 for t in op.inputs)
            or any(t.dtype == tf.float16 for t in op.outputs)):
        return False  # most ops of most programs: asked cheaply, first
    if op.type in _DATA_MOVEMENT or op.type.startswith("_"):
        return False
    if _exact_in_float16(op) and not _stochastic_rounding_of(op, stochastic):
        return False
    if op.op_def is None or op.op_def.is_stateful:
        return False
    if any(t.dtype in (tf.resource, tf.variant, tf.string) or t.dtype._is_ref_dtype  # pylint: disable=protected-access
           for t in list(op.inputs) + list(op.outputs)):
        return False
    return bool(_half_attrs(op))


_HAS_FLOAT64_KERNEL = {}   # op type -> whether its CPU kernel takes float64 where it took float16

# IPU_EMULATOR_FLOAT16=fast: every float16 op computed in float32 by the host's own kernels,
# at about float32's speed (float64 is several times slower on a CPU), its float16 results
# then depending on the order those kernels add in (docs/fidelity.md).
SPEED_SETTING = "IPU_EMULATOR_FLOAT16"


def computes_in_float32() -> bool:
    """Whether ``IPU_EMULATOR_FLOAT16`` asks for float32 (``fast``); anything but ``exact``
    (the default) or ``fast`` is refused with the accepted values."""
    setting = os.environ.get(SPEED_SETTING, "exact")
    if setting not in ("exact", "fast"):
        raise ValueError("%s=%r: use 'exact' (the default: the same float16 bits on every "
                         "host) or 'fast' (computed in float32)" % (SPEED_SETTING, setting))
    return setting == "fast"


def _compute_dtype(op):
    """float64 where the op's CPU kernel has a float64 version for each of its float16 type
    attributes (matmuls, convolutions, reductions, softmax...), else float32; float32 with
    ``IPU_EMULATOR_FLOAT16=fast``."""
    if computes_in_float32():
        return tf.float32
    if op.type not in _HAS_FLOAT64_KERNEL:
        half = set(_half_attrs(op))
        _HAS_FLOAT64_KERNEL[op.type] = any(
            all(types_pb2.DT_DOUBLE in c.allowed_values.list.type
                for c in kernel.constraint if c.name in half)
            for kernel in kernels.get_registered_kernels_for_op(op.type).kernel
            if kernel.device_type == "CPU")
    return tf.float64 if _HAS_FLOAT64_KERNEL[op.type] else tf.float32


def _wide_attrs(op, dtype):
    wide = dtype.as_datatype_enum
    attrs = {}
    for name, value in op.node_def.attr.items():
        new = attr_value_pb2.AttrValue()
        new.CopyFrom(value)
        if new.type == types_pb2.DT_HALF:
            new.type = wide
        if types_pb2.DT_HALF in new.list.type:
            types = [wide if t == types_pb2.DT_HALF else t
                     for t in new.list.type]
            del new.list.type[:]
            new.list.type.extend(types)
        attrs[name] = new
    attrs[MARK_ATTR] = attr_value_pb2.AttrValue(b=True)
    return attrs


def _private_attrs(op):
    """The op's placement attributes (sharding, XLA scope, colocation) for its new ops."""
    attrs = {name: value for name, value in op.node_def.attr.items()
             if name.startswith("_") and not name.startswith("_ipu_emulator_")}
    attrs[MARK_ATTR] = attr_value_pb2.AttrValue(b=True)
    return attrs


def _cast(graph, tensor, dtype, name, attrs):
    op = graph.create_op(
        "Cast", [tensor], [dtype], name=name,
        attrs=dict(attrs, SrcT=attr_value_pb2.AttrValue(type=tensor.dtype.as_datatype_enum),
                   DstT=attr_value_pb2.AttrValue(type=dtype.as_datatype_enum),
                   Truncate=attr_value_pb2.AttrValue(b=False)))
    return op.outputs[0]


def _wide_inputs(op, casts, dtype):
    """``op``'s inputs with each float16 one cast to ``dtype``: one cast per tensor and
    type, shared by the rewritten ops that read it in the same graph and loop, on the same
    device and shard."""
    graph = op.graph
    placement = _private_attrs(op)
    inputs = []
    for i, tensor in enumerate(op.inputs):
        if tensor.dtype != tf.float16:
            inputs.append(tensor)
            continue
        key = (id(graph), tensor.name, id(op._get_control_flow_context()), op.device,  # pylint: disable=protected-access
               str(placement.get("_XlaSharding", "")), dtype)
        if key not in casts:
            casts[key] = _cast(graph, tensor, dtype, op.name + "/wide_in_%d" % i, placement)
        inputs.append(casts[key])
    return inputs


def _rewrite(op, casts, rounding):
    """Build ``op`` again in float64 (or float32) beside it and move its consumers to the
    new results."""
    graph = op.graph
    placement = _private_attrs(op)
    wide = _compute_dtype(op)
    inputs = _wide_inputs(op, casts, wide)
    dtypes = [wide if t.dtype == tf.float16 else t.dtype for t in op.outputs]
    new_op = graph.create_op(op.type, inputs, dtypes, name=op.name + "/wide",
                             attrs=_wide_attrs(op, wide), op_def=op.op_def)
    results = []
    for i, (old, new) in enumerate(zip(op.outputs, new_op.outputs)):
        if old.dtype == tf.float16:
            new = rounding(graph, new, op.name + "/f16_out_%d" % i, placement)
        results.append(new)
    _move_consumers(op, results)
    return results


def _move_consumers(op, results):
    """``op``'s consumers read ``results`` instead of its outputs; ops that waited for it
    wait for the ops that made them."""
    for old, new in zip(op.outputs, results):
        for consumer in list(old.consumers()):
            for index, tensor in enumerate(consumer.inputs):
                if tensor is old:
                    consumer._update_input(index, new)  # pylint: disable=protected-access
    _move_control_dependents(op, [r.op for r in results])


def _move_control_dependents(op, replacements):
    """Ops that waited for ``op`` wait for the ops ``replacements`` instead."""
    for dependent in list(op._control_outputs):  # pylint: disable=protected-access
        kept = [c for c in dependent.control_inputs if c is not op]
        dependent._remove_all_control_inputs()  # pylint: disable=protected-access
        dependent._add_control_inputs(kept + replacements)  # pylint: disable=protected-access


def round_to_nearest(graph, tensor, name, attrs):
    """float32 or float64 -> float16, to nearest (ties to even): what the IPU does by
    default.  TensorFlow casts float64 to float16 through float32, as the IPU's float32
    partials go (a test pins it)."""
    return _cast(graph, tensor, tf.float16, name, attrs)


def stochastic_round(graph, tensor, name, attrs):
    """float32 or float64 -> float16 rounded stochastically: up with probability equal to
    the distance from the float16 value below, in float16 steps, so the rounding is unbiased
    on average (``floating_point_behaviour.esr``)."""
    with graph._attr_scope(_with_flag(attrs, ROUNDING_ATTR)), tf.name_scope(name):  # pylint: disable=protected-access
        tensor = tf.cast(tensor, tf.float32)   # a float64 result: the IPU's float32 partial
        # A fresh seed at each run: runs differ, and a graph seed (--seed) repeats them.
        # (int32: the IPU has no uint32 tensors, and the emulator checks.)
        seed = tf.random.uniform([], -2 ** 31, 2 ** 31 - 1, dtype=tf.int32)
        # The concrete function, called as such: ``tf.function``'s own call would put the
        # call in an XLA control-flow context, outside the loop it belongs to.
        fused = _stochastic_round_fused.get_concrete_function(
            tf.TensorSpec(None, tf.float32), tf.TensorSpec([], tf.int32))
        return fused(tensor, seed)


@tf.function(jit_compile=True, autograph=False)
def _stochastic_round_fused(tensor, seed):
    """The rounding as one XLA loop over the elements: about a tenth of the time of the
    dozen TensorFlow kernels it is made of, each a pass over memory."""
    noise = _hashed_bits(tf.shape(tensor), seed)
    return tf.cast(_stochastic_round_values(tensor, noise), tf.float16)


def _hashed_bits(shape, seed):
    """13 random bits an element: a counter-based generator (a 32-bit integer hash, Chris
    Wellons's "lowbias32", of the element's index and ``seed``).  On this CPU, XLA's own
    random number generators took a hundred times as long as TensorFlow's, and TensorFlow's
    alone took about four times as long as this whole rounding."""
    index = tf.reshape(tf.range(tf.reduce_prod(shape), dtype=tf.int32), shape)
    bits = tf.bitcast(index * -1640531527 + seed, tf.uint32)  # -1640531527: 0x9E3779B9
    for shift, factor in ((16, 0x7FEB352D), (15, 0x846CA68B)):
        bits = tf.bitwise.bitwise_xor(bits, tf.bitwise.right_shift(bits, shift))
        bits = bits * tf.constant(factor, tf.uint32)
    bits = tf.bitwise.bitwise_xor(bits, tf.bitwise.right_shift(bits, 16))
    return tf.bitcast(tf.bitwise.right_shift(bits, 19), tf.int32)  # the 13 best-mixed bits


def _stochastic_round_values(tensor, noise):
    """``tensor`` (float32) rounded stochastically to float16 values, still float32.

    A normal float16 value keeps 10 of float32's 23 mantissa bits: ``noise``, a random
    13-bit integer, is added to the 13 dropped bits of the magnitude before they are cut
    (a carry rounds up).  Subnormal float16 values (below 2**-14) lie on a fixed 2**-24
    grid; shifted up by 2**-14 into the lowest normal binade, which has the same grid, they
    round by the same cut, and the shift is taken off again (exact: float32 resolves
    2**-37 there, the noise's own resolution).  inf keeps its bits; nan stays nan."""
    magnitude = tf.abs(tensor)
    shift = tf.where(magnitude < 2.0 ** -14, 2.0 ** -14, 0.0)
    bits = tf.bitcast(magnitude + shift, tf.int32) + noise
    rounded = tf.bitcast(tf.bitwise.bitwise_and(bits, ~0x1FFF), tf.float32) - shift
    return tf.sign(tensor) * rounded


STOCHASTIC_ROUNDING_ATTR = "_ipu_emulator_stochastic_rounding"


def _stochastic_rounding_of(op, default):
    """``scopes.stochastic_rounding(override)`` around an op overrides the system's esr."""
    try:
        return bool(op.get_attr(STOCHASTIC_ROUNDING_ATTR))
    except ValueError:
        return default


def _sgd(var, alpha, delta, **_):
    return {"var": var - alpha * delta}


def _momentum(var, accum, lr, grad, momentum, use_nesterov, **_):
    accum = accum * momentum + grad
    step = grad * lr + accum * momentum * lr if use_nesterov else lr * accum
    return {"var": var - step, "accum": accum}


def _keras_momentum(var, accum, lr, grad, momentum, use_nesterov, **_):
    accum = accum * momentum - lr * grad
    step = accum * momentum - lr * grad if use_nesterov else accum
    return {"var": var + step, "accum": accum}


def _adam(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad,
          use_nesterov, **_):
    lr_t = lr * tf.sqrt(1 - beta2_power) / (1 - beta1_power)
    m = m + (grad - m) * (1 - beta1)
    v = v + (tf.square(grad) - v) * (1 - beta2)
    direction = grad * (1 - beta1) + beta1 * m if use_nesterov else m
    return {"var": var - direction * lr_t / (epsilon + tf.sqrt(v)), "m": m, "v": v}


def _assign_add(resource, value, **_):
    return {"resource": resource + value}


def _assign_sub(resource, value, **_):
    return {"resource": resource - value}


# The weight updates of float16 variables computed wide, as TensorFlow's kernels define them
# (training_ops): op type -> the new value of each variable the op updates, by input name.
_UPDATES = {"ResourceApplyGradientDescent": _sgd, "ResourceApplyMomentum": _momentum,
            "ResourceApplyKerasMomentum": _keras_momentum, "ResourceApplyAdam": _adam}
# Additions to a float16 variable (a gradient accumulator's): TensorFlow's kernel rounds
# each to nearest exactly as the rewrite would, so they are rewritten only to round
# stochastically.
_ACCUMULATIONS = {"AssignAddVariableOp": _assign_add, "AssignSubVariableOp": _assign_sub}


def _float16_update(op, stochastic) -> bool:
    if op.type in _UPDATES:
        return op.get_attr("T") == tf.float16
    return (op.type in _ACCUMULATIONS and op.get_attr("dtype") == tf.float16
            and _stochastic_rounding_of(op, stochastic))


def _rewrite_update(op, _, rounding):
    """A float16 variable's weight update (``_UPDATES``) or accumulation
    (``_ACCUMULATIONS``), in float64 (float32 with ``IPU_EMULATOR_FLOAT16=fast``): each
    variable it updates is read, its new value rounded to float16 as the IPU's weight update
    does (stochastically when esr is on) and written back."""
    graph = op.graph
    placement = _private_attrs(op)
    wide = tf.float32 if computes_in_float32() else tf.float64
    names = [arg.name for arg in op.op_def.input_arg]
    with tf.name_scope(op.name + "/wide"):
        values, handles = {}, {}
        with graph._attr_scope(_with_flag(placement, ROUNDING_ATTR)):  # pylint: disable=protected-access
            for name, tensor in zip(names, op.inputs):
                if tensor.dtype == tf.resource:
                    handles[name] = tensor
                    tensor = tf.raw_ops.ReadVariableOp(resource=tensor, dtype=tf.float16)
                values[name] = tf.cast(tensor, wide)
        accumulation = op.type in _ACCUMULATIONS
        with graph._attr_scope(_with_flag(  # pylint: disable=protected-access
                placement, ACCUMULATION_ATTR if accumulation else WEIGHT_UPDATE_ATTR)):
            update = (_ACCUMULATIONS if accumulation else _UPDATES)[op.type]
            updated = update(use_nesterov=_attr(op, "use_nesterov", False), **values)
    assigns = []
    for name, value in updated.items():
        new_value = rounding(graph, value, "%s/f16_%s" % (op.name, name), placement)
        with graph._attr_scope(placement):  # pylint: disable=protected-access
            assigns.append(tf.raw_ops.AssignVariableOp(
                resource=handles[name], value=new_value, name="%s/assign_%s" % (op.name, name)))
    _move_control_dependents(op, assigns)
    return []


def _attr(op, name, default):
    try:
        return op.get_attr(name)
    except ValueError:
        return default


_BATCH_NORMS = frozenset({"FusedBatchNormV2", "FusedBatchNormV3"})
_BATCH_NORM_GRADS = frozenset({"FusedBatchNormGradV2", "FusedBatchNormGradV3"})


def _batch_norm_layout(op, x):
    """The axes a batch norm reduces over, and ``f(per-channel vector)`` shaped to
    broadcast against ``x``."""
    if op.get_attr("data_format") in (b"NCHW", "NCHW", b"NCDHW", "NCDHW"):
        axes = [0] + list(range(2, x.shape.rank))
        return axes, lambda c: tf.reshape(c, [1, -1] + [1] * (x.shape.rank - 2))
    return list(range(x.shape.rank - 1)), lambda c: c


def _batch_statistics(x, axes, channel):
    mean = tf.reduce_mean(x, axes)
    centred = x - channel(mean)
    return mean, centred, tf.reduce_mean(tf.square(centred), axes)


def _rewrite_batch_norm(op, casts, rounding):
    """A fused batch norm of float16 data (whose CPU kernel has no float64 version) written
    out in float64: the batch's mean and variance, the normalized output rounded to float16,
    and the statistics the op returns in float32, as TensorFlow's kernel does."""
    graph = op.graph
    placement = _private_attrs(op)
    inputs = _wide_inputs(op, casts, tf.float64)
    epsilon = op.get_attr("epsilon")
    with tf.name_scope(op.name + "/wide"):
        with graph._attr_scope(_with_flag(placement, ROUNDING_ATTR)):  # pylint: disable=protected-access
            x, scale, offset, mean_in, variance_in = (tf.cast(t, tf.float64) for t in inputs)
            axes, channel = _batch_norm_layout(op, x)
            if op.get_attr("is_training"):
                mean, centred, variance = _batch_statistics(x, axes, channel)
                count = tf.cast(tf.size(x) // tf.size(mean), tf.float64)
                unbiased = variance * count / tf.maximum(count - 1, 1)
                factor = _attr(op, "exponential_avg_factor", 1.0)
                if factor != 1.0:
                    batch_mean = (1 - factor) * mean_in + factor * mean
                    batch_variance = (1 - factor) * variance_in + factor * unbiased
                else:
                    batch_mean, batch_variance = mean, unbiased
            else:
                mean, variance = mean_in, variance_in
                centred = x - channel(mean)
                batch_mean, batch_variance = mean_in, variance_in
            gain = channel(scale * tf.math.rsqrt(variance + epsilon))
        with graph._attr_scope(placement):  # pylint: disable=protected-access
            normalized = centred * gain + channel(offset)   # the op's cost: one result
    y = rounding(graph, normalized, op.name + "/f16_out_0", placement)
    with graph._attr_scope(_with_flag(placement, ROUNDING_ATTR)):  # pylint: disable=protected-access
        statistics = [tf.cast(t, tf.float32) for t in (batch_mean, batch_variance, mean,
                                                       variance)]
        # The gradient's reserve space (V3): unused, as the rewritten gradient recomputes.
        extra = [tf.zeros([0], tf.float32)] * (len(op.outputs) - 5)
    results = [y] + statistics + extra
    _move_consumers(op, results)
    return results


def _rewrite_batch_norm_grad(op, casts, rounding):
    """A fused batch norm's gradient for float16 data, in float64.  In training the batch's
    statistics are computed again from ``x`` (the forward op's reserve space may come from
    an op the rewrite replaced); otherwise the saved mean and variance are the op's inputs."""
    graph = op.graph
    placement = _private_attrs(op)
    inputs = _wide_inputs(op, casts, tf.float64)[:5]
    epsilon = op.get_attr("epsilon")
    with tf.name_scope(op.name + "/wide"):
        with graph._attr_scope(_with_flag(placement, ROUNDING_ATTR)):  # pylint: disable=protected-access
            dy, x, scale, saved_mean, saved_variance = (tf.cast(t, tf.float64) for t in inputs)
            axes, channel = _batch_norm_layout(op, x)
            if op.get_attr("is_training"):
                _, centred, variance = _batch_statistics(x, axes, channel)
            else:
                centred, variance = x - channel(saved_mean), saved_variance
            inverse_std = tf.math.rsqrt(variance + epsilon)
            normalized = centred * channel(inverse_std)
            offset_grad = tf.reduce_sum(dy, axes)
            scale_grad = tf.reduce_sum(dy * normalized, axes)
            if op.get_attr("is_training"):
                count = tf.cast(tf.size(x) // tf.size(inverse_std), tf.float64)
                dy = dy - channel(offset_grad / count) - normalized * channel(scale_grad / count)
        with graph._attr_scope(placement):  # pylint: disable=protected-access
            x_grad = dy * channel(scale * inverse_std)   # the op's cost: one result
    dx = rounding(graph, x_grad, op.name + "/f16_out_0", placement)
    with graph._attr_scope(_with_flag(placement, ROUNDING_ATTR)):  # pylint: disable=protected-access
        grads = [tf.cast(t, tf.float32) for t in (scale_grad, offset_grad)]
        extra = [tf.zeros([0], tf.float32)] * (len(op.outputs) - 3)
    results = [dx] + grads + extra
    _move_consumers(op, results)
    return results


def _rewrite_for(op, stochastic):
    """How ``op`` is rewritten (a batch norm by the host's fused float32 kernel with
    ``IPU_EMULATOR_FLOAT16=fast``, or when its data's rank is unknown)."""
    if _float16_update(op, stochastic):
        return _rewrite_update
    written_out = not computes_in_float32() and op.inputs[0].shape.rank is not None
    if op.type in _BATCH_NORMS and written_out:
        return _rewrite_batch_norm
    if op.type in _BATCH_NORM_GRADS and written_out:
        return _rewrite_batch_norm_grad
    return _rewrite


def compute_wide(ops, rounding=round_to_nearest, stochastic=False, casts=None):
    """Rewrite the float16 ops among ``ops`` (a program's, in creation order) to compute in
    float64 (or float32) and round their results to float16.  Returns ``[(original op, [ops
    made])]``; the originals stay in the graph, unused.  ``casts``: the wide casts of
    float16 tensors made so far, to share with earlier calls."""
    if getattr(_state, "disabled", False):
        return []
    # Not the ops a rewrite made or replaced: a TF2 step traced in a rewriting trace
    # (``computing_traced_ops_wide``) is looked at again by ``settle_function_step``.
    targets = [op for op in ops if not (is_marked(op) or is_replaced(op))
               and (_rewritable(op, stochastic) or _float16_update(op, stochastic))]
    if not targets:
        return []
    graph = targets[0].graph
    replaced = _replaced_ops(graph)
    made = []
    casts = {} if casts is None else casts
    saved_context = graph._get_control_flow_context()  # pylint: disable=protected-access
    try:
        for op in targets:
            first = len(graph.get_operations())
            with graph.as_default(), graph.name_scope(None), tf.device(op.device), \
                    graph.control_dependencies(None):
                graph._set_control_flow_context(op._get_control_flow_context())  # pylint: disable=protected-access
                chosen = (stochastic_round if _stochastic_rounding_of(op, stochastic)
                          else rounding)
                with graph.control_dependencies(op.control_inputs):
                    replaced[op.name] = _rewrite_for(op, stochastic)(op, casts, chosen)
            made.append((op, graph.get_operations()[first:]))
    finally:
        graph._set_control_flow_context(saved_context)  # pylint: disable=protected-access
    return made


def settle_program(program, pipelines=()):
    """Rewrite a just-built program's float16 ops (``compute_wide``) and keep its
    bookkeeping whole: the originals leave ``program.new_ops`` and the ops made join it,
    in a pipeline's stage (``pipelines``: the program's ``programs.PipelineBuild``s) and
    among other replicas' ops as their original was."""
    rewritten = compute_wide(program.new_ops, stochastic=_stochastic_rounding_configured())
    if not rewritten:
        return
    originals = {op for op, _ in rewritten}
    for original, made in rewritten:
        if original in program.other_replica_ops:
            program.other_replica_ops.update(made)
        for build in pipelines:
            stage = build.stage_of_op.get(original.name)
            if stage is not None:
                build.stage_of_op.update((op.name, stage) for op in made)
    program.new_ops = [op for op in program.new_ops if op not in originals] + [
        op for _, made in rewritten for op in made]


@contextlib.contextmanager
def computing_traced_ops_wide():
    """While TensorFlow traces a TF2 program in this context, each float16 op is computed
    wide and rounded to float16 as it is made, in every function graph the trace builds
    (a loop's body too, which is finished before the function around it), through
    TensorFlow's op callbacks: the op's users, made later, read the rounded results."""
    if getattr(_state, "disabled", False):
        yield
        return
    stochastic = _stochastic_rounding_configured()
    casts = {}

    def rewrite_as_made(op_type, inputs, attrs, outputs, op_name=None, graph=None):  # pylint: disable=unused-argument
        if graph is None or not outputs:
            return None  # eager execution, or an op without results (nothing to replace)
        op = outputs[0].op
        if not compute_wide([op], stochastic=stochastic, casts=casts):
            return None
        return _replaced_ops(graph)[op.name]

    op_callbacks.add_op_callback(rewrite_as_made)
    try:
        yield
    finally:
        op_callbacks.remove_op_callback(rewrite_as_made)


def settle_function_step(ops, outputs):
    """Rewrite the float16 ops of one step a TF2 program traced (``ops``: the ops
    ``IPUStrategy.run`` saw its function make, in the function graph being traced), and
    return ``outputs`` (a nested structure) with each tensor of a replaced op swapped for
    the tensor that now stands for it."""
    rewritten = compute_wide(ops, stochastic=_stochastic_rounding_configured())
    if not rewritten:
        return outputs
    replaced = _replaced_ops(rewritten[0][0].graph)

    def current(value):
        if isinstance(value, tf.Tensor) and value.op.name in replaced:
            return replaced[value.op.name][value.value_index]
        return value

    return tf.nest.map_structure(current, outputs)


__all__ = ["compute_wide", "settle_program", "settle_function_step",
           "computing_traced_ops_wide", "is_replaced",
           "disabled", "is_marked", "is_rounding",
           "is_weight_update", "is_accumulation", "round_to_nearest", "stochastic_round", "MARK_ATTR",
           "ROUNDING_ATTR", "WEIGHT_UPDATE_ATTR", "ACCUMULATION_ATTR", "STOCHASTIC_ROUNDING_ATTR", "SPEED_SETTING",
           "computes_in_float32"]
