"""The layer cost model (model_layers, cost_model, builtin_models): layers, stages, numbers by hand."""
import subprocess
import sys

import pytest

from ipu_emulator.sim import builtin_models
from ipu_emulator.sim.builtin_models import builtin_model
from ipu_emulator.sim.cost_model import (StageCost, describe, layer_costs, layer_shapes,
                                         split_stages, stage_costs)
from ipu_emulator.sim.model_layers import (LABEL_BYTES, AveragePool2D, Conv2D, Dense, Flatten,
                                           Input, MaxPool2D, Reshape, SoftmaxCrossEntropy)

B = 32
MLP = builtin_model("tutorial-mlp")
CONVNET = builtin_model("tutorial-convnet")
# (in, out) of the tutorial MLP's dense layers, in order.
MLP_DENSE = [(784, 256), (256, 128), (128, 64), (64, 32), (32, 10)]


def matmul(n, u, batch=B):
    return 2 * batch * n * u


# --- Dense, by hand ------------------------------------------------------------------

def test_dense_shape_and_parameters():
    layer = Dense(256, activation="relu")
    assert layer.output_shape((B, 784)) == (B, 256)
    assert layer.parameter_count((B, 784)) == 784 * 256 + 256
    assert Dense(256, use_bias=False).parameter_count((B, 784)) == 784 * 256


def test_dense_forward_flops_are_matmul_plus_bias_plus_activation():
    # MatMul 2*B*n*u, BiasAdd one per output, Relu one per output (as graph_costs counts).
    assert Dense(256, activation="relu").forward_flops((B, 784)) == (
        matmul(784, 256) + B * 256 + B * 256)
    assert Dense(10).forward_flops((B, 32)) == matmul(32, 10) + B * 10
    assert Dense(10, activation="tanh").forward_flops((B, 32)) == matmul(32, 10) + 5 * B * 10


def test_dense_backward_flops_with_and_without_input_gradient():
    layer = Dense(128, activation="relu")
    # weight gradient + input gradient (two matmuls) + bias gradient + relu gradient
    assert layer.backward_flops((B, 256)) == 2 * matmul(256, 128) + 2 * B * 128
    assert layer.backward_flops((B, 256), input_gradient=False) == (
        matmul(256, 128) + 2 * B * 128)


def test_dense_on_higher_rank_input_works_on_the_last_axis():
    assert Dense(4).output_shape((2, 3, 5)) == (2, 3, 4)
    assert Dense(4).forward_flops((2, 3, 5)) == 2 * 6 * 5 * 4 + 6 * 4


# --- Conv2D, by hand -----------------------------------------------------------------

def test_conv2d_same_padding():
    conv = Conv2D(4, 3)
    assert conv.kernel_size == (3, 3) and conv.strides == (1, 1)
    assert conv.output_shape((2, 8, 8, 3)) == (2, 8, 8, 4)
    assert conv.parameter_count((2, 8, 8, 3)) == 3 * 3 * 3 * 4 + 4
    # graph_costs' test: 2 * (2*8*8*4) * (3*3*3) = 27648 for the Conv2D op; plus BiasAdd.
    assert conv.forward_flops((2, 8, 8, 3)) == 27648 + 2 * 8 * 8 * 4


def test_conv2d_valid_padding_and_strides():
    conv = Conv2D(4, (3, 3), strides=2, padding="VALID")
    assert conv.padding == "valid"
    assert conv.output_shape((2, 8, 8, 3)) == (2, 3, 3, 4)
    assert conv.forward_flops((2, 8, 8, 3)) == 3888 + 2 * 3 * 3 * 4  # graph_costs: 3888
    assert Conv2D(1, 3, strides=2).output_shape((1, 7, 7, 1)) == (1, 4, 4, 1)  # same: ceil


def test_conv2d_backward_is_two_convolutions_or_one():
    conv = Conv2D(8, 3, activation="relu")
    shape = (B, 28, 28, 8)
    core = 2 * (B * 28 * 28 * 8) * (3 * 3 * 8)
    elementwise = 2 * B * 28 * 28 * 8  # bias gradient + relu gradient
    assert conv.forward_flops(shape) == core + elementwise
    assert conv.backward_flops(shape) == 2 * core + elementwise
    assert conv.backward_flops(shape, input_gradient=False) == core + elementwise


# --- the other layers ----------------------------------------------------------------

