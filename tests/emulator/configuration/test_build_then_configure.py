"""Programs built before the IPU system is configured (the pipelining tutorial's layout).

Graphcore's scripts often build the whole model and configure the IPUs only just before
opening the session; the SDK compiles a program at its first run, so the order never
mattered there.  Here the shards still land on their own devices, pipelines of 2 and 4
stages train under every schedule with the same losses as when configured first, and the
SDK's errors still come when the counts really do not fit.
"""
import re

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu, record
from tests.support.child_python import ROOT, run_emulator
from tests.support.ipu_systems import configure_ipus

LAYOUT = ROOT / "tests" / "layouts" / "pipelining_tutorial_layout.py"


X = np.random.RandomState(0).randn(4, 3).astype(np.float32)


def two_shard_model(x):
    with ipu.scopes.ipu_shard(0):
        w1 = tf.compat.v1.get_variable("w1", [3, 5], initializer=tf.compat.v1.constant_initializer(
            np.linspace(-1, 1, 15).reshape(3, 5)))
        hidden = tf.nn.relu(tf.matmul(x, w1))
    with ipu.scopes.ipu_shard(1):
        w2 = tf.compat.v1.get_variable("w2", [5, 1], initializer=tf.compat.v1.constant_initializer(
            np.linspace(-1, 1, 5).reshape(5, 1)))
        loss = tf.reduce_mean(tf.square(tf.matmul(hidden, w2)))
        train = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    with tf.control_dependencies([train]):
        return tf.identity(loss)


def devices_ops_ran_on(sess, fetch, feed_dict):
    metadata = tf.compat.v1.RunMetadata()
    result = sess.run(fetch, feed_dict, options=tf.compat.v1.RunOptions(
        trace_level=tf.compat.v1.RunOptions.FULL_TRACE), run_metadata=metadata)
    ran_on = {}
    for stats in metadata.step_stats.dev_stats:
        for node in stats.node_stats:
            ran_on.setdefault(node.node_name, set()).add(stats.device.split("/")[-1])
    return result, ran_on


def train_two_shards(graph, configure_first):
    if configure_first:
        configure_ipus(2)
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 3])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            [loss] = ipu.ipu_compiler.compile(two_shard_model, [x])
        if not configure_first:
            configure_ipus(2)
        with tf.compat.v1.Session(graph=graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            first, ran_on = devices_ops_ran_on(sess, loss, {x: X})
            losses = [first] + [sess.run(loss, {x: X * k}) for k in (0.5, 2.0)]
    return losses, ran_on


def test_shards_built_before_configuring_run_on_their_own_devices():
    losses, ran_on = train_two_shards(tf.Graph(), configure_first=False)
    assert ran_on["MatMul"] == {"device:CPU:0"}
    assert ran_on["MatMul_1"] == {"device:CPU:1"}
    # minimize was built in shard 1's scope: the gradients run there (the SDK's rule)
    assert ran_on["gradients/MatMul_grad/MatMul_1"] == {"device:CPU:1"}
    [engine_run] = record.last_runs(1).runs
    assert engine_run.num_ipus == 2 and len(engine_run.stages) == 2
    configured_first, _ = train_two_shards(tf.Graph(), configure_first=True)
    np.testing.assert_array_equal(losses, configured_first)


def test_shards_built_before_configuring_too_few_ipus_fail_with_the_backend_message(graph):
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 3])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            [loss] = ipu.ipu_compiler.compile(two_shard_model, [x])
    configure_ipus(1)
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())  # initialisers still run
        with pytest.raises(tf.errors.InternalError) as error:
            sess.run(loss, {x: X})
    assert error.value.message == (
        "Trying to compile a graph for an IPU device with 1 IPUs and 2 shards. The number of "
        "shards needs to divide the number of IPUs.")


