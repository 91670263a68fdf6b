"""More attempts at notebooks 01 and 02's code exercises, written as new learners would: correct
programs spelled another way than the reference (each judged Right), and wrong programs of
the kinds learners write (each judged "Not yet" with a hint on its own mistake, no traceback).
Each attempt runs through the check, in process."""
import functools

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb01_porting, nb02_loops
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_not_yet, assert_right, outside_solutions_mode)

v1 = tf.compat.v1


# --- 01: the port: correct programs written another way ------------------------------------

class TrainingStep:
    """The step as an object with ``__call__``: compile calls it with the batch."""

    def __init__(self, learning_rate):
        self.learning_rate = learning_rate

    def __call__(self, images, labels):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
        loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        optimizer = v1.train.GradientDescentOptimizer(learning_rate=self.learning_rate)
        return [loss, optimizer.minimize(loss)]


def port_with_a_step_object(images, labels, steps):
    """The step a callable object, the IPUConfig applied by the module-level function with
    auto_select_ipus as a one-element list."""
    ipu_config = ipu.config.IPUConfig()
    ipu_config.auto_select_ipus = [1]
    ipu.config.configure_ipu_system(ipu_config)
    dataset = v1.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.repeat().batch(32, drop_remainder=True)
    next_batch = v1.data.make_one_shot_iterator(dataset).get_next()
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        train_step = ipu.ipu_compiler.compile(TrainingStep(0.05), inputs=next_batch)
    losses = []
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        for _ in range(steps):
            losses.append(sess.run(train_step))
    return losses


def port_written_out_by_hand(images, labels, steps):
    """The loss written out (softmax cross entropy, then its mean), the images reshaped
    rather than flattened, compute_gradients and apply_gradients rather than minimize,
    and tutorial 1's legacy configuration functions with the IPU Model's options."""
    options = ipu.utils.create_ipu_config(profiling=False)
    options = ipu.utils.set_ipu_model_options(options, compile_ipu_code=False)
    options = ipu.utils.auto_select_ipus(options, num_ipus=[1])
    ipu.utils.configure_ipu_system(options, device="cpu")

    def training_step(batch_images, batch_labels):
        flat = tf.reshape(batch_images, [32, 28 * 28])
        logits = tf.keras.layers.Dense(units=10)(flat)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=batch_labels, logits=logits))
        optimizer = v1.train.GradientDescentOptimizer(0.05)
        return loss, optimizer.apply_gradients(optimizer.compute_gradients(loss))

    dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
    iterator = v1.data.make_one_shot_iterator(dataset.batch(32, True))
    with ipu.scopes.ipu_scope(device="/device:IPU:0"):
        [loss] = ipu.ipu_compiler.compile(training_step, iterator.get_next())
    losses = []
    with v1.Session() as sess:
        sess.run(v1.initializers.global_variables())
        for _ in range(steps):
            losses.append(sess.run(loss))   # the loss tensor itself: the whole step runs
    return np.array(losses)


def port_built_by_helpers(images, labels, steps):
    """Helper functions for each part, the learning rate bound with functools.partial to a
    step that takes it by keyword, the losses kept as floats in a tuple."""
    def configure_one_ipu():
        settings = ipu.config.IPUConfig()
        settings.auto_select_ipus = 1
        settings.configure_ipu_system(device="cpu")

    def batches():
        data = v1.data.Dataset.from_tensor_slices((images, labels))
        return v1.data.make_one_shot_iterator(
            data.repeat().batch(batch_size=32, drop_remainder=True)).get_next()

    def step(x, y, *, learning_rate):
        logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(x))
        cost = v1.losses.sparse_softmax_cross_entropy(labels=y, logits=logits)
        return [cost, v1.train.GradientDescentOptimizer(learning_rate).minimize(cost)]

    def compiled(inputs):
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            return ipu.ipu_compiler.compile(functools.partial(step, learning_rate=0.05),
                                            inputs=inputs)

    program = compiled(batches())
    configure_one_ipu()
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        return tuple(float(sess.run(program)[0]) for _ in range(steps))


