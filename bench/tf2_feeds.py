"""Host wall-time benchmark for tutorial 3 (TensorFlow 2): training with and without feeds.

Four programs train tutorial 3's MLP (Flatten, Dense 128 relu, Dense 10 softmax; batch 32,
SGD) for the same number of steps, each with its own model and optimizer:

    emulator, feeds      IPUStrategy.run of a tf.function looping STEPS_PER_EXECUTION steps,
                         next() on an infeed (iter() inside the strategy), losses to an outfeed
    emulator, per step   IPUStrategy.run of a one-step tf.function, batch from a host iterator
    plain TF2, loop      the best plain equivalent of the first: a tf.function looping over a
                         tf.data iterator, losses into a host FIFOQueue
    plain TF2, per step  a one-step tf.function called once per batch
    (and the emulator's per-step function itself, called without the emulator, to separate
    the emulator's cost from that of passing the model and optimizer as arguments)

The tutorial's functions ask for jit_compile=True; the emulator drops it (XLA on the CPU
cannot compile iterator ops and is slower for convolutions), and the plain programs do not
ask for it, so all four run plain TensorFlow.  The programs run interleaved, round after
round, so machine noise hits all of them alike; medians are compared as ratios.

    python bench/tf2_feeds.py [--steps N] [--rounds R] [--steps-per-execution K]
"""
import argparse
import statistics
import time

import ipu_emulator  # noqa: F401  (legacy Keras switch before TensorFlow loads)
import tensorflow as tf

from ipu_emulator import datasets
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


def build_emulator_feeds(data, steps, per_execution):
    strategy = ipu_strategy.IPUStrategy()

    @tf.function(jit_compile=True)
    def several_steps(batches, losses, model, optimizer, count):
        for _ in tf.range(count):
            losses.enqueue(_loss_and_update(model, optimizer, *next(batches)))

    with strategy.scope():
        model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)
        batches = iter(data())
        losses = ipu_outfeed_queue.IPUOutfeedQueue()

    def run():
        with strategy.scope():
            for _ in range(steps // per_execution):
                strategy.run(several_steps, args=[batches, losses, model, optimizer,
                                                  per_execution])
            return losses.dequeue()
    return run


def build_emulator_per_step(data, steps, per_execution):
    del per_execution
    strategy = ipu_strategy.IPUStrategy()
    host_batches = iter(data())

    @tf.function(jit_compile=True)
    def one_step(images, labels, model, optimizer):
        return _loss_and_update(model, optimizer, images, labels)

    with strategy.scope():
        model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)

    def run():
        with strategy.scope():
            return [strategy.run(one_step, args=[*next(host_batches), model, optimizer])
                    for _ in range(steps)]
    return run


def build_plain_loop(data, steps, per_execution):
    model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)
    batches = iter(data())
    losses = tf.queue.FIFOQueue(2 ** 31 - 1, [tf.float32], [[]])

    @tf.function
    def several_steps(count):
        for _ in tf.range(count):
            losses.enqueue([_loss_and_update(model, optimizer, *next(batches))])

    def run():
        for _ in range(steps // per_execution):
            several_steps(tf.constant(per_execution))
        return losses.dequeue_many(losses.size())
    return run


def build_plain_per_step(data, steps, per_execution):
    del per_execution
    model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)
    host_batches = iter(data())

    @tf.function
    def one_step(images, labels):
        return _loss_and_update(model, optimizer, images, labels)

    def run():
        return [one_step(*next(host_batches)) for _ in range(steps)]
    return run


def build_plain_per_step_with_arguments(data, steps, per_execution):
    """The emulator's per-step function as written (model and optimizer passed as arguments,
    which tf.function must check on every call), called without the emulator."""
    del per_execution
    model, optimizer = _mlp(), tf.keras.optimizers.SGD(0.01)
    host_batches = iter(data())

    @tf.function
    def one_step(images, labels, model, optimizer):
        return _loss_and_update(model, optimizer, images, labels)

    def run():
        return [one_step(*next(host_batches), model, optimizer) for _ in range(steps)]
    return run


VARIANTS = {
    "emulator, feeds": build_emulator_feeds,
    "emulator, per step": build_emulator_per_step,
    "plain TF2, loop": build_plain_loop,
    "plain TF2, per step": build_plain_per_step,
    "plain TF2, per step, same arguments": build_plain_per_step_with_arguments,
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps-per-execution", type=int, default=10)
    args = parser.parse_args()
    tf.keras.utils.set_random_seed(0)
    (images, labels), _ = datasets.mnist.load_data()

    runs = {}
    for name, build in VARIANTS.items():
        runs[name] = build(lambda: _batches(images, labels), args.steps, args.steps_per_execution)
        runs[name]()  # warm-up: tracing, the first pass that fills the data cache

    seconds = {name: [] for name in VARIANTS}
    for _ in range(args.rounds):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            seconds[name].append(time.perf_counter() - started)

    median = {name: statistics.median(times) for name, times in seconds.items()}
    print("host wall time for %d training steps of tutorial 3's MLP, %d steps per execution "
          "(median of %d interleaved rounds)" % (args.steps, args.steps_per_execution,
                                                  args.rounds))
    for name, value in median.items():
        print("  %-36s %8.3f s  %7.0f steps/s" % (name, value, args.steps / value))
    print("ratios measured side by side in this run:")
    print("  feeds speed-up over per step (emulator):  %.2fx"
          % (median["emulator, per step"] / median["emulator, feeds"]))
    print("  loop speed-up over per step (plain TF2):  %.2fx"
          % (median["plain TF2, per step"] / median["plain TF2, loop"]))
    print("  emulator overhead, feeds (emulator/plain): %.3fx"
          % (median["emulator, feeds"] / median["plain TF2, loop"]))
    print("  emulator overhead, per step:               %.3fx"
          % (median["emulator, per step"] / median["plain TF2, per step"]))
    print("  emulator overhead, per step, same function: %.3fx"
          % (median["emulator, per step"] / median["plain TF2, per step, same arguments"]))


if __name__ == "__main__":
    main()
