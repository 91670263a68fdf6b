"""Where gradient ops run under sharding, in the pipelining tutorial's step-2 layout.

The SDK's rule (Graphcore's TensorFlow user guide, sharding): an op takes the sharding of the
``ipu_shard`` scope it is built in, gradient ops included.  The tutorial's step 2 splits the
MNIST MLP at dense32 and builds the optimizer inside the last shard's scope, so "the
gradients are calculated entirely on IPU1"; its gradient accumulators live with the
gradients, while each weight update stays with its variable.  Only
``colocate_gradients_with_ops=True`` puts each gradient (and so its accumulator) with its
forward op, and gradients built outside every shard scope follow their forward ops.
Whatever the placement, the model trains to the same losses as unsharded.
"""
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.keras import layers

from ipu_emulator import ipu
from ipu_emulator.runtime import programs, shards
from tests.support.ipu_systems import configure_ipus
from tests.support.variable_users import handle_users

BATCH, MINI_BATCHES, ITERATIONS, RUNS = 8, 2, 4, 2
_RNG = np.random.RandomState(5)
IMAGES = _RNG.rand(BATCH * ITERATIONS * RUNS, 28, 28).astype(np.float32)
LABELS = (np.arange(BATCH * ITERATIONS * RUNS) % 10).astype(np.int32)
SHARD0_LAYERS = ("dense256", "dense128", "dense64")

# How minimize is built: in the last shard's scope (the tutorial's step 2), the same with
# colocated gradients, after leaving every shard scope, or on one IPU without shards.
IN_SCOPE, COLOCATED, OUTSIDE, UNSHARDED = "in_scope", "colocated", "outside", "unsharded"


# --- the tutorial's model: one function per layer, each passing the learning rate on ------

def _dense(name, units, seed, activation=tf.nn.relu):
    def layer(learning_rate, activations, labels):
        with tf.compat.v1.variable_scope(name):
            dense = layers.Dense(
                units, activation=activation,
                kernel_initializer=tf.keras.initializers.GlorotUniform(seed=seed))
            return learning_rate, dense(activations), labels
    return layer


def layer1_flatten(learning_rate, images, labels):
    with tf.compat.v1.variable_scope("flatten"):
        return learning_rate, layers.Flatten()(images), labels


layer2_dense256 = _dense("dense256", 256, seed=2)
layer3_dense128 = _dense("dense128", 128, seed=3)
layer4_dense64 = _dense("dense64", 64, seed=4)
layer5_dense32 = _dense("dense32", 32, seed=5)
layer6_logits = _dense("logits", 10, seed=6, activation=None)


def layer7_cel(learning_rate, logits, labels):
    with tf.compat.v1.variable_scope("softmax_ce"):
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                     logits=logits)
    with tf.compat.v1.variable_scope("mean"):
        return learning_rate, tf.reduce_mean(per_example)


