"""The layers a cost model is made of (``Input``, ``Flatten``, ``Reshape``, ``Dense``,
``Conv2D``, pooling, ``SoftmaxCrossEntropy``): each knows its output shape, parameters, FLOPs
and bytes for an input shape.  ``cost_model`` adds them up into layer and stage costs.

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
from typing import Dict, Optional, Tuple, Union

Shape = Tuple[int, ...]

# Class labels are counted as int32 whatever ``dtype_bytes`` is: sparse softmax cross-entropy
# takes integer class ids (int32 is the smallest type it accepts).
LABEL_BYTES = 4


# --- element-wise costs, as runtime/graph_costs.py counts them ------------------------

# Forward FLOPs per element of each activation (graph_costs: Relu 1, Sigmoid/Tanh 4).
ACTIVATION_FLOPS = {"relu": 1, "sigmoid": 4, "tanh": 4}
# ReluGrad, SigmoidGrad, TanhGrad: graph_costs counts one FLOP per element for each.
ACTIVATION_GRADIENT_FLOPS = 1
# The fused SparseSoftmaxCrossEntropyWithLogits op (exp, sum, log, subtract, ...).
SOFTMAX_CROSS_ENTROPY_FLOPS = 6

def elements(shape: Shape) -> int:
    """How many numbers a tensor of this shape holds."""
    return math.prod(shape)


def check_positive_int(value, what: str) -> None:
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
        check_positive_int(item, what)
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

    # The ops each pass runs, counted by kind (``hardware.OP_CYCLES``: on an IPU every op
    # costs a fixed number of cycles however small), and the variables the layer trains.
    def forward_ops(self) -> Dict[str, int]:
        return {}

    def backward_ops(self, input_gradient: bool = True) -> Dict[str, int]:
        return {}

    def variable_count(self) -> int:
        return 0

    # Which of its tensors the backward pass reads.  A tensor kept by two layers (one's
    # output is the next one's input) is stored once; ``stage_costs`` counts it once.
    def saves_input(self) -> bool:
        return False

    def saves_output(self) -> bool:
        return False

    def private_saved_elements(self, input_shape: Shape) -> int:
        """Elements of tensors only this layer keeps for its backward pass."""
        return 0

    def backward_weight_elements(self, input_shape: Shape, input_gradient: bool = True) -> int:
        """Elements of the weights its backward pass reads (the input gradient's kernel)."""
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
            check_positive_int(size, f"Input {self.name!r} dimension")

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
        return (input_shape[0], elements(input_shape[1:]))


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
            check_positive_int(size, f"Reshape {self.name!r} dimension")

    def output_shape(self, input_shape: Shape) -> Shape:
        if elements(input_shape[1:]) != elements(self.shape):
            raise ValueError(f"Reshape {self.name!r} cannot reshape {input_shape[1:]} "
                             f"({elements(input_shape[1:])} elements per sample) to "
                             f"{self.shape} ({elements(self.shape)} elements)")
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
        outputs = elements(self.output_shape(input_shape))
        return self._core_flops(input_shape) + self._elementwise_passes()[0] * outputs

    def backward_flops(self, input_shape: Shape, input_gradient: bool = True) -> float:
        outputs = elements(self.output_shape(input_shape))
        core_gradients = 2 if input_gradient else 1
        return (core_gradients * self._core_flops(input_shape)
                + self._elementwise_passes()[1] * outputs)

    def forward_ops(self) -> Dict[str, int]:
        # the core; the bias add and the activation
        return {"matmul": 1, "elementwise": self.use_bias + (self.activation is not None)}

    def backward_ops(self, input_gradient: bool = True) -> Dict[str, int]:
        # the weight and input gradients; the bias gradient; the activation's gradient
        return {"matmul": 1 + input_gradient, "reduction": int(self.use_bias),
                "elementwise": int(self.activation is not None)}

    def variable_count(self) -> int:
        return 1 + self.use_bias

    def backward_weight_elements(self, input_shape: Shape, input_gradient: bool = True) -> int:
        return self._weight_count(input_shape) if input_gradient else 0

    def saves_input(self) -> bool:
        return True  # the weight gradient multiplies the incoming gradient by the input

    def saves_output(self) -> bool:
        # relu/sigmoid/tanh gradients are computed from the activation's output.
        return self.activation is not None

    def forward_bytes(self, input_shape: Shape, dtype_bytes: int) -> float:
        # Bias and activation are fused into the core op's output, as Poplar does.
        return dtype_bytes * (elements(input_shape) + elements(self.output_shape(input_shape))
                              + self.parameter_count(input_shape))

    def backward_bytes(self, input_shape: Shape, dtype_bytes: int,
                       input_gradient: bool = True) -> float:
        outputs = elements(self.output_shape(input_shape))
        params = self.parameter_count(input_shape)
        read = outputs + elements(input_shape)  # incoming gradient, saved input
        if self.activation is not None:
            read += outputs  # saved output, for the activation gradient
        written = params  # weight and bias gradients
        if input_gradient:
            read += self._weight_count(input_shape)
            written += elements(input_shape)
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
        check_positive_int(self.units, f"Dense {self.name!r} units")
        _check_activation(self.activation)

    def output_shape(self, input_shape: Shape) -> Shape:
        if len(input_shape) < 2:
            raise ValueError(f"Dense {self.name!r} needs an input with a batch and a feature "
                             f"axis, got input shape {input_shape}")
        return input_shape[:-1] + (self.units,)

    def _core_flops(self, input_shape: Shape) -> float:
        rows = elements(input_shape[:-1])
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
        check_positive_int(self.filters, f"Conv2D {self.name!r} filters")
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
        return 2.0 * elements(self.output_shape(input_shape)) * kernel_volume

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
        return float(elements(self.output_shape(input_shape)))  # graph_costs: 1 per output

    def backward_flops(self, input_shape: Shape, input_gradient: bool = True) -> float:
        # The gradient op writes an input-shaped tensor: one FLOP per element of it.
        return float(elements(input_shape)) if input_gradient else 0.0

    def forward_ops(self) -> Dict[str, int]:
        return {"reduction": 1}  # a windowed max or mean

    def backward_ops(self, input_gradient: bool = True) -> Dict[str, int]:
        return {"elementwise": int(input_gradient)}  # scatters the gradient back

    def forward_bytes(self, input_shape: Shape, dtype_bytes: int) -> float:
        return dtype_bytes * (elements(input_shape) + elements(self.output_shape(input_shape)))


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
        outputs = elements(self.output_shape(input_shape))
        # incoming gradient + saved output + saved input read, input gradient written
        return dtype_bytes * (2 * outputs + 2 * elements(input_shape))


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
        return dtype_bytes * (elements(self.output_shape(input_shape)) + elements(input_shape))


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

    def forward_ops(self) -> Dict[str, int]:
        return {"loss": 1, "reduction": 1}  # the fused softmax cross-entropy, the mean

    def backward_ops(self, input_gradient: bool = True) -> Dict[str, int]:
        # the mean's gradient, then the saved gradient scaled by it
        return {"elementwise": 2 if input_gradient else 0}

    def private_saved_elements(self, input_shape: Shape) -> int:
        return elements(input_shape)

    def forward_bytes(self, input_shape: Shape, dtype_bytes: int) -> float:
        batch = input_shape[0]
        # logits read; per-example losses, saved gradient and the mean written; labels read
        return (dtype_bytes * (2 * elements(input_shape) + batch + 1)
                + LABEL_BYTES * batch)

    def backward_bytes(self, input_shape: Shape, dtype_bytes: int,
                       input_gradient: bool = True) -> float:
        if not input_gradient:
            return 0.0
        return dtype_bytes * 2 * elements(input_shape)  # saved gradient read, dlogits written
