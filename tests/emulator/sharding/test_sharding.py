"""``ipu.scopes.ipu_shard``: shards run on separate TensorFlow devices, and the backend's
shards -> power-of-two -> replication rule with its errors (Graphcore's TensorFlow user guide:
sharding, replication)."""
import logging

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu, record
from ipu_emulator.runtime import shards


def configure(num_ipus):
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = num_ipus
    cfg.configure_ipu_system()


X = np.random.RandomState(0).randn(4, 3).astype(np.float32)


def two_layer_model(x, shard_first=0, shard_second=1, use_shards=True):
    def scope(index):
        return ipu.scopes.ipu_shard(index) if use_shards else _null()

    with scope(shard_first):
        w1 = tf.compat.v1.get_variable(
            "w1", [3, 5], initializer=tf.compat.v1.constant_initializer(
                np.linspace(-1, 1, 15).reshape(3, 5)))
        hidden = tf.nn.relu(tf.matmul(x, w1))
    with scope(shard_second):
        w2 = tf.compat.v1.get_variable(
            "w2", [5, 1], initializer=tf.compat.v1.constant_initializer(
                np.linspace(-1, 1, 5).reshape(5, 1)))
        loss = tf.reduce_mean(tf.square(tf.matmul(hidden, w2)))
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    return loss, train


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def build(graph, **kwargs):
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 3])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            [loss] = ipu.ipu_compiler.compile(lambda v: two_layer_model(v, **kwargs), [x])
    return x, loss


def test_sessions_get_one_cpu_device_per_configured_ipu(graph):
    configure(4)
    with tf.compat.v1.Session(graph=graph) as sess:
        cpus = [d.name for d in sess.list_devices() if d.device_type == "CPU"]
    assert len(cpus) == 4


def test_a_session_config_asking_for_more_cpus_is_kept(graph):
    configure(2)
    config = tf.compat.v1.ConfigProto(device_count={"CPU": 3})
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        assert sum(d.device_type == "CPU" for d in sess.list_devices()) == 3


def test_shards_really_run_on_separate_devices_and_gradients_in_their_scope(graph):
    configure(2)
    x, loss = build(graph)
    by_name = {op.name: op for op in graph.get_operations()}
    assert shards.shard_of(by_name["MatMul"]) == 0
    assert shards.shard_of(by_name["MatMul_1"]) == 1
    # minimize() ran inside shard 1, so the gradient of shard 0's matmul runs on shard 1 too
    # (the SDK's rule: an op takes the sharding of the scope it is built in).
    assert by_name["gradients/MatMul_grad/MatMul_1"].device.endswith("CPU:1")
    assert by_name["gradients/MatMul_1_grad/MatMul_1"].device.endswith("CPU:1")
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        metadata = tf.compat.v1.RunMetadata()
        sess.run(loss, {x: X}, options=tf.compat.v1.RunOptions(
            trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=metadata)
    ran_on = {stats.device.split("/")[-1]: {n.node_name for n in stats.node_stats}
              for stats in metadata.step_stats.dev_stats}
    assert "MatMul" in ran_on["device:CPU:0"]
    assert "MatMul_1" in ran_on["device:CPU:1"]
    assert "MatMul_1" not in ran_on["device:CPU:0"]
    assert "gradients/MatMul_grad/MatMul_1" in ran_on["device:CPU:1"]


def test_sharded_training_computes_what_the_unsharded_model_does():
    results = []
    for use_shards in (True, False):
        graph = tf.Graph()
        configure(2 if use_shards else 1)
        x, loss = build(graph, use_shards=use_shards)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            results.append([sess.run(loss, {x: X * k}) for k in (1.0, 0.5, 2.0)])
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6)


def test_shard_index_beyond_the_device_fails_at_first_run_with_the_backend_message(graph):
    configure(2)
    x, loss = build(graph, shard_second=2)  # shards 0 and 2 -> 4 shards on 2 IPUs
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with pytest.raises(tf.errors.InternalError) as error:
            sess.run(loss, {x: X})
    assert error.value.message == (
        "Trying to compile a graph for an IPU device with 2 IPUs and 4 shards. The number of "
        "shards needs to divide the number of IPUs.")


def test_sharding_without_a_configured_system_uses_one_ipu_and_fails(graph):
    x, loss = build(graph)
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with pytest.raises(tf.errors.InternalError, match="1 IPUs and 2 shards"):
            sess.run(loss, {x: X})