def port_with_a_while_counter(images, labels, steps):
    """A Python while loop counting the steps, the batch unpacked into two names given to
    compile as a list, the loss read with the session's own fetch of the list."""
    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()
    dataset = v1.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.batch(32, drop_remainder=True).repeat()
    image_batch, label_batch = v1.data.make_one_shot_iterator(dataset).get_next()
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        outputs = ipu.ipu_compiler.compile(
            lambda x, y: (lambda loss: [loss, v1.train.GradientDescentOptimizer(0.05)
                                        .minimize(loss)])(
                v1.losses.sparse_softmax_cross_entropy(
                    labels=y, logits=tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(x)))),
            inputs=[image_batch, label_batch])
    sess = v1.Session()
    sess.run(v1.global_variables_initializer())
    losses, step = [], 0
    while step < steps:
        [value] = sess.run(outputs)
        losses.append(value)
        step += 1
    sess.close()
    return losses


def port_in_a_class(images, labels, steps):
    """A small trainer class: the model's layer made in its constructor, the graph built by
    one method and trained by another; the session's initializer spelled from its variables."""
    class Trainer:
        def __init__(self):
            self.dense = tf.keras.layers.Dense(10)
            self.optimizer = v1.train.GradientDescentOptimizer(0.05)

        def step(self, images, labels):
            logits = self.dense(tf.keras.layers.Flatten()(images))
            loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
            return loss, self.optimizer.minimize(loss)

        def build(self):
            dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
            batch = v1.data.make_one_shot_iterator(
                dataset.batch(32, drop_remainder=True)).get_next()
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                self.op = ipu.ipu_compiler.compile(self.step, inputs=batch)

        def train(self):
            with v1.Session() as sess:
                sess.run(v1.variables_initializer(v1.global_variables()))
                return [sess.run(self.op)[0] for _ in range(steps)]

    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    trainer = Trainer()
    trainer.build()
    return trainer.train()


PORTS = {
    "the step a callable object, configured by the module-level function":
        port_with_a_step_object,
    "the loss written out, legacy configuration with IPU Model options":
        port_written_out_by_hand,
    "helper functions and a keyword-only learning rate bound by partial":
        port_built_by_helpers,
    "a Python while loop and a lambda step given two tensors": port_with_a_while_counter,
    "a trainer class building and running the program": port_in_a_class,
}


@pytest.mark.parametrize("attempt", PORTS)
def test_nb01_a_correct_port_written_another_way_is_right(attempt):
    assert_right(nb01_porting.check_port(PORTS[attempt]))


# --- 01: the port: wrong attempts ----------------------------------------------------------

def ported(reduction=None, steps_run=lambda steps: steps, select_after_configure=False,
           record="loss", update_returned=True, mean_returned=False):
    """Tutorial 1's port with one thing changed: the loss's reduction, how many steps the
    loop runs, whether auto_select_ipus is set after the configuration was applied, what the
    loop appends, whether the step returns minimize's result, and whether train returns the
    mean loss instead of each step's."""
    def train(images, labels, steps):
        ipu_config = ipu.config.IPUConfig()
        if select_after_configure:
            ipu_config.configure_ipu_system()
            ipu_config.auto_select_ipus = 1
        else:
            ipu_config.auto_select_ipus = 1
            ipu_config.configure_ipu_system()
        dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
        next_batch = v1.data.make_one_shot_iterator(
            dataset.batch(32, drop_remainder=True)).get_next()

        def training_step(images, labels):
            logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
            named = {} if reduction is None else {"reduction": reduction}
            loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits,
                                                          **named)
            update = v1.train.GradientDescentOptimizer(0.05).minimize(loss)
            return [loss, update] if update_returned else [loss]

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            train_step = ipu.ipu_compiler.compile(training_step, inputs=next_batch)
        losses = []
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for _ in range(steps_run(steps)):
                [loss] = sess.run(train_step)
                losses.append(loss if record == "loss" else 0.0)
        return float(np.mean(losses)) if mean_returned else losses
    return train


WRONG_PORTS = {
    "the loss summed over the batch, not averaged": (
        ported(reduction=v1.losses.Reduction.SUM), "times larger. The port keeps the model, "
                                                   "the loss and GradientDescentOptimizer"),
    "the loop run for steps - 1 steps": (
        ported(steps_run=lambda steps: steps - 1),
        "19 engine runs for 20 steps. The check asked train for 20 steps"),
    "auto_select_ipus set after configure_ipu_system()": (
        ported(select_after_configure=True), "set auto_select_ipus = 1 on the IPUConfig "
                                             "before configure_ipu_system()"),
    "zeros appended instead of the losses the step returned": (
        ported(record="zeros"), "train returned 0.000 as the first step's loss where the "
                                "step computed"),
    "the step returning only [loss]: minimize built, never run": (
        ported(update_returned=False), "but the weights never changed"),
    "the mean loss returned instead of each step's": (
        ported(mean_returned=True), "train returned a float, not the loss of each step"),
}


