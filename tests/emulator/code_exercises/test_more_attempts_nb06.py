"""More attempts at notebook 06's code exercise (accumulate gradients on one IPU), written as
new learners would: correct programs spelled another way than the reference (each judged
Right), and wrong programs of the kinds learners write (each judged "Not yet" with a hint on
its own mistake, no traceback).  Each attempt runs through the check, in process."""
import functools

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb06_accumulation
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_not_yet, assert_right, outside_solutions_mode)

v1 = tf.compat.v1
START = nb06_accumulation.STARTING_CODE
PLAIN_OPTIMIZER = "optimizer = tf.train.GradientDescentOptimizer(0.01)"
check = nb06_accumulation.check_accumulating_training


def train_of(code):
    """The learner's cell run as the notebook does (``tf`` is TensorFlow 1's API there)."""
    namespace = {"tf": v1, "ipu": ipu}
    exec(code, namespace)  # pylint: disable=exec-used
    return namespace["train"]


def edited(*replacements):
    """The starting code with each ``(old, new)`` of ``replacements`` made (each must be
    found: a typo in a test fails it rather than testing the starting code)."""
    code = START
    for old, new in replacements:
        assert old in code, old
        code = code.replace(old, new)
    return train_of(code)


WRAPPED = (PLAIN_OPTIMIZER,
           "optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(\n"
           "            tf.train.GradientDescentOptimizer(0.01), num_mini_batches=16)")
LOOP_OF_32 = ("repeat(20,", "repeat(32,")


# --- correct programs written another way ----------------------------------------------------

def accumulating_in_a_while_loop(images, labels, runs):
    """``ipu.loops.while_loop`` with a counter carried through the loop (the condition
    stops it after 32 mini-batches), the train op run by a control dependency; the wrapper
    from the SDK 1.x module path ``ipu.gradient_accumulation_optimizer``."""
    dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(32, drop_remainder=True))

    def condition(step):
        return step < 32

    def body(step, images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        optimizer = ipu.gradient_accumulation_optimizer.GradientAccumulationOptimizerV2(
            v1.train.GradientDescentOptimizer(0.01), num_mini_batches=16)
        with tf.control_dependencies([optimizer.minimize(loss)]):
            return step + 1

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(
            lambda: ipu.loops.while_loop(condition, body, inputs=[tf.constant(0)],
                                         infeed_queue=infeed))
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        sess.run(infeed.initializer)
        for _ in range(runs):
            sess.run(program)


class AccumulatingStep:
    """The step as an object: the layers and the wrapped optimizer made once, in
    ``__init__``, and ``__call__`` the loop's body."""

    def __init__(self, learning_rate, mini_batches):
        self.flatten = tf.keras.layers.Flatten()
        self.dense = tf.keras.layers.Dense(units=10)
        self.optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
            opt=v1.train.GradientDescentOptimizer(learning_rate=learning_rate),
            num_mini_batches=mini_batches)

    def __call__(self, images, labels):
        logits = self.dense(self.flatten(images))
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        return self.optimizer.minimize(loss)


def accumulating_with_a_step_object(images, labels, runs):
    """The step a callable object (called from a lambda), the loop compiled through a named
    function, the learner's own names (``groups * accumulate``), a ``while`` over the runs."""
    accumulate, groups = 16, 2
    dataset = v1.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.repeat().batch(32, drop_remainder=True)
    feed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    step = AccumulatingStep(0.01, accumulate)

    def on_device():   # the loop checks its body's arguments: self would count as one
        return ipu.loops.repeat(groups * accumulate, lambda x, y: step(x, y),
                                infeed_queue=feed)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        compiled = ipu.ipu_compiler.compile(on_device, inputs=[])
    with v1.Session() as session:
        session.run(v1.global_variables_initializer())
        session.run(feed.initializer)
        done = 0
        while done < runs:
            session.run(compiled)
            done += 1


def accumulating_by_hand_gradients(images, labels, runs):
    """The loss written out (cross entropy per image, then its mean), the images reshaped,
    ``compute_gradients`` and ``apply_gradients`` on the wrapper rather than ``minimize``,
    the SDK's default reduction spelled out as the string ``"sum"``, and ``tf.compat.v1``
    spellings throughout; the infeed with SDK 1.x's ``feed_name``."""
    dataset = tf.compat.v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        dataset.batch(batch_size=32, drop_remainder=True), feed_name="training_feed")

    def training_step(images, labels):
        logits = tf.keras.layers.Dense(10)(tf.reshape(images, [32, 28 * 28]))
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits))
        optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
            tf.compat.v1.train.GradientDescentOptimizer(0.01), 16, reduction_method="sum")
        return optimizer.apply_gradients(optimizer.compute_gradients(loss))

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        train_on_ipu = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(n=32, body=training_step, infeed_queue=infeed))
    with tf.compat.v1.Session() as sess:
        sess.run(tf.compat.v1.global_variables_initializer())
        sess.run(infeed.initializer)
        for _ in range(runs):
            sess.run(train_on_ipu)


def _step(images, labels, make_optimizer):
    logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    return make_optimizer().minimize(loss)