def test_views_and_input_are_free():
    for layer, shape in [(Flatten(), (B, 28, 28)), (Reshape((28, 28, 1)), (B, 28, 28)),
                         (Input((28, 28)), (B,))]:
        assert layer.forward_flops(shape) == 0
        assert layer.backward_flops(shape) == 0
        assert layer.parameter_count(shape) == 0
    assert Flatten().output_shape((B, 4, 5, 6)) == (B, 120)
    assert Input((28, 28)).output_shape((B,)) == (B, 28, 28)


def test_pooling():
    assert MaxPool2D(2).output_shape((B, 28, 28, 8)) == (B, 14, 14, 8)
    assert MaxPool2D(3, strides=2, padding="same").output_shape((1, 7, 7, 2)) == (1, 4, 4, 2)
    assert AveragePool2D((2, 2)).output_shape((1, 5, 5, 3)) == (1, 2, 2, 3)
    pool = MaxPool2D(2)
    assert pool.forward_flops((B, 28, 28, 8)) == B * 14 * 14 * 8
    assert pool.backward_flops((B, 28, 28, 8)) == B * 28 * 28 * 8
    assert pool.backward_flops((B, 28, 28, 8), input_gradient=False) == 0
    assert (pool.saves_input(), pool.saves_output()) == (True, True)
    average = AveragePool2D(2)
    assert (average.saves_input(), average.saves_output()) == (False, False)


def test_softmax_cross_entropy():
    loss = SoftmaxCrossEntropy()
    assert loss.name == "cel"
    assert loss.output_shape((B, 10)) == ()
    assert loss.forward_flops((B, 10)) == 6 * (B * 10 + B) + B
    assert loss.backward_flops((B, 10)) == B * 10 + B
    assert loss.private_saved_elements((B, 10)) == B * 10


# --- models and shapes ---------------------------------------------------------------

def test_tutorial_mlp_layers_and_shapes():
    shapes = layer_shapes(MLP, B)
    assert [(s.name, s.output_shape) for s in shapes] == [
        ("images", (B, 28, 28)), ("flatten", (B, 784)), ("dense256", (B, 256)),
        ("dense128", (B, 128)), ("dense64", (B, 64)), ("dense32", (B, 32)),
        ("logits", (B, 10)), ("cel", ())]
    activations = [getattr(layer, "activation", None) for layer in MLP]
    assert activations == [None, None, "relu", "relu", "relu", "relu", None, None]


def test_tutorial_mlp_parameter_count_by_hand():
    by_hand = (784 * 256 + 256) + (256 * 128 + 128) + (128 * 64 + 64) + (64 * 32 + 32) + (
        32 * 10 + 10)
    assert by_hand == 244_522
    assert sum(c.parameters for c in layer_costs(MLP, B)) == by_hand


def test_tutorial_convnet_shapes_and_parameters():
    shapes = layer_shapes(CONVNET, B)
    assert [(s.name, s.output_shape) for s in shapes] == [
        ("images", (B, 28, 28)), ("reshape", (B, 28, 28, 1)), ("conv1", (B, 28, 28, 8)),
        ("conv2", (B, 28, 28, 8)), ("flatten", (B, 6272)), ("logits", (B, 10)),
        ("cel", ())]
    by_hand = (3 * 3 * 1 * 8 + 8) + (3 * 3 * 8 * 8 + 8) + (6272 * 10 + 10)
    assert sum(c.parameters for c in layer_costs(CONVNET, B)) == by_hand == 63_394


def test_batch_size_scales_flops_not_parameters():
    small, large = layer_costs(MLP, 8), layer_costs(MLP, 32)
    for a, b in zip(small, large):
        assert b.forward_flops == 4 * a.forward_flops
        assert b.parameters == a.parameters


def test_first_trainable_layer_needs_no_input_gradient():
    by_name = {c.name: c for c in layer_costs(MLP, B)}
    # dense256 only has images (via flatten) before it: backward = forward.
    assert by_name["dense256"].backward_flops == by_name["dense256"].forward_flops
    assert by_name["dense256"].backward_flops == matmul(784, 256) + 2 * B * 256
    # dense128 also sends a gradient back to dense256: two matmuls.
    assert by_name["dense128"].backward_flops == 2 * matmul(256, 128) + 2 * B * 128
    conv = {c.name: c for c in layer_costs(CONVNET, B)}
    assert conv["conv1"].backward_flops == conv["conv1"].forward_flops


