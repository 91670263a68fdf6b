"""More attempts at notebook 03's code exercises (TF2, under IPUStrategy), written as new
learners would: correct programs spelled another way than the reference (each judged Right),
and wrong programs of the kinds learners write (each judged "Not yet" with a hint on its own
mistake, no traceback).  Each attempt runs through the check, in process."""
import functools

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb03_feeds as code_exercises
from ipu_emulator.code_exercises.nb03_feeds import loss_and_update, make_model, make_optimizer
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_not_yet, assert_right, outside_solutions_mode)

pytestmark = pytest.mark.tf2

OUTFEED_MODE = ipu.ipu_outfeed_queue.IPUOutfeedMode


# --- 03.outfeed-loop: correct programs written another way -----------------------------------

class LoopTrainer:
    """A trainer object called as ``train``: the model, optimizer, infeed and outfeed kept on
    ``self``, the loop a ``tf.function`` method closing over them, its count a tensor."""

    def __init__(self, steps_per_execution):
        self.steps_per_execution = steps_per_execution

    def __call__(self, dataset, steps):
        strategy = ipu.ipu_strategy.IPUStrategy()
        with strategy.scope():
            self.model = make_model()
            self.optimizer = make_optimizer(self.model)
            self.batches = iter(dataset)
            self.outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
            for _ in range(steps // self.steps_per_execution):
                strategy.run(self.loop, args=(tf.constant(self.steps_per_execution),))
            return self.outfeed.dequeue()

    @tf.function(jit_compile=True)
    def loop(self, count):
        for _ in tf.range(count):
            images, labels = next(self.batches)
            self.outfeed.enqueue(loss_and_update(self.model, self.optimizer, images, labels))


def outfeed_loop_with_tf_while_loop(dataset, steps):
    """tf.while_loop in place of the tf.range loop, IPUStrategyV1, get_next() on the infeed,
    the outfeed's mode ALL said outright, and the dequeue after the scope's block."""
    strategy = ipu.ipu_strategy.IPUStrategyV1()
    with strategy.scope():
        model = make_model()
        optimizer = make_optimizer(model)
        infeed = iter(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(outfeed_mode=OUTFEED_MODE.ALL)

        @tf.function(jit_compile=True)
        def six_steps():
            def body(i):
                images, labels = infeed.get_next()
                outfeed.enqueue(loss_and_update(model, optimizer, images, labels))
                return [i + 1]
            tf.while_loop(lambda i: i < 6, body, [tf.constant(0)])

        for _ in range(steps // 6):
            strategy.run(six_steps)
    return outfeed.dequeue()


def outfeed_loop_bound_with_partial(dataset, steps):
    """The loop's model, optimizer, infeed and outfeed bound with functools.partial, the
    tf.function made by calling tf.function, the runs counted by a host while loop."""
    steps_per_execution = 12

    def training_loop(model, optimizer, batches, outfeed):
        for _ in tf.range(steps_per_execution):
            outfeed.enqueue(loss_and_update(model, optimizer, *next(batches)))

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        net = make_model()
        opt = make_optimizer(net)
        queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        run_once = tf.function(functools.partial(training_loop, net, opt, iter(dataset), queue),
                               jit_compile=True)
        done = 0
        while done < steps:
            strategy.run(run_once)
            done += steps_per_execution
    return queue.dequeue()


def outfeed_loop_read_by_iterating(dataset, steps):
    """strategy.run given its arguments by keyword, loss_and_update called with keywords, and
    the losses read by iterating over the outfeed in eager mode."""
    strategy = ipu.ipu_strategy.IPUStrategy()

    @tf.function(jit_compile=True)
    def thirty_steps(batches, outfeed, model, optimizer):
        for _ in tf.range(30):
            images, labels = next(batches)
            outfeed.enqueue(loss_and_update(model=model, optimizer=optimizer, images=images,
                                            labels=labels))

    with strategy.scope():
        model = make_model()
        optimizer = make_optimizer(model)
        batches = iter(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
        for _ in range(steps // 30):
            strategy.run(thirty_steps, kwargs={"batches": batches, "outfeed": outfeed,
                                               "model": model, "optimizer": optimizer})
    return np.array(list(outfeed))


def outfeed_loop_with_a_counted_while(dataset, steps):
    """An AutoGraph while loop over a tensor counter, each loss enqueued in a dict and the
    dict's entry returned after the dequeue."""
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        optimizer = make_optimizer(model)
        batches = iter(dataset)
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

        @tf.function(jit_compile=True)
        def loop(count):
            i = tf.constant(0)
            while i < count:
                images, labels = next(batches)
                outfeed.enqueue({"loss": loss_and_update(model, optimizer, images, labels)})
                i += 1

        for _ in range(steps // 5):
            strategy.run(loop, args=(tf.constant(5),))
        return outfeed.dequeue()["loss"]


OUTFEED_ALTERNATIVES = {
    "a trainer object with a tf.function method": LoopTrainer(15),
    "tf.while_loop, IPUStrategyV1 and get_next()": outfeed_loop_with_tf_while_loop,
    "functools.partial and a host while loop": outfeed_loop_bound_with_partial,
    "keyword arguments and the outfeed iterated": outfeed_loop_read_by_iterating,
    "an AutoGraph while loop and a dict enqueued": outfeed_loop_with_a_counted_while,
}


@pytest.mark.parametrize("alternative", OUTFEED_ALTERNATIVES)
def test_a_correct_outfeed_loop_written_another_way_is_right(alternative):
    assert_right(code_exercises.check_outfeed_loop(OUTFEED_ALTERNATIVES[alternative]))


# --- 03.outfeed-loop: wrong attempts ----------------------------------------------------------

def loss_without_update(model, optimizer, images, labels):
    """The starting code's step with the optimizer's line left out."""
    del optimizer
    return tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
        labels, model(images, training=True)))


def update_of_the_last_layer(model, optimizer, images, labels):
    """The starting code's step with the update given the last layer's variables only."""
    with tf.GradientTape() as tape:
        loss = loss_without_update(model, None, images, labels)
    last = model.trainable_variables[-2:]
    optimizer.apply_gradients(zip(tape.gradient(loss, last), last))
    return loss


def outfeed_attempt(runs=lambda steps, steps_per_execution: steps // steps_per_execution,
                    outfeed_mode=None, give_back="dequeued", summed_loss=False,
                    enqueue_each_step=True, step=loss_and_update, shuffled=False):
    """Tutorial 3's program with one thing changed: the host's count of engine runs
    (``runs``), the outfeed's mode, what train returns (``"dequeued"``, or the ``"runs'
    results"`` of strategy.run), the step written out with the loss summed over the batch,
    another ``step`` in the loop, or the dataset's batches shuffled."""
    steps_per_execution = 10

    def train(dataset, steps):
        strategy = ipu.ipu_strategy.IPUStrategy()

        @tf.function(jit_compile=True)
        def loop(batches, outfeed, model, optimizer):
            loss = 0.0
            for _ in tf.range(steps_per_execution):
                images, labels = next(batches)
                if summed_loss:
                    with tf.GradientTape() as tape:
                        loss = tf.reduce_sum(tf.keras.losses.sparse_categorical_crossentropy(
                            labels, model(images, training=True)))
                    gradients = tape.gradient(loss, model.trainable_variables)
                    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
                else:
                    loss = step(model, optimizer, images, labels)
                if enqueue_each_step:
                    outfeed.enqueue(loss)
            if not enqueue_each_step:   # once per run, after the loop
                outfeed.enqueue(loss)
            return loss

        with strategy.scope():
            model = make_model()
            optimizer = make_optimizer(model)
            batches = iter(dataset.shuffle(8, seed=1) if shuffled else dataset)
            outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(
                **({} if outfeed_mode is None else {"outfeed_mode": outfeed_mode}))
            results = [strategy.run(loop, args=[batches, outfeed, model, optimizer])
                       for _ in range(runs(steps, steps_per_execution))]
            if give_back == "mean":
                return tf.reduce_mean(outfeed.dequeue())
            return results if give_back == "runs' results" else outfeed.dequeue()
    return train


OUTFEED_ATTEMPTS = {
    "one engine run too many (range(steps // 10 + 1))": (
        outfeed_attempt(runs=lambda steps, each: steps // each + 1),
        "Your 10 steps per execution divide the 60 steps, so 6 engine runs make them"),
    "the outfeed made in LAST mode": (
        outfeed_attempt(outfeed_mode=OUTFEED_MODE.LAST),
        "your outfeed is in IPUOutfeedMode.LAST"),
    "strategy.run's results returned, the outfeed never dequeued": (
        outfeed_attempt(give_back="runs' results"),
        "train returned 6 values without ever dequeuing the outfeed"),
    "the step written out with the loss summed over the batch": (
        outfeed_attempt(summed_loss=True),
        "times larger. The loop keeps the starting code's step, loss_and_update"),
    "the loss enqueued once per run, after the loop": (
        outfeed_attempt(enqueue_each_step=False), "the outfeed received one loss per run, not one per step"),
    "one engine run too few (range(steps // 10 - 1))": (
        outfeed_attempt(runs=lambda steps, each: steps // each - 1),
        "made 5 engine runs of 10 steps each: 50 steps, but the check asked train for 60"),
    "the loop's step computes the loss and never updates": (
        outfeed_attempt(step=loss_without_update),
        "but the weights never changed: the program computed the loss and left the model"),
    "the update given the last layer's variables only": (
        outfeed_attempt(step=update_of_the_last_layer),
        "but only some of the weights trained: those of dense"),
    "the dataset's batches shuffled": (
        outfeed_attempt(shuffled=True),
        "as if the steps saw other batches or computed another loss"),
    "the mean of the dequeued losses returned": (
        outfeed_attempt(give_back="mean"), "but train returned one value, though its one dequeue gave back all 60: return "
        "the dequeued losses as they are, not their mean"),
}


@pytest.mark.parametrize("attempt", OUTFEED_ATTEMPTS)
def test_a_wrong_outfeed_loop_gets_a_hint_on_its_own_mistake(attempt):
    code, words = OUTFEED_ATTEMPTS[attempt]
    assert_not_yet(code_exercises.check_outfeed_loop(code), words)


# --- 03.keras-steps-per-execution: correct programs written another way ---------------------

def batched(images, labels):
    return tf.data.Dataset.from_tensor_slices((images, labels)).batch(32, drop_remainder=True)


def keras_positional_with_explicit_defaults(images, labels):
    """compile's optimizer and loss given positionally, the loss as Keras's function, the
    optimizer's defaults spelled out, eight steps per execution."""
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(32, True)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        model.compile(tf.keras.optimizers.SGD(learning_rate=0.01, momentum=0.0),
                      tf.keras.losses.sparse_categorical_crossentropy, steps_per_execution=8)
        return model.fit(dataset, epochs=2, verbose=0)


def keras_model_built_with_add(images, labels):
    """IPUStrategyV1, the model built layer by layer with add(), the dataset made inside the
    scope with keyword arguments, fit given it as x=."""
    strategy = ipu.ipu_strategy.IPUStrategyV1()
    with strategy.scope():
        model = tf.keras.Sequential()
        model.add(tf.keras.Input(shape=(28, 28)))
        model.add(tf.keras.layers.Flatten())
        model.add(tf.keras.layers.Dense(128, activation="relu"))
        model.add(tf.keras.layers.Dense(10, activation=tf.nn.softmax))
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                      loss="sparse_categorical_crossentropy", steps_per_execution=5)
        dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(
            batch_size=32, drop_remainder=True)
        return model.fit(x=dataset, epochs=2, verbose=0)


def keras_functional_model(images, labels):
    """The same layers as a functional tf.keras.Model, two steps per execution."""
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        inputs = tf.keras.Input(shape=(28, 28))
        hidden = tf.keras.layers.Dense(128, activation="relu")(
            tf.keras.layers.Flatten()(inputs))
        model = tf.keras.Model(inputs, tf.keras.layers.Dense(10, activation="softmax")(hidden))
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                      loss="sparse_categorical_crossentropy", steps_per_execution=2)
        return model.fit(batched(images, labels), epochs=2, verbose=0)


def keras_arrays_cut_to_whole_batches(images, labels):
    """The arrays given to fit, cut to whole batches of 32, unshuffled."""
    whole = len(images) // 32 * 32
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                      loss="sparse_categorical_crossentropy", steps_per_execution=10)
        return model.fit(images[:whole], labels[:whole], batch_size=32, shuffle=False,
                         epochs=2, verbose=0)


def keras_repeated_with_steps_per_epoch(images, labels):
    """The dataset repeated, each epoch its 40 batches by steps_per_epoch, 20 steps per
    execution."""
    dataset = batched(images, labels).repeat()
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                      loss="sparse_categorical_crossentropy", steps_per_execution=20)
        return model.fit(dataset, epochs=2, steps_per_epoch=40, verbose=0)


def keras_with_validation(images, labels):
    """An accuracy metric, and a validation on ten batches after each epoch."""
    dataset = batched(images, labels)
    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        model = make_model()
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                      loss="sparse_categorical_crossentropy", metrics=["accuracy"],
                      steps_per_execution=10)
        return model.fit(dataset, epochs=2, verbose=0, validation_data=dataset.take(10))


def keras_built_by_helpers(images, labels):
    """Helpers: the dataset zipped from two, the model compiled by a function, fit bound with
    functools.partial."""
    def make_dataset():
        pairs = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices(images),
                                     tf.data.Dataset.from_tensor_slices(labels)))
        return pairs.batch(32, drop_remainder=True)

    def compiled(model, steps_per_execution):
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                      loss="sparse_categorical_crossentropy",
                      steps_per_execution=steps_per_execution)
        return model

    strategy = ipu.ipu_strategy.IPUStrategy()
    with strategy.scope():
        fit = functools.partial(compiled(make_model(), 10).fit, epochs=2, verbose=0)
        return fit(make_dataset())