class _NoShard:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Trainer:
    """The step-2 trainer: a repeat loop whose body trains one mini-batch, compiled under
    ``ipu_scope``; ``placement`` says where ``minimize`` is built."""

    def __init__(self, placement):
        self.placement = placement
        self.graph = tf.Graph()
        with self.graph.as_default():
            self._build()

    def _build(self):
        data = tf.data.Dataset.from_tensor_slices((IMAGES, LABELS)).batch(
            BATCH, drop_remainder=True)
        self.infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        sharded = self.placement != UNSHARDED
        scope = ipu.scopes.ipu_shard if sharded else (lambda index: _NoShard())

        def minimize(learning_rate, loss):
            optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
                tf.compat.v1.train.GradientDescentOptimizer(learning_rate=learning_rate),
                num_mini_batches=MINI_BATCHES)
            return optimizer.minimize(
                loss=loss, colocate_gradients_with_ops=self.placement == COLOCATED)

        def body(learning_rate, images, labels):
            with scope(0):
                r = layer1_flatten(learning_rate, images, labels)
                r = layer2_dense256(*r)
                r = layer3_dense128(*r)
                r = layer4_dense64(*r)
            with scope(1):
                r = layer5_dense32(*r)
                r = layer6_logits(*r)
                learning_rate, loss = layer7_cel(*r)
                if self.placement != OUTSIDE:
                    train_op = minimize(learning_rate, loss)
            if self.placement == OUTSIDE:
                train_op = minimize(learning_rate, loss)
            with tf.control_dependencies([train_op]):
                return learning_rate, outfeed.enqueue(loss)

        def model(learning_rate):
            return ipu.loops.repeat(ITERATIONS, body, [learning_rate], self.infeed)

        self.learning_rate = tf.compat.v1.placeholder(np.float32, [])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            self.train = ipu.ipu_compiler.compile(model, inputs=[self.learning_rate])
        self.losses = outfeed.dequeue()
        self.program = _only_program(self.graph)

    def run(self):
        """Train ``RUNS`` session runs (configuring the IPUs first, as step 2 does, after
        building); the losses of every mini-batch and where each op ran in the first run."""
        configure_ipus(1 if self.placement == UNSHARDED else 2)
        losses, ran_on = [], {}
        with tf.compat.v1.Session(graph=self.graph) as sess:
            sess.run(tf.compat.v1.global_variables_initializer())
            sess.run(self.infeed.initializer)
            for step in range(RUNS):
                metadata = tf.compat.v1.RunMetadata()
                sess.run(self.train, {self.learning_rate: 0.05},
                         options=tf.compat.v1.RunOptions(
                             trace_level=tf.compat.v1.RunOptions.FULL_TRACE),
                         run_metadata=metadata)
                losses.extend(sess.run(self.losses))
                if step == 0:
                    for stats in metadata.step_stats.dev_stats:
                        for node in stats.node_stats:
                            ran_on.setdefault(node.node_name, set()).add(
                                stats.device.split("/")[-1])
        return np.array(losses), ran_on

    # --- what the graph holds ------------------------------------------------------------

    def op(self, name):
        return self.graph.get_operation_by_name(name)

    def shard0_gradient_ops(self):
        """Gradient ops (``gradients/...``) of the forward ops of dense256, dense128, dense64."""
        found = [op for op in self.graph.get_operations()
                 if op.name.startswith("gradients/")
                 and getattr(op, "_original_op", None) is not None
                 and op._original_op.name.startswith(SHARD0_LAYERS)]  # pylint: disable=protected-access
        assert all(shards.shard_of(op._original_op) == 0  # pylint: disable=protected-access
                   for op in found)
        kernels = ["%s/MatMul_grad/MatMul_1" % layer for layer in self.dense_layers(SHARD0_LAYERS)]
        assert {"gradients/" + k for k in kernels} <= {op.name for op in found}
        return found

    def dense_layers(self, names):
        """``dense256/dense`` and so on: the Keras layers' own scopes."""
        return sorted({op.name.rsplit("/", 1)[0] for op in self.graph.get_operations()
                       if op.type == "MatMul" and op.name.startswith(names)
                       and not op.name.startswith("gradients/")})

    def accumulators(self, names=SHARD0_LAYERS):
        """The accumulator handles of the variables of layers ``names``."""
        return [op for op in self.graph.get_operations()
                if op.type == "VarHandleOp" and op.name.startswith(names)
                and op.name.endswith("GradientAccumulationOptimizerV2/accumulator")]

    def accumulation_adds(self, accumulator):
        """What adds each mini-batch's gradient to ``accumulator`` in the loop body: the
        assignment and the addition it writes (the weight update's reads and clearing, in
        its branch, are left out)."""
        assigns = [op for op in handle_users(accumulator.outputs[0])
                   if op.type == "AssignVariableOp" and _in_loop_body(op)]
        assert len(assigns) == 1, [op.name for op in assigns]
        [assign] = assigns
        addition = assign.inputs[1].op
        assert addition.type in ("AddV2", "Add"), addition.type
        return [assign, addition]

    def kernel_update(self, layer="dense256/dense"):
        [update] = [op for op in self.graph.get_operations()
                    if op.type == "ResourceApplyGradientDescent"
                    and "update_%s/kernel" % layer in op.name]
        return update


def _only_program(graph):
    registry = programs.existing_registry(graph)
    found = {id(p): p for p in registry.program_by_fetch.values()}
    [program] = found.values()
    return program


def _in_loop_body(op):
    """In the loop body itself: not the initializer (outside) nor a branch of the update."""
    context = op._get_control_flow_context()  # pylint: disable=protected-access
    return context is not None and context.IsWhileContext()


def _cpu(op):
    return int(op.device.rsplit(":", 1)[1])


def _ran_on(ran_on, op):
    return ran_on.get(op.name)


# --- the tests ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def trained():
    """Each placement built and trained once (the fixtures reset the IPU system per test)."""
    from ipu_emulator.ipu import config
    results = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TF_POPLAR_FLAGS", raising=False)
        for placement in (IN_SCOPE, COLOCATED, OUTSIDE, UNSHARDED):
            config.reset_ipu_configuration()
            trainer = Trainer(placement)
            losses, ran_on = trainer.run()
            results[placement] = (trainer, losses, ran_on)
        config.reset_ipu_configuration()
    return results