@pytest.mark.parametrize("attempt", WRONG_PORTS)
def test_nb01_a_wrong_port_gets_a_hint_on_its_own_mistake(attempt):
    code, words = WRONG_PORTS[attempt]
    assert_not_yet(nb01_porting.check_port(code), words)


# --- 02: the loop on the device: correct programs written another way ----------------------

def batch_loss(images, labels):
    logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
    return v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)


def loop_with_positional_repeat(images, labels, steps):
    """repeat's arguments all positional, the body's learning rate bound with
    functools.partial, the loop given to compile as a partial too, with inputs=None spelled
    out, and the infeed's prefetch depth given."""
    def loop_body(total, images, labels, learning_rate):
        loss = batch_loss(images, labels)
        return total + loss, v1.train.GradientDescentOptimizer(learning_rate).minimize(loss)

    dataset = v1.data.Dataset.from_tensor_slices((images, labels))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        dataset.repeat().batch(32, drop_remainder=True), prefetch_depth=3)
    body = functools.partial(loop_body, learning_rate=0.05)
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(
            functools.partial(ipu.loops.repeat, steps, body, [0.0], infeed), inputs=None)
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        sess.run(infeed.initializer)
        total = sess.run(program)
    return total[0] / steps


def loop_fed_a_dict(images, labels, steps):
    """A dataset of dicts: the infeed passes each batch to the body by keyword."""
    dataset = v1.data.Dataset.from_tensor_slices({"images": images, "labels": labels})
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
        dataset.repeat().batch(32, drop_remainder=True))

    def body(total, labels, images):   # keywords: the order of the names does not matter
        loss = batch_loss(images, labels)
        return [total + loss, v1.train.GradientDescentOptimizer(0.05).minimize(loss)]

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(steps, body, inputs=[0.0], infeed_queue=infeed))
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        sess.run(infeed.initializer)
        sess.run(program)


def loop_with_maximum_iterations(images, labels, steps):
    """ipu.loops.while_loop with an always-true condition and maximum_iterations, carrying
    the total loss."""
    dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(32, drop_remainder=True))

    def body(total, images, labels):
        loss = batch_loss(images, labels)
        return [total + loss, v1.train.GradientDescentOptimizer(0.05).minimize(loss)]

    def all_steps():
        return ipu.loops.while_loop(lambda total: tf.constant(True), body, inputs=[0.0],
                                    infeed_queue=infeed, maximum_iterations=steps)

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(all_steps, [])
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        sess.run(infeed.initializer)
        return sess.run(program)


def loop_carrying_the_loss_and_a_count(images, labels, steps):
    """Two carried values (the last loss and a step count), compute_gradients and
    apply_gradients, the optimizer made once outside the loop, the session opened and closed
    by hand."""
    optimizer = v1.train.GradientDescentOptimizer(learning_rate=0.05)
    dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(32, drop_remainder=True))

    def body(last_loss, count, images, labels):
        loss = batch_loss(images, labels)
        update = optimizer.apply_gradients(optimizer.compute_gradients(loss))
        return loss, count + 1, update

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        last_loss, count = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(steps, body, inputs=[0.0, 0], infeed_queue=infeed))
    sess = v1.Session()
    sess.run(v1.global_variables_initializer())
    sess.run(infeed.initializer)
    result = sess.run({"loss": last_loss, "steps": count})
    sess.close()
    return result


def loop_in_helpers(images, labels, steps):
    """A helper per task, the device configured again with the IPUConfig, the infeed's
    initializer run first."""
    def make_infeed():
        data = v1.data.Dataset.from_tensor_slices((images, labels))
        return ipu.ipu_infeed_queue.IPUInfeedQueue(
            data.repeat().batch(batch_size=32, drop_remainder=True))

    def make_program(feed):
        def one_step(total_loss, x, y):
            loss = batch_loss(x, y)
            return [total_loss + loss, v1.train.GradientDescentOptimizer(0.05).minimize(loss)]

        def every_step():
            return ipu.loops.repeat(n=steps, body=one_step, inputs=[tf.constant(0.0)],
                                    infeed_queue=feed)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            [total] = ipu.ipu_compiler.compile(computation=every_step, inputs=[])
        return total

    cfg = ipu.config.IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()
    feed = make_infeed()
    total = make_program(feed)
    with v1.Session() as sess:
        sess.run(feed.initializer)
        sess.run(v1.global_variables_initializer())
        return sess.run(total) / steps