def test_whole_model_flops_match_the_tensorflow_graph_count():
    """The totals graph_costs reads off the TF1 graph of the same MLP at batch 32 (checked
    once by hand): forward 15,651,232 FLOPs; backward 31,267,488, of which 12,845,056 is the
    unused input gradient of dense256 that tf.gradients builds and XLA drops."""
    total = layer_costs(MLP, B)
    assert sum(c.forward_flops for c in total) == 15_651_232
    assert sum(c.backward_flops for c in total) == 31_267_488 - matmul(784, 256)


def test_shape_errors():
    with pytest.raises(ValueError, match=r"Reshape 'r' cannot reshape \(28, 28\) \(784 "
                                         r"elements per sample\) to \(27, 27\)"):
        layer_shapes([Input((28, 28)), Reshape((27, 27), name="r")], B)
    with pytest.raises(ValueError, match=r"Conv2D 'c' needs a \(batch, height, width, "
                                         r"channels\) input, got input shape \(32, 784\)"):
        layer_shapes([Input((784,)), Conv2D(8, 3, name="c")], B)
    with pytest.raises(ValueError, match=r"Conv2D 'c': a \(5, 5\) kernel does not fit a 3x3 "
                                         r"input with padding 'valid'"):
        layer_shapes([Input((3, 3, 1)), Conv2D(8, 5, padding="valid", name="c")], B)
    with pytest.raises(ValueError, match=r"SoftmaxCrossEntropy 'cel' needs \(batch, classes\) "
                                         r"logits, got input shape \(32, 28, 28\)"):
        layer_shapes([Input((28, 28)), SoftmaxCrossEntropy()], B)
    with pytest.raises(ValueError, match=r"Dense 'd' needs an input with a batch and a "
                                         r"feature axis, got input shape \(\)"):
        layer_shapes([Input((4,)), Dense(10), SoftmaxCrossEntropy(), Dense(3, name="d")], B)


def test_model_errors():
    with pytest.raises(ValueError, match=r"^a model must start with an Input layer"):
        layer_shapes([Flatten(), Dense(10)], B)
    with pytest.raises(ValueError, match=r"^a model must start with an Input layer"):
        layer_shapes([], B)
    with pytest.raises(ValueError, match=r"^a model has exactly one Input layer"):
        layer_shapes([Input((4,)), Input((4,), name="again")], B)
    with pytest.raises(ValueError, match=r"^layer name 'dense' is used more than once"):
        layer_shapes([Input((4,)), Dense(4), Dense(4)], B)
    with pytest.raises(ValueError, match=r"^batch_size must be a positive integer, got 0"):
        layer_shapes(MLP, 0)
    with pytest.raises(ValueError, match=r"^dtype_bytes must be a positive integer, got 0"):
        layer_costs(MLP, B, dtype_bytes=0)


def test_layer_argument_errors():
    with pytest.raises(ValueError, match=r"^unknown activation 'gelu'; use None or one of: "
                                         r"relu, sigmoid, tanh$"):
        Dense(4, activation="gelu")
    with pytest.raises(ValueError, match=r"^Dense 'dense' units must be a positive integer, "
                                         r"got 0$"):
        Dense(0)
    with pytest.raises(ValueError, match=r"^padding must be 'same' or 'valid', got 'full'$"):
        Conv2D(8, 3, padding="full")
    with pytest.raises(ValueError, match=r"^kernel_size must be an int or a pair of ints, "
                                         r"got \(1, 2, 3\)$"):
        Conv2D(8, (1, 2, 3))
    with pytest.raises(ValueError, match=r"^kernel_size must be an int or a pair of ints, "
                                         r"got None$"):
        Conv2D(8, None)
    with pytest.raises(ValueError, match=r"^strides must be a positive integer, got 0$"):
        Conv2D(8, 3, strides=0)
    with pytest.raises(ValueError, match=r"^Input 'input' dimension must be a positive "
                                         r"integer, got -1$"):
        Input((28, -1))


def test_layers_are_frozen_and_hashable():
    layer = Dense(4, name="d")
    with pytest.raises(AttributeError):
        layer.units = 5
    assert len({Dense(4, name="d"), Dense(4, name="d")}) == 1


def test_builtin_models():
    assert set(builtin_models.MODELS) == {"tutorial-mlp", "tutorial-convnet", "tutorial3-mlp"}
    assert builtin_model("tutorial-mlp") is builtin_models.MODELS["tutorial-mlp"]
    with pytest.raises(ValueError, match=r"^unknown model 'resnet'; the built-in models are: "
                                         r"tutorial-convnet, tutorial-mlp, tutorial3-mlp$"):
        builtin_model("resnet")