def test_a_second_device_built_for_before_configuring_runs_on_its_own_ipus(graph):
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [4, 3])
        with ipu.scopes.ipu_scope("/device:IPU:1"):
            [loss] = ipu.ipu_compiler.compile(two_shard_model, [x])
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = [2, 2]  # /device:IPU:0 and /device:IPU:1, two IPUs each
    cfg.configure_ipu_system()
    with tf.compat.v1.Session(graph=graph) as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        _, ran_on = devices_ops_ran_on(sess, loss, {x: X})
    # The program was built again for IPUs 2 and 3 (the CPU devices after IPU:0's two).
    matmuls = sorted((name, sorted(devices)) for name, devices in ran_on.items()
                     if name.split("/")[-1].startswith("MatMul") and "gradients" not in name)
    assert [devices for _, devices in matmuls] == [["device:CPU:2"], ["device:CPU:3"]]


# --- the tutorial's own layout, through the runner ------------------------------------------

def run_layout(workdir, *args):
    return run_emulator("run", "--tf1", "--seed", "1", "--trace", "trace.json", LAYOUT,
                        "--batches-to-accumulate", "8", *args, cwd=workdir)


def losses_and_lanes(result):
    result.check()
    assert result.stdout.rstrip().splitlines()[-1].startswith("Elapsed")
    losses = [float(m) for m in re.findall(r"Mean loss: ([0-9.]+)", result.stdout)]
    events = result.read_json("trace.json")["traceEvents"]
    lanes = {e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return losses, sorted(lane for lane in lanes if lane.startswith("IPU"))


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """``layout(*args)``: the layout's run with these arguments, each run once in this module
    (``--step 3 --replicas 2`` is asked for by two tests)."""
    runs = {}

    def run(*args):
        if args not in runs:
            runs[args] = run_layout(tmp_path_factory.mktemp("layout"), *args)
        return runs[args]
    return run


@pytest.fixture(scope="module")
def single_ipu_losses(layout):
    losses, lanes = losses_and_lanes(layout("--step", "1"))
    assert len(losses) == 3 and losses[-1] < losses[0] and lanes == ["IPU0"]
    return losses


@pytest.mark.parametrize("args, ipus", [
    (["--step", "2"], 2),
    (["--step", "3", "--schedule", "Grouped"], 2),
    (["--step", "3", "--schedule", "Interleaved"], 2),
    (["--step", "3", "--schedule", "Sequential"], 2),
    (["--step", "4", "--splits", "dense128", "dense64", "dense32", "--schedule", "Grouped"], 4),
    (["--step", "4", "--splits", "dense128", "dense64", "dense32", "--schedule", "Interleaved"], 4),
], ids=["sharded", "grouped-2", "interleaved-2", "sequential-2", "grouped-4", "interleaved-4"])
def test_tutorial_layouts_configured_last_train_like_one_ipu(layout, single_ipu_losses, args, ipus):
    # Sharding and pipelining change where the work runs, not what it computes: every
    # layout gives the single IPU's gradient-accumulation losses, on its own IPUs.
    losses, lanes = losses_and_lanes(layout(*args))
    np.testing.assert_allclose(losses, single_ipu_losses, rtol=1e-5)
    assert lanes == ["IPU%d" % k for k in range(ipus)]


def test_three_stages_configured_last_are_refused_as_by_the_sdk(layout):
    result = layout("--step", "4", "--splits", "dense128", "dense64")
    assert result.returncode != 0
    assert ("FailedPreconditionError: Unsupported number of IPUs requested - could not find "
            "an IPU device with 3 IPUs") in result.stderr


@pytest.fixture(scope="module")
def replicated_single_ipu_losses(layout):
    losses, lanes = losses_and_lanes(layout("--step", "1", "--replicas", "2"))
    assert lanes == ["IPU0", "IPU1"]
    return losses


@pytest.mark.parametrize("step", ["2", "3"], ids=["sharded", "pipelined"])
def test_extra_ipus_replicate_a_program_built_before_configuring(
        layout, replicated_single_ipu_losses, step):
    # Two IPUs' worth of shards or stages on four IPUs: the device replicates the program
    # twice, decided at its first run; both replicas start from the same weights and the
    # CrossReplicaOptimizer keeps them together, so the losses are the data-parallel single
    # IPU's.
    losses, lanes = losses_and_lanes(layout("--step", step, "--replicas", "2"))
    np.testing.assert_allclose(losses, replicated_single_ipu_losses, rtol=1e-5)
    assert lanes == ["IPU0", "IPU1", "IPU2", "IPU3"]


def test_replicas_decided_at_the_first_run_match_configuring_first(layout):
    # The first run is the one test_extra_ipus_replicate_a_program_built_before_configuring
    # [pipelined] checks (run once for both).
    last, _ = losses_and_lanes(layout("--step", "3", "--replicas", "2"))
    first, _ = losses_and_lanes(layout("--step", "3", "--replicas", "2", "--configure-first"))
    assert last == first


# --- replicas decided at the first run, in process -----------------------------------------

def train_replicated_keras_pipeline(configure_first):
    """Two stages of Keras layers made inside the stages, on a 4-IPU device (2 replicas)."""
    from ipu_emulator.runtime import replication
    with tf.Graph().as_default():
        if configure_first:
            configure_ipus(4)
        tf.compat.v1.set_random_seed(1)
        tf.compat.v1.train.get_or_create_global_step()  # a host-side (ref) variable as well
        x = np.random.RandomState(0).randn(64, 6).astype(np.float32)
        y = (np.arange(64) % 3).astype(np.int32)
        data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(4, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        def first(features, labels):
            return tf.keras.layers.Dense(5, activation="relu")(features), labels

        def second(hidden, labels):
            logits = tf.keras.layers.Dense(3)(hidden)
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=logits))

        def optimizer(loss):
            return ipu.pipelining_ops.OptimizerFunctionOutput(
                ipu.optimizers.CrossReplicaOptimizer(
                    tf.compat.v1.train.GradientDescentOptimizer(0.1)), loss)

        def model():
            return ipu.pipelining_ops.pipeline(
                [first, second], 4, repeat_count=2, infeed_queue=infeed,
                outfeed_queue=outfeed, optimizer_function=optimizer, outfeed_loss=True)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            run = ipu.ipu_compiler.compile(model)
        read_losses = outfeed.dequeue()
        if not configure_first:
            configure_ipus(4)
        [kernel] = [v for v in tf.compat.v1.trainable_variables() if "kernel" in v.op.name][:1]
        with tf.compat.v1.Session() as sess:
            sess.run([tf.compat.v1.global_variables_initializer(), infeed.initializer])
            before = sess.run(kernel)
            sess.run(run)
            return before, sess.run(read_losses), replication.replica_values(sess, kernel)