KERAS_ALTERNATIVES = {
    "compile's arguments positional, defaults spelled out": keras_positional_with_explicit_defaults,
    "a model built with add() under IPUStrategyV1": keras_model_built_with_add,
    "a functional model": keras_functional_model,
    "the arrays cut to whole batches, unshuffled": keras_arrays_cut_to_whole_batches,
    "a repeated dataset with steps_per_epoch=40": keras_repeated_with_steps_per_epoch,
    "helpers and functools.partial": keras_built_by_helpers,
}


@pytest.mark.parametrize("alternative", KERAS_ALTERNATIVES)
def test_a_correct_keras_program_written_another_way_is_right(alternative):
    assert_right(code_exercises.check_keras_steps_per_execution(KERAS_ALTERNATIVES[alternative]))


def test_a_validation_after_each_epoch_is_right_its_runs_told_apart():
    feedback = code_exercises.check_keras_steps_per_execution(keras_with_validation)
    assert_right(feedback)
    assert "8 engine runs of 10 steps each (and 2 engine runs of validation)" in feedback.text


# --- 03.keras-steps-per-execution: wrong attempts ---------------------------------------------

def keras_attempt(batch_size=32, drop_remainder=True, shuffle=False, learning_rate=0.01,
                  compile_options=None, fit_options=None, fits=1):
    """The Keras solution with one thing changed: the batches, a shuffle, the learning rate,
    compile's or fit's options, or fit called more than once."""
    def train_keras(images, labels):
        dataset = tf.data.Dataset.from_tensor_slices((images, labels))
        if shuffle:
            dataset = dataset.shuffle(len(images), seed=1)
        dataset = dataset.batch(batch_size, drop_remainder=drop_remainder)
        strategy = ipu.ipu_strategy.IPUStrategy()
        with strategy.scope():
            model = make_model()
            model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate),
                          loss="sparse_categorical_crossentropy",
                          **({"steps_per_execution": 10} if compile_options is None
                             else compile_options))
            for _ in range(fits):
                history = model.fit(dataset, verbose=0, **{"epochs": 2, **(fit_options or {})})
            return history
    return train_keras