def test_describe_lists_every_layer_and_totals():
    table = describe(MLP, B).splitlines()
    assert table[0].split() == ["layer", "output", "shape", "params", "fwd", "FLOPs", "bwd",
                                "FLOPs"]
    assert [row.split()[0] for row in table[1:]] == [layer.name for layer in MLP] + ["total"]
    assert table[-1].split()[1] == "244,522"


# --- splits: tutorial step 4's semantics -----------------------------------------------

def test_the_tutorials_default_split_gives_its_two_stages():
    # Step 4 prints: "0. flatten-dense256-dense128-dense64" and "1. dense32-logits-cel".
    assert split_stages(MLP, builtin_models.TUTORIAL_MLP_SPLITS) == (
        ("flatten", "dense256", "dense128", "dense64"), ("dense32", "logits", "cel"))
    stages = stage_costs(MLP, ["dense32"], batch_size=B)
    assert [(s.name, s.layers) for s in stages] == [
        ("stage0", ("flatten", "dense256", "dense128", "dense64")),
        ("stage1", ("dense32", "logits", "cel"))]
    assert all(isinstance(s, StageCost) for s in stages)


def test_more_splits_more_stages():
    assert split_stages(MLP, ["dense128", "dense64", "dense32"]) == (
        ("flatten", "dense256"), ("dense128",), ("dense64",), ("dense32", "logits", "cel"))
    assert split_stages(MLP, "dense128") == (
        ("flatten", "dense256"), ("dense128", "dense64", "dense32", "logits", "cel"))
    assert split_stages(MLP, []) == (tuple(layer.name for layer in MLP[1:]),)
    assert split_stages(MLP, ["cel"])[-1] == ("cel",)


@pytest.mark.parametrize("splits, message", [
    (["dense99"], r"^unknown split layer 'dense99'; a split names the first layer of the next "
                  r"stage, one of: flatten, dense256, dense128, dense64, dense32, logits, cel$"),
    (["images"], r"^unknown split layer 'images'"),
    (["dense32", "dense32"], r"^split layer 'dense32' is given more than once; each split "
                             r"starts a new stage, so a repeat would leave a stage empty$"),
    (["dense64", "dense32", "dense64"], r"^split layer 'dense64' is given more than once"),
    (["dense32", "dense128"], r"^splits must follow the layer order of the model: 'dense128' "
                              r"comes before 'dense32'$"),
    (["flatten"], r"^split 'flatten' would leave stage 0 empty: a split names the first layer "
                  r"of the next stage, and 'flatten' is the model's first layer$"),
])
def test_split_errors(splits, message):
    with pytest.raises(ValueError, match=message):
        stage_costs(MLP, splits, batch_size=B)


def test_unknown_optimizer():
    with pytest.raises(ValueError, match=r"^unknown optimizer 'rmsprop'; use one of: sgd, "
                                         r"momentum, adam$"):
        stage_costs(MLP, ["dense32"], batch_size=B, optimizer="rmsprop")


# --- per-stage costs -----------------------------------------------------------------

def stage_pair(**options):
    return stage_costs(MLP, ["dense32"], batch_size=B, **options)


def test_stage_flops_and_parameters_by_hand():
    first, second = stage_pair()
    relu_bias = 2 * B  # per unit: BiasAdd + Relu forward, BiasAddGrad + ReluGrad backward
    assert first.forward_flops == sum(matmul(n, u) + relu_bias * u for n, u in MLP_DENSE[:3])
    assert first.backward_flops == (matmul(784, 256) + relu_bias * 256
                                    + 2 * matmul(256, 128) + relu_bias * 128
                                    + 2 * matmul(128, 64) + relu_bias * 64)
    loss_forward, loss_backward = 6 * (B * 10 + B) + B, B * 10 + B
    assert second.forward_flops == (matmul(64, 32) + relu_bias * 32 + matmul(32, 10) + B * 10
                                    + loss_forward)
    assert second.backward_flops == (2 * matmul(64, 32) + relu_bias * 32
                                     + 2 * matmul(32, 10) + B * 10 + loss_backward)
    assert first.parameter_bytes == 4 * (200_960 + 32_896 + 8_256)
    assert second.parameter_bytes == 4 * (2_080 + 330)
    assert first.weight_update_flops == 2 * (200_960 + 32_896 + 8_256)  # SGD: 2 per parameter