def test_a_pipeline_built_before_configuring_gets_its_replicas_at_the_first_run():
    before, losses, replicas = train_replicated_keras_pipeline(configure_first=False)
    assert losses.shape == (8, 2)  # 4 micro-batches x repeat 2, each for 2 replicas
    assert len(replicas) == 2
    np.testing.assert_array_equal(replicas[0], replicas[1])  # both started from the host's
    assert not np.allclose(replicas[0], before)  # weights and stayed together
    expected = train_replicated_keras_pipeline(configure_first=True)
    np.testing.assert_array_equal(losses, expected[1])
    np.testing.assert_array_equal(replicas[0], expected[2][0])


def test_replica_values_after_a_late_build_are_the_copies_that_ran():
    """Built while a 2-IPU device was configured, run on 4 IPUs: the program is built again
    for 4 replicas, and ``replica_values`` lists those four, not the first build's unused
    copy."""
    from ipu_emulator.runtime import replication
    configure_ipus(2)
    with tf.Graph().as_default():
        data = tf.data.Dataset.from_tensor_slices(X).repeat().batch(2, drop_remainder=True)
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
        dense = tf.keras.layers.Dense(1)

        def step(features):
            loss = tf.reduce_mean(tf.square(dense(features)))
            optimizer = ipu.optimizers.CrossReplicaOptimizer(
                tf.compat.v1.train.GradientDescentOptimizer(0.1))
            return optimizer.minimize(loss)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            run = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(3, step, [], infeed))
        configure_ipus(4)
        with tf.compat.v1.Session() as sess:
            sess.run([tf.compat.v1.global_variables_initializer(), infeed.initializer])
            before = sess.run(dense.kernel)
            sess.run(run)
            replicas = replication.replica_values(sess, dense.kernel)
    assert len(replicas) == 4
    assert not np.allclose(replicas[0], before)
    for copy in replicas[1:]:
        np.testing.assert_array_equal(copy, replicas[0])
