"""Host wall-time benchmark for tutorial 3 (TensorFlow 2): training with and without feeds.

Six programs train tutorial 3's MLP (Flatten, Dense 128 relu, Dense 10 softmax; batch 32,
SGD) for the same number of steps, each with its own model and optimizer:

    emulator, feeds      IPUStrategy.run of ``several_steps``, a tf.function looping
                         STEPS_PER_EXECUTION steps, next() on an infeed (iter() inside the
                         strategy), losses to an outfeed
    emulator, per step   IPUStrategy.run of ``one_step``, a one-step tf.function, batch from a
                         host iterator
    plain TF2, same function, loop / per step
                         the same two functions called without the emulator (a tf.data
                         iterator and a FIFOQueue stand in for the feeds): the emulator's own
                         overhead is emulator / same function
    plain TF2, loop / per step
                         plain TF2's best: functions that close over the model, optimizer,
                         iterator and queue instead of taking them as arguments (tf.function
                         checks each Python argument on every call, which costs a small step
                         a noticeable share of its time)

The tutorial's functions ask for jit_compile=True; the emulator drops it (XLA on the CPU
cannot compile iterator ops and is slower for convolutions), and the plain programs do not
ask for it, so all six run plain TensorFlow.  The programs run interleaved, round after
round, each round starting at the next program, so machine noise hits all of them alike; each
ratio is the median of the rounds' ratios.

    python bench/tf2_feeds.py [--steps N] [--rounds R] [--steps-per-execution K]
"""
import argparse
import statistics
import time

import ipu_emulator  # noqa: F401  (legacy Keras switch before TensorFlow loads)
import tensorflow as tf

from ipu_emulator.data import datasets
from ipu_emulator.ipu import ipu_outfeed_queue, ipu_strategy

BATCH = 32


def _batches(images, labels):
    data = tf.data.Dataset.from_tensor_slices((images, labels)).cache()
    data = data.shuffle(len(images), seed=0).batch(BATCH, drop_remainder=True)
    data = data.map(lambda x, y: (tf.cast(x, tf.float32) / 255.0, tf.cast(y, tf.int32)))
    return data.prefetch(tf.data.AUTOTUNE).repeat()


def _mlp():
    return tf.keras.Sequential([
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(10, activation="softmax")])


def _loss_and_update(model, optimizer, images, labels):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
            labels, model(images, training=True)))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss


# The tutorial's two programs, as written: everything they use comes in as an argument.

def several_steps(batches, losses, model, optimizer, count):
    for _ in tf.range(count):
        losses.enqueue(_loss_and_update(model, optimizer, *next(batches)))


def one_step(images, labels, model, optimizer):
    return _loss_and_update(model, optimizer, images, labels)


def build_emulator_feeds(data, steps, per_execution):
    strategy = ipu_strategy.IPUStrategy()
    function = tf.function(several_steps, jit_compile=True)
    with strategy.scope():
        model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)
        batches = iter(data())
        losses = ipu_outfeed_queue.IPUOutfeedQueue()

    def run():
        with strategy.scope():
            for _ in range(steps // per_execution):
                strategy.run(function, args=[batches, losses, model, optimizer, per_execution])
            return losses.dequeue()
    return run


def build_emulator_per_step(data, steps, per_execution):
    del per_execution
    strategy = ipu_strategy.IPUStrategy()
    function = tf.function(one_step, jit_compile=True)
    host_batches = iter(data())
    with strategy.scope():
        model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)

    def run():
        with strategy.scope():
            return [strategy.run(function, args=[*next(host_batches), model, optimizer])
                    for _ in range(steps)]
    return run


def _host_queue():
    return tf.queue.FIFOQueue(2 ** 31 - 1, [tf.float32], [[]])


def build_same_function_loop(data, steps, per_execution):
    function = tf.function(several_steps)
    model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)
    batches, losses = iter(data()), _host_queue()

    def run():
        for _ in range(steps // per_execution):
            function(batches, losses, model, optimizer, per_execution)
        return losses.dequeue_many(losses.size())
    return run


def build_same_function_per_step(data, steps, per_execution):
    del per_execution
    function = tf.function(one_step)
    model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)
    host_batches = iter(data())

    def run():
        return [function(*next(host_batches), model, optimizer) for _ in range(steps)]
    return run


def build_plain_loop(data, steps, per_execution):
    model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)
    batches, losses = iter(data()), _host_queue()

    @tf.function
    def loop(count):
        for _ in tf.range(count):
            losses.enqueue(_loss_and_update(model, optimizer, *next(batches)))

    def run():
        for _ in range(steps // per_execution):
            loop(tf.constant(per_execution))
        return losses.dequeue_many(losses.size())
    return run


def build_plain_per_step(data, steps, per_execution):
    del per_execution
    model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)
    host_batches = iter(data())

    @tf.function
    def step(images, labels):
        return _loss_and_update(model, optimizer, images, labels)

    def run():
        return [step(*next(host_batches)) for _ in range(steps)]
    return run


VARIANTS = {
    "emulator, feeds": build_emulator_feeds,
    "emulator, per step": build_emulator_per_step,
    "plain TF2, same function, loop": build_same_function_loop,
    "plain TF2, same function, per step": build_same_function_per_step,
    "plain TF2, loop": build_plain_loop,
    "plain TF2, per step": build_plain_per_step,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps-per-execution", type=int, default=10)
    args = parser.parse_args()
    tf.keras.utils.set_random_seed(0)
    (images, labels), _ = datasets.mnist.load_data()

    runs = {}
    for name, build in VARIANTS.items():
        runs[name] = build(lambda: _batches(images, labels), args.steps, args.steps_per_execution)
        runs[name]()  # warm-up: tracing, the first pass that fills the data cache

    seconds = {name: [] for name in VARIANTS}
    names = list(VARIANTS)
    for round_index in range(args.rounds):
        # Each round starts at the next program, so none always runs after the same one.
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            started = time.perf_counter()
            runs[name]()
            seconds[name].append(time.perf_counter() - started)

    def ratio(slower, faster):
        """The median over the rounds of each round's ratio: a burst of load on this shared
        machine spoils one round's ratio rather than shifting every median."""
        return statistics.median(a / b for a, b in zip(seconds[slower], seconds[faster]))

    print("host wall time for %d training steps of tutorial 3's MLP, %d steps per execution "
          "(median of %d interleaved rounds)" % (args.steps, args.steps_per_execution,
                                                  args.rounds))
    for name, times in seconds.items():
        value = statistics.median(times)
        print("  %-36s %8.3f s  %7.0f steps/s" % (name, value, args.steps / value))
    print("ratios measured side by side (median of the rounds' ratios):")
    print("  the emulator's own overhead, emulator / the same function called plainly:")
    print("    one step per call                        %.3fx"
          % ratio("emulator, per step", "plain TF2, same function, per step"))
    print("    %2d steps per call (feeds / plain loop)   %.3fx"
          % (args.steps_per_execution, ratio("emulator, feeds", "plain TF2, same function, loop")))
    print("  emulator, per step / plain TF2's best per step: %.3fx"
          % ratio("emulator, per step", "plain TF2, per step"))
    print("  feeds speed-up over one step per call:")
    print("    through the emulator                     %.2fx"
          % ratio("emulator, per step", "emulator, feeds"))
    print("    plain TF2, the same functions            %.2fx"
          % ratio("plain TF2, same function, per step", "plain TF2, same function, loop"))
    print("    plain TF2's best (closures)              %.2fx"
          % ratio("plain TF2, per step", "plain TF2, loop"))


if __name__ == "__main__":
    main()