def test_extra_ipus_replicate_the_sharded_model(graph, caplog):
    configure(4)
    x, loss = build(graph)
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with caplog.at_level(logging.INFO, logger="ipu_emulator"):
            sess.run(loss, {x: X})
    assert "Automatically replicating the TensorFlow model by a factor of 2." in caplog.text


def test_three_ipus_are_refused_when_configuring():
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 3
    with pytest.raises(tf.errors.FailedPreconditionError) as error:
        cfg.configure_ipu_system()
    assert error.value.message.startswith(
        "Unsupported number of IPUs requested - could not find an IPU device with 3 IPUs")


def test_three_shards_need_a_four_ipu_device(graph):
    configure(4)
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 3])

        def model(v):
            outputs = v
            for shard in range(3):
                with ipu.scopes.ipu_shard(shard):
                    outputs = outputs * float(shard + 1)
            return tf.reduce_sum(outputs)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            [total] = ipu.ipu_compiler.compile(model, [x])
    with tf.compat.v1.Session(graph=graph) as sess:
        np.testing.assert_allclose(sess.run(total, {x: X}), X.sum() * 6, rtol=1e-5)
    run = record.last_runs(1).runs[0]
    assert run.num_ipus == 4 and len(run.stages) == 4


def test_a_session_made_before_configuring_is_reported_plainly(graph):
    with graph.as_default():
        early = tf.compat.v1.Session(graph=graph)
    configure(2)
    x, loss = build(graph)
    with early:
        early.run(tf.compat.v1.global_variables_initializer())
        with pytest.raises(tf.errors.FailedPreconditionError, match="Create the tf.Session after"):
            early.run(loss, {x: X})


def test_shard_accepts_a_list_and_the_contrib_era_alias(graph):
    with graph.as_default():
        with ipu.ops.ipu_shard([1, 0]):
            value = tf.constant(1.0) + 1.0
    assert shards.shard_of(value.op) == 1
    with pytest.raises(TypeError):
        with ipu.scopes.ipu_shard("zero"):
            pass


def test_a_sharded_run_records_one_cost_per_shard(graph):
    configure(2)
    x, loss = build(graph)
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        with record.capture() as runs:
            sess.run(loss, {x: X})
    [run] = runs.runs
    first, second = run.stages
    assert run.num_ipus == 2 and run.pipeline is None
    # shard 0 multiplies [4,3]x[3,5], shard 1 [4,5]x[5,1]: 2*4*5*3 and 2*4*1*5 FLOPs
    assert first.forward_flops >= 120 and second.forward_flops >= 40
    assert first.forward_flops > second.forward_flops
    assert first.output_bytes == second.input_bytes == 4 * 5 * 4  # the [4,5] activations
    assert first.weight_update_flops > 0 and second.weight_update_flops > 0


def test_ipu_sharding_helpers_read_and_spread_the_tags(graph):
    configure(2)
    build(graph)
    by_name = {op.name: op for op in graph.get_operations()}
    update = by_name["GradientDescent/update_w1/ResourceApplyGradientDescent"]
    # minimize() ran under ipu_shard(1), but w1's update is colocated with w1 (shard 0)
    assert ipu.sharding.has_attr(by_name["w1"], "_XlaSharding")
    assert ipu.sharding.get_shard_from_colocation(update) == by_name["w1"].get_attr(
        "_XlaSharding")
    assert shards.placed_shard(update) == 0 and update.device.endswith("CPU:0")
    # A gradient built with no shard scope and no ipu_scope is untagged until
    # propagate_sharding gives it its forward op's shard; the gradient minimize built in
    # shard 1's scope keeps that scope's shard.
    with graph.as_default():
        with ipu.scopes.ipu_shard(0):
            value = tf.constant([1.0, 2.0])
            doubled = value * 2.0
        [untagged] = tf.gradients(doubled, [value])
    assert shards.shard_of(untagged.op) is None
    ipu.sharding.propagate_sharding(graph)
    assert shards.shard_of(untagged.op) == 0
    assert shards.shard_of(by_name["gradients/MatMul_grad/MatMul_1"]) == 1
    assert by_name["MatMul"] in ipu.sharding.dependencies([by_name["MatMul_1"]])