KERAS_ATTEMPTS = {
    "one epoch only": (keras_attempt(fit_options={"epochs": 1}),
                       "That is one epoch of the whole dataset: train for two"),
    "fit called twice, two epochs each": (keras_attempt(fits=2),
                                          "That is 4 epochs of the whole dataset"),
    "batches of 64": (keras_attempt(batch_size=64),
                      "of batches of 64 images: the task keeps the starting code's batches "
                      "of 32"),
    "the dataset shuffled": (keras_attempt(shuffle=True), "a shuffle, a skipped batch"),
    "the learning rate scaled by the steps per execution": (
        keras_attempt(learning_rate=0.01 * 10), "times larger"),
    "steps_per_execution set, the last partial batch kept": (
        keras_attempt(drop_remainder=False),
        "write `batch(32, drop_remainder=True)` (task a)"),
    "steps_per_epoch given in place of steps_per_execution": (
        keras_attempt(compile_options={}, fit_options={"steps_per_epoch": 10}),
        "steps_per_execution is still 1, so fit launches the program once per batch. Task b: "
        "compile(..., steps_per_execution=N), with N a divisor of the 40 batches in an epoch. "
        "steps_per_epoch=10 is another setting"),
    "run_eagerly=True given to compile": (
        keras_attempt(compile_options={"steps_per_execution": 10, "run_eagerly": True}),
        "RuntimeError: Keras models cannot run eagerly when using `IPUStrategy`. Set "
        "`run_eagerly=False` when calling `compile`. Hint: an IPU runs compiled programs "
        "only: leave run_eagerly out of compile"),
}


@pytest.mark.parametrize("attempt", KERAS_ATTEMPTS)
def test_a_wrong_keras_program_gets_a_hint_on_its_own_mistake(attempt):
    code, words = KERAS_ATTEMPTS[attempt]
    assert_not_yet(code_exercises.check_keras_steps_per_execution(code), words)