LOOPS = {
    "repeat given positionally, body and loop through functools.partial": (
        loop_with_positional_repeat),
    "a dataset of dicts, the batch passed by keyword": loop_fed_a_dict,
    "a while_loop bounded by maximum_iterations": loop_with_maximum_iterations,
    "the last loss and a step count carried, apply_gradients": (
        loop_carrying_the_loss_and_a_count),
    "helpers per task, keyword arguments, configured again": loop_in_helpers,
}


@pytest.mark.parametrize("attempt", LOOPS)
def test_nb02_a_correct_loop_written_another_way_is_right(attempt):
    assert_right(nb02_loops.check_loop_on_device(LOOPS[attempt]))


# --- 02: the loop on the device: wrong attempts --------------------------------------------

def looped(count=lambda steps: steps, body_returns="both", loss_scale=None, start=0.0,
           place="scope", launches=1, repeat_keyword="infeed_queue"):
    """The tutorial's loop with one thing changed: repeat's count, what the body returns, the
    loss given to minimize (``loss_scale(loss, steps)``), the carried total's start, where
    compile is called, how often the program is run and repeat's keyword for the infeed."""
    def train(images, labels, steps):
        dataset = v1.data.Dataset.from_tensor_slices((images, labels))
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(
            dataset.repeat().batch(32, drop_remainder=True))

        def loop_body(total_loss, images, labels):
            loss = batch_loss(images, labels)
            minimized = loss if loss_scale is None else loss_scale(loss, steps)
            train_op = v1.train.GradientDescentOptimizer(0.05).minimize(minimized)
            return [total_loss + loss, train_op] if body_returns == "both" else \
                [total_loss + loss]

        def all_steps():
            return ipu.loops.repeat(count(steps), loop_body, inputs=[start],
                                    **{repeat_keyword: infeed})

        if place == "scope":
            with ipu.scopes.ipu_scope("/device:IPU:0"):
                program = ipu.ipu_compiler.compile(all_steps)
        else:
            program = ipu.ipu_compiler.compile(all_steps)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            sess.run(infeed.initializer)
            for _ in range(launches):
                sess.run(program)
    return train


def initializer_left_in_the_step_loop(images, labels, steps):
    """The starting code's Python loop kept around the compiled loop: the infeed's
    initializer and the program run in every step."""
    dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(32, drop_remainder=True))

    def loop_body(total_loss, images, labels):
        loss = batch_loss(images, labels)
        return [total_loss + loss, v1.train.GradientDescentOptimizer(0.05).minimize(loss)]

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        program = ipu.ipu_compiler.compile(
            lambda: ipu.loops.repeat(steps, loop_body, inputs=[0.0], infeed_queue=infeed))
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        for _ in range(steps):
            sess.run(infeed.initializer)
            sess.run(program)


WRONG_LOOPS = {
    "repeat given steps + 1": (
        looped(count=lambda steps: steps + 1),
        "one engine run of 21 steps, fed by the infeed, but the check asked train for 20"),
    "minimize built in the body but not returned": (
        looped(body_returns="the total only"), "the weights never changed"),
    "the loss divided by the steps before minimize": (
        looped(loss_scale=lambda loss, steps: loss / steps), "times smaller. The loop keeps"),
    "the compiled loop run twice, a warm-up and the real run": (
        looped(launches=2), "2 engine runs (of 20, 20 steps): the loop is on the IPU"),
    "the running total started at 0, an int": (
        looped(start=0), "`inputs=[0]` starts an int32 total, and the loss is a float32"),
    "compile called outside ipu_scope": (
        looped(place="outside"), "compile was called outside the IPU scope"),
    "repeat given the infeed as infeed=": (
        looped(repeat_keyword="infeed"), "repeat's arguments are (n, body, inputs=None, "
                                         "infeed_queue=None)"),
    "the initializer and the program run in each step of a Python loop": (
        initializer_left_in_the_step_loop, "a second `sess.run(infeed.initializer)` (in a "
                                           "Python loop of steps, say) is refused"),
}


@pytest.mark.parametrize("attempt", WRONG_LOOPS)
def test_nb02_a_wrong_loop_gets_a_hint_on_its_own_mistake(attempt):
    code, words = WRONG_LOOPS[attempt]
    assert_not_yet(nb02_loops.check_loop_on_device(code), words)
