"""Per-layer and per-stage costs of a model, for the pipeline simulator (pure Python).

A model is a declarative list of layers (``Input``, ``Flatten``, ``Dense``, ``Conv2D``, ...).
Cutting it at split points gives pipeline stages; each stage's ``StageCost`` says what one
micro-batch costs it: forward/backward FLOPs, the activations it must keep until its backward
pass, the bytes it sends to the next stage, and its weights and optimizer state.

The same ``StageCost`` records can come from a recorded TensorFlow run (the API front measures
each pipeline stage's ops), so a widget's hypothetical model and a real run are simulated
alike.

    >>> model = builtin_model("tutorial-mlp")
    >>> [stage.layers for stage in stage_costs(model, ["dense32"], batch_size=32)]
    [('flatten', 'dense256', 'dense128', 'dense64'), ('dense32', 'logits', 'cel')]

FLOP conventions (the same as ``runtime/graph_costs.py`` counts for a recorded graph, so both
paths agree; shapes include the batch dimension ``B``):

* Dense ``n -> u``: forward ``2*B*n*u`` (MatMul) ``+ B*u`` (BiasAdd) ``+ f*B*u`` (activation:
  ``f`` = 1 for relu, 4 for sigmoid/tanh).  Backward: weight gradient ``2*B*n*u`` + bias
  gradient ``B*u`` + activation gradient ``B*u`` (if any) + input gradient ``2*B*n*u``.
* Conv2D: the same pattern with ``2 * output elements * kh*kw*c_in`` for the convolution and
  for each of its two gradients (Conv2DBackpropFilter/Input cost as much as the forward op).
* Flatten/Reshape: free (views).  Pooling: one FLOP per output element forward, one per input
  element backward (MaxPool/MaxPoolGrad ops in ``graph_costs``).
* SoftmaxCrossEntropy over ``C`` classes: forward ``6*(B*C + B)`` (the fused TensorFlow op
  writes per-example losses and the saved gradient) ``+ B`` (mean); backward ``B*C + B``.
* No input gradient for layers that have no trainable layer before them: nothing upstream
  needs it, so the compiled program does not compute it (XLA drops it as dead code).  The
  first Dense/Conv2D of a model therefore has backward = forward, later ones about 2x.
  (A TF1 graph built by ``tf.gradients`` still *contains* that unused op, so
  ``graph_costs`` counts it; the difference is the first layer's ``2*B*n*u``.)
* Weight update, per parameter: SGD 2, momentum 4, Adam 12 (``graph_costs``' table).

Memory conventions: a layer's forward pass reads its input and weights and writes its output
(bias and activation fused in); its backward pass reads the incoming gradient and the tensors
it saved (and the weights, when it computes the input gradient) and writes the weight and
input gradients.  Kept activations are the tensors backward passes read (Dense/Conv2D: the
input, and the output when there is an activation; MaxPool2D: both; the loss: its ``B*C``
gradient), each tensor stored once however many layers read it.

Pure Python: no TensorFlow import (the simulator layer never imports it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

Shape = Tuple[int, ...]

# Class labels are counted as int32 whatever ``dtype_bytes`` is: sparse softmax cross-entropy
# takes integer class ids (int32 is the smallest type it accepts).
LABEL_BYTES = 4


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


# --- element-wise costs, as runtime/graph_costs.py counts them ------------------------

# Forward FLOPs per element of each activation (graph_costs: Relu 1, Sigmoid/Tanh 4).
ACTIVATION_FLOPS = {"relu": 1, "sigmoid": 4, "tanh": 4}
# ReluGrad, SigmoidGrad, TanhGrad: graph_costs counts one FLOP per element for each.
ACTIVATION_GRADIENT_FLOPS = 1
# The fused SparseSoftmaxCrossEntropyWithLogits op (exp, sum, log, subtract, ...).
SOFTMAX_CROSS_ENTROPY_FLOPS = 6


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


def _elements(shape: Shape) -> int:
    return math.prod(shape)


def _check_positive_int(value, what: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{what} must be a positive integer, got {value!r}")


def _check_activation(activation: Optional[str]) -> None:
    if activation is not None and activation not in ACTIVATION_FLOPS:
        known = ", ".join(sorted(ACTIVATION_FLOPS))
        raise ValueError(f"unknown activation {activation!r}; use None or one of: {known}")


def _pair(value, what: str) -> Tuple[int, int]:
    """``3 -> (3, 3)``; ``(3, 1)`` stays; Keras accepts both for kernel sizes and strides."""
    is_int = isinstance(value, int) and not isinstance(value, bool)
    try:
        pair = (value, value) if is_int else tuple(value)
    except TypeError:
        pair = ()
    if len(pair) != 2:
        raise ValueError(f"{what} must be an int or a pair of ints, got {value!r}")
    for item in pair:
        _check_positive_int(item, what)
    return pair


def _check_padding(padding: str) -> str:
    normalized = str(padding).lower()
    if normalized not in ("same", "valid"):
        raise ValueError(f"padding must be 'same' or 'valid', got {padding!r}")
    return normalized


def _spatial_output(size: int, window: int, stride: int, padding: str) -> int:
    """Output length of a sliding window, as TensorFlow computes it."""
    if padding == "same":
        return -(-size // stride)
    return (size - window) // stride + 1 if size >= window else 0


def _check_rank(layer, input_shape: Shape, rank: int, what: str) -> None:
    if len(input_shape) != rank:
        raise ValueError(f"{type(layer).__name__} {layer.name!r} needs {what}, "
                         f"got input shape {input_shape}")


# --- layers --------------------------------------------------------------------------

class Layer:
    """What every layer knows, from its input shape (which includes the batch dimension).

    Defaults describe a free, parameterless layer; subclasses override what they cost.
    ``input_gradient`` says whether the backward pass must produce the gradient with respect
    to the layer's input, which is needed only when a trainable layer comes before it.
    """

    name: str
    # Flatten and Reshape re-label the same memory: their output *is* their input.
    is_view = False

    def output_shape(self, input_shape: Shape) -> Shape:
        return input_shape

    def parameter_count(self, input_shape: Shape) -> int:
        return 0

    def forward_flops(self, input_shape: Shape) -> float:
        return 0.0

    def backward_flops(self, input_shape: Shape, input_gradient: bool = True) -> float:
        return 0.0

    # Which of its tensors the backward pass reads.  A tensor kept by two layers (one's
    # output is the next one's input) is stored once; ``stage_costs`` counts it once.
    def saves_input(self) -> bool:
        return False

    def saves_output(self) -> bool:
        return False

    def private_saved_elements(self, input_shape: Shape) -> int:
        """Elements of tensors only this layer keeps for its backward pass."""
        return 0

    def forward_bytes(self, input_shape: Shape, dtype_bytes: int) -> float:
        return 0.0

    def backward_bytes(self, input_shape: Shape, dtype_bytes: int,
                       input_gradient: bool = True) -> float:
        return 0.0


@dataclass(frozen=True)
class Input(Layer):
    """The model's input, one sample's ``shape`` (the batch dimension is added later).

    >>> Input((28, 28), name="images").output_shape(())
    (28, 28)
    """

    shape: Tuple[int, ...]
    name: str = "input"

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(self.shape))
        for size in self.shape:
            _check_positive_int(size, f"Input {self.name!r} dimension")

    def output_shape(self, input_shape: Shape) -> Shape:
        return input_shape[:1] + self.shape


@dataclass(frozen=True)
class Flatten(Layer):
    """``(B, d1, d2, ...) -> (B, d1*d2*...)``; free: a view of the same memory.

    >>> Flatten().output_shape((32, 28, 28))
    (32, 784)
    """

    name: str = "flatten"
    is_view = True

    def output_shape(self, input_shape: Shape) -> Shape:
        return (input_shape[0], _elements(input_shape[1:]))


@dataclass(frozen=True)
class Reshape(Layer):
    """``(B, ...) -> (B,) + shape`` with the same number of elements per sample; free.

    >>> Reshape((28, 28, 1)).output_shape((32, 28, 28))
    (32, 28, 28, 1)
    """

    shape: Tuple[int, ...]
    name: str = "reshape"
    is_view = True

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(self.shape))
        for size in self.shape:
            _check_positive_int(size, f"Reshape {self.name!r} dimension")

    def output_shape(self, input_shape: Shape) -> Shape:
        if _elements(input_shape[1:]) != _elements(self.shape):
            raise ValueError(f"Reshape {self.name!r} cannot reshape {input_shape[1:]} "
                             f"({_elements(input_shape[1:])} elements per sample) to "
                             f"{self.shape} ({_elements(self.shape)} elements)")
        return (input_shape[0],) + self.shape


class _WeightedLayer(Layer):
    """Dense and Conv2D: a matmul-like core, a bias and an optional activation.

    Their gradients with respect to the weights and to the input each cost as much as the
    core, so backward is about twice forward, or about equal when no input gradient is needed.
    """

    activation: Optional[str]
    use_bias: bool

    def _core_flops(self, input_shape: Shape) -> float:
        raise NotImplementedError

    def _weight_count(self, input_shape: Shape) -> int:
        raise NotImplementedError

    def _bias_count(self) -> int:
        raise NotImplementedError

    def parameter_count(self, input_shape: Shape) -> int:
        return self._weight_count(input_shape) + (self._bias_count() if self.use_bias else 0)

    def _elementwise_passes(self) -> Tuple[int, int]:
        """(forward, backward) FLOPs per output element for the bias and the activation."""
        forward = (1 if self.use_bias else 0) + ACTIVATION_FLOPS.get(self.activation, 0)
        backward = (1 if self.use_bias else 0) + (
            ACTIVATION_GRADIENT_FLOPS if self.activation else 0)
        return forward, backward

    def forward_flops(self, input_shape: Shape) -> float:
        outputs = _elements(self.output_shape(input_shape))
        return self._core_flops(input_shape) + self._elementwise_passes()[0] * outputs

    def backward_flops(self, input_shape: Shape, input_gradient: bool = True) -> float:
        outputs = _elements(self.output_shape(input_shape))
        core_gradients = 2 if input_gradient else 1
        return (core_gradients * self._core_flops(input_shape)
                + self._elementwise_passes()[1] * outputs)

    def saves_input(self) -> bool:
        return True  # the weight gradient multiplies the incoming gradient by the input

    def saves_output(self) -> bool:
        # relu/sigmoid/tanh gradients are computed from the activation's output.
        return self.activation is not None

    def forward_bytes(self, input_shape: Shape, dtype_bytes: int) -> float:
        # Bias and activation are fused into the core op's output, as Poplar does.
        return dtype_bytes * (_elements(input_shape) + _elements(self.output_shape(input_shape))
                              + self.parameter_count(input_shape))

    def backward_bytes(self, input_shape: Shape, dtype_bytes: int,
                       input_gradient: bool = True) -> float:
        outputs = _elements(self.output_shape(input_shape))
        params = self.parameter_count(input_shape)
        read = outputs + _elements(input_shape)  # incoming gradient, saved input
        if self.activation is not None:
            read += outputs  # saved output, for the activation gradient
        written = params  # weight and bias gradients
        if input_gradient:
            read += self._weight_count(input_shape)
            written += _elements(input_shape)
        return dtype_bytes * (read + written)


@dataclass(frozen=True)
class Dense(_WeightedLayer):
    """A fully connected layer on the last axis: ``(..., n) -> (..., units)``.

    >>> layer = Dense(256, activation="relu")
    >>> layer.output_shape((32, 784)), layer.parameter_count((32, 784))
    ((32, 256), 200960)
    >>> layer.forward_flops((32, 784)) == 2 * 32 * 784 * 256 + 2 * 32 * 256
    True
    """

    units: int
    activation: Optional[str] = None
    name: str = "dense"
    use_bias: bool = True

    def __post_init__(self):
        _check_positive_int(self.units, f"Dense {self.name!r} units")
        _check_activation(self.activation)

    def output_shape(self, input_shape: Shape) -> Shape:
        if len(input_shape) < 2:
            raise ValueError(f"Dense {self.name!r} needs an input with a batch and a feature "
                             f"axis, got input shape {input_shape}")
        return input_shape[:-1] + (self.units,)

    def _core_flops(self, input_shape: Shape) -> float:
        rows = _elements(input_shape[:-1])
        return 2.0 * rows * input_shape[-1] * self.units

    def _weight_count(self, input_shape: Shape) -> int:
        return input_shape[-1] * self.units

    def _bias_count(self) -> int:
        return self.units


@dataclass(frozen=True)
class Conv2D(_WeightedLayer):
    """A 2-D convolution on ``(B, H, W, C)`` (channels last, as Keras' default).

    >>> conv = Conv2D(8, 3, activation="relu")
    >>> conv.output_shape((32, 28, 28, 1)), conv.parameter_count((32, 28, 28, 1))
    ((32, 28, 28, 8), 80)
    >>> Conv2D(4, 3, strides=2, padding="valid").output_shape((2, 8, 8, 3))
    (2, 3, 3, 4)
    """

    filters: int
    kernel_size: Union[int, Tuple[int, int]]
    strides: Union[int, Tuple[int, int]] = 1
    padding: str = "same"
    activation: Optional[str] = None
    name: str = "conv2d"
    use_bias: bool = True

    def __post_init__(self):
        _check_positive_int(self.filters, f"Conv2D {self.name!r} filters")
        object.__setattr__(self, "kernel_size", _pair(self.kernel_size, "kernel_size"))
        object.__setattr__(self, "strides", _pair(self.strides, "strides"))
        object.__setattr__(self, "padding", _check_padding(self.padding))
        _check_activation(self.activation)

    def output_shape(self, input_shape: Shape) -> Shape:
        _check_rank(self, input_shape, 4, "a (batch, height, width, channels) input")
        batch, height, width, _ = input_shape
        out_height = _spatial_output(height, self.kernel_size[0], self.strides[0], self.padding)
        out_width = _spatial_output(width, self.kernel_size[1], self.strides[1], self.padding)
        if out_height <= 0 or out_width <= 0:
            raise ValueError(f"Conv2D {self.name!r}: a {self.kernel_size} kernel does not fit "
                             f"a {height}x{width} input with padding 'valid'")
        return (batch, out_height, out_width, self.filters)

    def _core_flops(self, input_shape: Shape) -> float:
        kernel_volume = self.kernel_size[0] * self.kernel_size[1] * input_shape[-1]
        return 2.0 * _elements(self.output_shape(input_shape)) * kernel_volume

    def _weight_count(self, input_shape: Shape) -> int:
        return self.kernel_size[0] * self.kernel_size[1] * input_shape[-1] * self.filters

    def _bias_count(self) -> int:
        return self.filters


class _Pool2D(Layer):
    """Shared shape logic of the pooling layers (Keras defaults: strides = pool size, valid)."""

    pool_size: Union[int, Tuple[int, int]]
    strides: Optional[Union[int, Tuple[int, int]]]
    padding: str

    def _normalize(self):
        object.__setattr__(self, "pool_size", _pair(self.pool_size, "pool_size"))
        strides = self.pool_size if self.strides is None else self.strides
        object.__setattr__(self, "strides", _pair(strides, "strides"))
        object.__setattr__(self, "padding", _check_padding(self.padding))

    def output_shape(self, input_shape: Shape) -> Shape:
        _check_rank(self, input_shape, 4, "a (batch, height, width, channels) input")
        batch, height, width, channels = input_shape
        out_height = _spatial_output(height, self.pool_size[0], self.strides[0], self.padding)
        out_width = _spatial_output(width, self.pool_size[1], self.strides[1], self.padding)
        if out_height <= 0 or out_width <= 0:
            raise ValueError(f"{type(self).__name__} {self.name!r}: a {self.pool_size} window "
                             f"does not fit a {height}x{width} input with padding 'valid'")
        return (batch, out_height, out_width, channels)

    def forward_flops(self, input_shape: Shape) -> float:
        return float(_elements(self.output_shape(input_shape)))  # graph_costs: 1 per output

    def backward_flops(self, input_shape: Shape, input_gradient: bool = True) -> float:
        # The gradient op writes an input-shaped tensor: one FLOP per element of it.
        return float(_elements(input_shape)) if input_gradient else 0.0

    def forward_bytes(self, input_shape: Shape, dtype_bytes: int) -> float:
        return dtype_bytes * (_elements(input_shape) + _elements(self.output_shape(input_shape)))


@dataclass(frozen=True)
class MaxPool2D(_Pool2D):
    """Max pooling; its gradient needs the saved input and output (to find each maximum).

    >>> MaxPool2D(2).output_shape((32, 28, 28, 8))
    (32, 14, 14, 8)
    """

    pool_size: Union[int, Tuple[int, int]] = 2
    strides: Optional[Union[int, Tuple[int, int]]] = None
    padding: str = "valid"
    name: str = "max_pool2d"

    def __post_init__(self):
        self._normalize()

    def saves_input(self) -> bool:
        return True

    def saves_output(self) -> bool:
        return True

    def backward_bytes(self, input_shape: Shape, dtype_bytes: int,
                       input_gradient: bool = True) -> float:
        if not input_gradient:
            return 0.0
        outputs = _elements(self.output_shape(input_shape))
        # incoming gradient + saved output + saved input read, input gradient written
        return dtype_bytes * (2 * outputs + 2 * _elements(input_shape))


@dataclass(frozen=True)
class AveragePool2D(_Pool2D):
    """Average pooling; its gradient needs only shapes, so it keeps nothing.

    >>> AveragePool2D(2, padding="same").output_shape((1, 5, 5, 3))
    (1, 3, 3, 3)
    """

    pool_size: Union[int, Tuple[int, int]] = 2
    strides: Optional[Union[int, Tuple[int, int]]] = None
    padding: str = "valid"
    name: str = "average_pool2d"

    def __post_init__(self):
        self._normalize()

    def backward_bytes(self, input_shape: Shape, dtype_bytes: int,
                       input_gradient: bool = True) -> float:
        if not input_gradient:
            return 0.0
        return dtype_bytes * (_elements(self.output_shape(input_shape)) + _elements(input_shape))


@dataclass(frozen=True)
class SoftmaxCrossEntropy(Layer):
    """The loss: sparse softmax cross-entropy of ``(B, C)`` logits, averaged to a scalar.

    It reads the micro-batch's integer labels.  TensorFlow's fused op computes the gradient
    (softmax minus one-hot, ``B*C`` values) in the forward pass and keeps it for backward.

    >>> loss = SoftmaxCrossEntropy()
    >>> loss.output_shape((32, 10)), loss.forward_flops((32, 10)), loss.backward_flops((32, 10))
    ((), 2144.0, 352.0)
    """

    name: str = "cel"

    def output_shape(self, input_shape: Shape) -> Shape:
        _check_rank(self, input_shape, 2, "(batch, classes) logits")
        return ()

    def forward_flops(self, input_shape: Shape) -> float:
        batch, classes = input_shape
        # fused op (writes B losses and B*C gradients) + the mean over the batch
        return float(SOFTMAX_CROSS_ENTROPY_FLOPS * (batch * classes + batch) + batch)

    def backward_flops(self, input_shape: Shape, input_gradient: bool = True) -> float:
        if not input_gradient:
            return 0.0
        batch, classes = input_shape
        # mean's gradient (B) + scaling the saved gradient by it (B*C)
        return float(batch * classes + batch)

    def private_saved_elements(self, input_shape: Shape) -> int:
        return _elements(input_shape)

    def forward_bytes(self, input_shape: Shape, dtype_bytes: int) -> float:
        batch = input_shape[0]
        # logits read; per-example losses, saved gradient and the mean written; labels read
        return (dtype_bytes * (2 * _elements(input_shape) + batch + 1)
                + LABEL_BYTES * batch)

    def backward_bytes(self, input_shape: Shape, dtype_bytes: int,
                       input_gradient: bool = True) -> float:
        if not input_gradient:
            return 0.0
        return dtype_bytes * 2 * _elements(input_shape)  # saved gradient read, dlogits written


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

    >>> [s.output_shape for s in layer_shapes(builtin_model("tutorial-mlp"), 32)][:3]
    [(32, 28, 28), (32, 784), (32, 256)]
    """
    _check_positive_int(batch_size, "batch_size")
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


def layer_costs(layers: Sequence[Layer], batch_size: int,
                dtype_bytes: int = 4) -> Tuple[LayerCost, ...]:
    """The cost of every layer, the ``Input`` included (it costs nothing).

    >>> first_dense = layer_costs(builtin_model("tutorial-mlp"), 32)[2]
    >>> first_dense.name, first_dense.backward_flops == first_dense.forward_flops
    ('dense256', True)
    """
    _check_positive_int(dtype_bytes, "dtype_bytes")
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
            saved[tensor_of_input] = _elements(shape)
        if layer.saves_output():
            saved[output_tensor] = _elements(shapes.output_shape)
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
        ))
        trainable_before = trainable_before or parameters > 0
        tensor_of_input = output_tensor
    return tuple(costs)