def accumulating_through_partial(images, labels, runs):
    """The step a module-level function bound with ``functools.partial`` to a factory of the
    wrapped optimizer (a lambda), the loop compiled as a partial of ``ipu.loops.repeat``,
    tutorial 1's legacy configuration functions called first, the contrib-era
    ``ipu.ops.ipu_scope``, both initializers in one ``sess.run``."""
    options = ipu.utils.create_ipu_config()
    options = ipu.utils.auto_select_ipus(options, num_ipus=1)
    ipu.utils.configure_ipu_system(options)
    dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(32, drop_remainder=True))
    make_optimizer = lambda: ipu.optimizers.GradientAccumulationOptimizerV2(  # noqa: E731
        v1.train.GradientDescentOptimizer(0.01), num_mini_batches=16)
    step = functools.partial(_step, make_optimizer=make_optimizer)
    with ipu.ops.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(
            functools.partial(ipu.loops.repeat, 32, step, infeed_queue=infeed))
    with v1.Session() as sess:
        sess.run([v1.global_variables_initializer(), infeed.initializer])
        for _ in range(runs):
            sess.run(program)


CORRECT = {
    "an ipu.loops.while_loop with a counter, the SDK 1.x module path": (
        accumulating_in_a_while_loop),
    "the step a callable object, its own names, a while over the runs": (
        accumulating_with_a_step_object),
    "compute_gradients and apply_gradients, the loss written out, reduction 'sum'": (
        accumulating_by_hand_gradients),
    "functools.partial and a lambda, legacy configuration, ipu.ops.ipu_scope": (
        accumulating_through_partial),
    "the starting code edited: the wrapper named, RUNNING_MEAN by its enum": edited(
        (PLAIN_OPTIMIZER,
         "plain = tf.train.GradientDescentOptimizer(learning_rate=0.01)\n"
         "        optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(\n"
         "            plain, num_mini_batches=16, name='accumulate', reduction_method="
         "ipu.gradient_accumulation.GradientAccumulationReductionMethod.RUNNING_MEAN)"),
        ("repeat(20,", "repeat(2 * 16,")),
}


@pytest.mark.parametrize("attempt", CORRECT)
def test_a_correct_program_written_another_way_is_right(attempt):
    assert_right(check(CORRECT[attempt]))


# --- wrong attempts ---------------------------------------------------------------------------

WRONG = {
    "the loss divided by 16 beside the accumulation, to average it": (
        edited(WRAPPED, LOOP_OF_32,
               ("return optimizer.minimize(loss)", "return optimizer.minimize(loss / 16)")),
        "times smaller. The wrapper adds the 16 mini-batches' gradients up (or averages them, "
        "with reduction_method=MEAN) and applies them with the starting code's optimizer, "
        "GradientDescentOptimizer(0.01), as it is: keep its learning rate and the loss "
        "unchanged"),
    "the loop repeats 2 x 32 = 64 mini-batches": (
        edited(WRAPPED, ("repeat(20,", "repeat(64,")),
        "each run made 64 mini-batches, so it changed the weights 4 times. Task b"),
    "num_mini_batches=32: the loop's count as the accumulation count": (
        edited((PLAIN_OPTIMIZER,
                "optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(\n"
                "            tf.train.GradientDescentOptimizer(0.01), num_mini_batches=32)"),
               LOOP_OF_32),
        "your optimizer added up 32 mini-batches per weight update (1 update per run)"),
    "the pipeline's argument name, gradient_accumulation_count=16": (
        edited((PLAIN_OPTIMIZER,
                "optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(\n"
                "            tf.train.GradientDescentOptimizer(0.01), "
                "gradient_accumulation_count=16)"), LOOP_OF_32),
        "unexpected keyword argument 'gradient_accumulation_count' Hint: the wrapper takes "
        "the optimizer first, then num_mini_batches=16"),
    "the wrapper made but minimize called on the plain optimizer": (
        edited((PLAIN_OPTIMIZER,
                PLAIN_OPTIMIZER + "\n        accumulating = ipu.optimizers."
                "GradientAccumulationOptimizerV2(optimizer, num_mini_batches=16)"),
               LOOP_OF_32),
        "and return the wrapper's minimize: the plain optimizer's own still updates"),
    "the runs loop dropped: one sess.run in all": (
        edited(WRAPPED, LOOP_OF_32,
               ("        for _ in range(runs):\n            sess.run(train_on_ipu)",
                "        sess.run(train_on_ipu)")),
        "your program made 1 engine run, but the check asked train for 3 runs"),
    "the loop repeats 16 mini-batches: one update per run": (
        edited(WRAPPED, ("repeat(20,", "repeat(16,")),
        "each run made 16 mini-batches, so it changed the weights once. Task b"),
    "the dataset shuffled before batching": (
        edited(WRAPPED, LOOP_OF_32, (".repeat()", ".shuffle(640, seed=1).repeat()")),
        "as if the steps saw other batches or computed another loss"),
}


@pytest.mark.parametrize("attempt", WRONG)
def test_a_wrong_attempt_gets_a_hint_on_its_own_mistake(attempt):
    program, words = WRONG[attempt]
    assert_not_yet(check(program), words)