def test_stages_add_up_to_the_whole_model():
    whole = stage_costs(MLP, [], batch_size=B)[0]
    parts = stage_costs(MLP, ["dense128", "dense64", "dense32"], batch_size=B)
    for field in ("forward_flops", "backward_flops", "weight_update_flops",
                  "forward_bytes_accessed", "backward_bytes_accessed", "parameter_bytes"):
        assert sum(getattr(p, field) for p in parts) == getattr(whole, field), field


def test_input_and_output_bytes():
    first, second = stage_pair()
    images, labels = B * 784 * 4, B * LABEL_BYTES
    assert first.input_bytes == images + labels
    # dense64's activations, and the labels travel along to the stage with the loss.
    assert first.output_bytes == B * 64 * 4 + labels
    assert second.input_bytes == first.output_bytes
    assert second.output_bytes == 0
    half = stage_pair(dtype_bytes=2)[0]
    assert half.input_bytes == B * 784 * 2 + labels
    assert half.parameter_bytes == first.parameter_bytes // 2


def test_a_model_without_a_loss_moves_no_labels():
    features = [Input((16,)), Dense(8, activation="relu", name="a"), Dense(4, name="b")]
    first, second = stage_costs(features, ["b"], batch_size=2)
    assert (first.input_bytes, first.output_bytes) == (4 * 2 * 16, 4 * 2 * 8)
    assert second.input_bytes == first.output_bytes


def test_activation_bytes_count_each_kept_tensor_once():
    first, second = stage_pair()
    # Stage 0 keeps the images (dense256's input, via the flatten view) and each relu
    # output (it is both the relu's mask and the next dense layer's input).
    assert first.activation_bytes == 4 * B * (784 + 256 + 128 + 64)
    # Stage 1: dense64's output (its input), dense32's output, the loss's saved gradient.
    assert second.activation_bytes == 4 * B * (64 + 32 + 10)
    conv = stage_costs(CONVNET, [], batch_size=B)[0]
    assert conv.activation_bytes == 4 * B * (784 + 6272 + 6272 + 10)


def test_recompute_keeps_only_the_stage_input_and_recomputes_the_forward():
    plain, recomputed = stage_pair(), stage_pair(recompute=True)
    assert recomputed[0].activation_bytes == 4 * B * 784 < plain[0].activation_bytes
    # The loss stage also keeps the labels, which the recomputed loss reads again.
    assert recomputed[1].activation_bytes == 4 * B * 64 + B * LABEL_BYTES
    assert recomputed[1].activation_bytes < plain[1].activation_bytes
    for p, r in zip(plain, recomputed):
        assert r.backward_flops == p.backward_flops + p.forward_flops
        assert r.backward_bytes_accessed == p.backward_bytes_accessed + p.forward_bytes_accessed
        assert (r.forward_flops, r.parameter_bytes) == (p.forward_flops, p.parameter_bytes)


@pytest.mark.parametrize("optimizer, state_copies, flops_per_parameter", [
    ("sgd", 0, 2), ("momentum", 1, 4), ("adam", 2, 12)])
def test_optimizer_state_and_update_cost(optimizer, state_copies, flops_per_parameter):
    for stage in stage_pair(optimizer=optimizer):
        assert stage.optimizer_state_bytes == state_copies * stage.parameter_bytes
        assert stage.weight_update_flops == flops_per_parameter * stage.parameter_bytes // 4


def test_bytes_accessed_of_a_dense_layer():
    model = [Input((8,)), Dense(4, activation="relu", name="a"), Dense(2, name="b")]
    a, b = stage_costs(model, ["b"], batch_size=2)
    # forward: input + output + weights; a's backward: dY, saved X, saved Y, dW (no dX).
    assert a.forward_bytes_accessed == 4 * (2 * 8 + 2 * 4 + 36)
    assert a.backward_bytes_accessed == 4 * (2 * 4 + 2 * 8 + 2 * 4 + 36)
    # b also reads W and writes dX for a.
    assert b.backward_bytes_accessed == 4 * (2 * 2 + 2 * 4 + 10 + 8 + 2 * 4)


# --- purity and examples -------------------------------------------------------------

def test_costs_never_imports_tensorflow():
    probe = ("import sys, ipu_emulator.sim.cost_model as c, ipu_emulator.sim.builtin_models as m; "
             "c.stage_costs(m.builtin_model('tutorial-mlp'), ['dense32'], 32); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in "
             "('tensorflow', 'keras', 'tf_keras')))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True)
    assert result.stdout.strip() == "[]"