def test_gradients_built_in_the_last_shard_scope_run_on_its_ipu(trained):
    trainer, _, ran_on = trained[IN_SCOPE]
    gradient_ops = trainer.shard0_gradient_ops()
    assert gradient_ops
    for op in gradient_ops:
        assert shards.placed_shard(op) == 1, op.name
        assert shards.shard_of(op) == 1, op.name
        assert _cpu(op) == 1, op.name
    ran = [op for op in gradient_ops if _ran_on(ran_on, op)]
    assert {op.name for op in ran} >= {
        "gradients/%s/MatMul_grad/MatMul_1" % layer
        for layer in trainer.dense_layers(SHARD0_LAYERS)}
    assert {d for op in ran for d in _ran_on(ran_on, op)} == {"device:CPU:1"}
    groups = shards.shard_ops(trainer.program)
    assert set(gradient_ops) <= set(groups[1])


def test_accumulators_live_with_the_gradients_and_updates_with_the_variables(trained):
    trainer, _, ran_on = trained[IN_SCOPE]
    accumulators = trainer.accumulators()
    assert len(accumulators) == 2 * len(SHARD0_LAYERS)  # a kernel and a bias each
    for accumulator in accumulators:
        assert shards.placed_shard(accumulator) == 1 and _cpu(accumulator) == 1
        assert _ran_on(ran_on, accumulator) == {"device:CPU:1"}
        for op in trainer.accumulation_adds(accumulator):
            assert shards.placed_shard(op) == 1 and shards.shard_of(op) == 1, op.name
            assert _ran_on(ran_on, op) == {"device:CPU:1"}, op.name
    # The weight update stays with its variable (TensorFlow colocates it), on shard 0.
    update = trainer.kernel_update()
    assert shards.placed_shard(update) == 0 and _cpu(update) == 0
    assert _ran_on(ran_on, update) == {"device:CPU:0"}


def test_colocated_gradients_and_their_accumulators_run_with_their_forward_ops(trained):
    trainer, _, ran_on = trained[COLOCATED]
    gradient_ops = trainer.shard0_gradient_ops()
    groups = shards.shard_ops(trainer.program)
    for op in gradient_ops:
        # TensorFlow puts each on its forward op's device; the tag and the report agree.
        assert op.device == op._original_op.device, op.name  # pylint: disable=protected-access
        assert shards.placed_shard(op) == 0, op.name
        assert shards.shard_of(op) == 0, op.name
        assert op in groups[0], op.name
    ran = [op for op in gradient_ops if _ran_on(ran_on, op)]
    assert len(ran) >= len(SHARD0_LAYERS)
    assert {d for op in ran for d in _ran_on(ran_on, op)} == {"device:CPU:0"}
    for accumulator in trainer.accumulators():
        assert shards.placed_shard(accumulator) == 0 and _cpu(accumulator) == 0
        assert _ran_on(ran_on, accumulator) == {"device:CPU:0"}
        for op in trainer.accumulation_adds(accumulator):
            assert shards.placed_shard(op) == 0 and shards.shard_of(op) == 0, op.name
            assert _ran_on(ran_on, op) == {"device:CPU:0"}, op.name
    # The last shard's own gradients and accumulators stay on shard 1.
    for accumulator in trainer.accumulators(("dense32", "logits")):
        assert shards.placed_shard(accumulator) == 1
    update = trainer.kernel_update()
    assert shards.placed_shard(update) == 0 and _ran_on(ran_on, update) == {"device:CPU:0"}
    assert shards.program_shard_indices(trainer.program) == [0, 1]


def test_gradients_built_outside_every_shard_scope_follow_their_forward_ops(trained):
    trainer, _, ran_on = trained[OUTSIDE]
    for op in trainer.shard0_gradient_ops():
        assert shards.placed_shard(op) == 0 and _cpu(op) == 0, op.name
    last_shard = [op for op in trainer.graph.get_operations()
                  if op.name.startswith(("gradients/dense32", "gradients/logits"))
                  and op.type == "MatMul"]
    assert last_shard
    for op in last_shard:
        assert shards.placed_shard(op) == 1 and _cpu(op) == 1, op.name
    kernel_gradient = trainer.op("gradients/%s/MatMul_grad/MatMul_1"
                                 % trainer.dense_layers(("dense256",))[0])
    assert _ran_on(ran_on, kernel_gradient) == {"device:CPU:0"}
    for accumulator in trainer.accumulators():
        assert shards.placed_shard(accumulator) == 0


def test_every_placement_trains_to_the_unsharded_losses(trained):
    unsharded = trained[UNSHARDED][1]
    assert unsharded.shape == (ITERATIONS * RUNS,)
    assert not np.allclose(unsharded[:ITERATIONS], unsharded[ITERATIONS:])  # it trained
    for placement in (IN_SCOPE, COLOCATED, OUTSIDE):
        np.testing.assert_allclose(trained[placement][1], unsharded, rtol=1e-5, atol=1e-6,
                                   err_msg=placement)