def describe(layers: Sequence[Layer], batch_size: int) -> str:
    """A printable per-layer table: output shape, parameters, forward and backward FLOPs.

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
        activation_in = dtype_bytes * _elements(shapes[stage[0]].input_shape)
        activation_out = dtype_bytes * _elements(shapes[stage[-1]].output_shape)
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
    if recompute:
        # The forward pass runs again, from the kept stage input, before the backward pass.
        backward_flops += forward_flops
        backward_bytes += forward_bytes
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
    )


# --- built-in models ----------------------------------------------------------------

# The pipelining tutorial's MLP (its step 4 lists: flatten, dense256, dense128, dense64,
# dense32, logits, cel); hidden layers use relu, the logits none; trained with plain SGD.
TUTORIAL_MLP = (
    Input((28, 28), name="images"),
    Flatten(name="flatten"),
    Dense(256, activation="relu", name="dense256"),
    Dense(128, activation="relu", name="dense128"),
    Dense(64, activation="relu", name="dense64"),
    Dense(32, activation="relu", name="dense32"),
    Dense(10, name="logits"),
    SoftmaxCrossEntropy(name="cel"),
)

# Tutorials 1-2's classifier: two separate 3x3 convolutions of 8 filters, then one dense
# layer giving 10 logits (trained there with Adam).
TUTORIAL_CONVNET = (
    Input((28, 28), name="images"),
    Reshape((28, 28, 1), name="reshape"),
    Conv2D(8, 3, padding="same", activation="relu", name="conv1"),
    Conv2D(8, 3, padding="same", activation="relu", name="conv2"),
    Flatten(name="flatten"),
    Dense(10, name="logits"),
    SoftmaxCrossEntropy(name="cel"),
)

MODELS: Dict[str, Tuple[Layer, ...]] = {
    "tutorial-mlp": TUTORIAL_MLP,
    "tutorial-convnet": TUTORIAL_CONVNET,
}

# The pipelining tutorial's default ``--splits``: stage 1 begins at dense32.
TUTORIAL_MLP_SPLITS = ("dense32",)


def builtin_model(name: str) -> Tuple[Layer, ...]:
    """A built-in model's layers (an immutable tuple; build a new tuple to change it).

    >>> [layer.name for layer in builtin_model("tutorial-convnet")]
    ['images', 'reshape', 'conv1', 'conv2', 'flatten', 'logits', 'cel']
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; the built-in models are: "
                         f"{', '.join(sorted(MODELS))}")
    return MODELS[name]
