"""lessons.devices_by_layer: a trace's (device, node) pairs grouped by layer (notebook 07)."""
from ipu_emulator.lessons import devices_by_layer
from ipu_emulator.lessons.placement import ACCUMULATORS, layer_of

CPU = "/job:localhost/replica:0/task:0/device:CPU:{}".format


def test_nodes_are_grouped_by_layer_in_the_layers_order():
    nodes = [(CPU(1), "softmax_ce/SparseSoftmaxCrossEntropyWithLogits"),
             (CPU(0), "flatten/Reshape"), (CPU(1), "dense32/dense_3/MatMul"),
             (CPU(0), "optimizer/gradients/dense32/dense_3/MatMul_grad/MatMul"),
             (CPU(1), "optimizer/GradientAccumulationOptimizerV2/a/Assign")]
    assert devices_by_layer(nodes, ["flatten", "dense32", "softmax_ce"]) == {
        "flatten": ["device:CPU:0"], "dense32": ["device:CPU:0", "device:CPU:1"],
        "softmax_ce": ["device:CPU:1"], ACCUMULATORS: ["device:CPU:1"]}


def test_transfers_and_other_nodes_belong_to_no_layer():
    assert layer_of("_SOURCE", ["dense"]) is None
    assert layer_of("dense/_recv_3_0", ["dense"]) is None
    assert layer_of("global_step/read", ["dense"]) is None
    assert layer_of("softmax_ce_1/Mean", ["softmax_ce"]) == "softmax_ce"   # second program
