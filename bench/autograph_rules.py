"""A process's first TF2 program with and without the emulator on AutoGraph's do-not-convert
list (ipu_emulator.runtime.autograph_rules).

Each round starts two fresh Python processes, one as the emulator runs now (its SDK packages
on the list) and one with them taken off it again, in alternating order.  Each runs the
program of notebook 03's layout: an IPUStrategy running a ``tf.function`` whose
``loops.repeat`` body reads an infeed, computes a Keras layer's loss, applies its gradients
and outfeeds the loss.  It reports the CPU time of the first call (tracing it: where AutoGraph
converts what the program calls) and of a second call; medians over the rounds, then ratios.
Usage:  python bench/autograph_rules.py [--rounds R]
"""
import os

from _alternating import child_json, medians_from_command_line

CHILD = r"""
import json, sys, time
import tensorflow as tf
tf.get_logger().setLevel("ERROR")
from ipu_emulator import ipu
from ipu_emulator.runtime import autograph_rules
from tensorflow.python.autograph.core import config as autograph_config
if sys.argv[1] == "converted":
    ours = {str(autograph_config.DoNotConvert(p)) for p in autograph_rules.SDK_PACKAGES}
    autograph_config.CONVERSION_RULES = tuple(
        rule for rule in autograph_config.CONVERSION_RULES if str(rule) not in ours)

cfg = ipu.config.IPUConfig()
cfg.auto_select_ipus = 1
cfg.configure_ipu_system()
data = tf.data.Dataset.from_tensor_slices(
    (tf.random.normal([256, 32]), tf.random.uniform([256], maxval=10, dtype=tf.int32)))
strategy = ipu.ipu_strategy.IPUStrategyV1()
with strategy.scope():
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data.batch(16, drop_remainder=True).repeat())
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    layer = tf.keras.layers.Dense(10)
    optimizer = tf.keras.optimizers.SGD(0.01)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.keras.losses.sparse_categorical_crossentropy(
                y, layer(x), from_logits=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, layer.trainable_variables),
                                      layer.trainable_variables))
        outfeed.enqueue(loss)

    @tf.function(jit_compile=True)
    def training_loop():
        ipu.loops.repeat(16, step, [], infeed)

    layer.build([None, 32])
    infeed.initializer
    cpu = []
    for _ in range(2):
        started = time.process_time()
        strategy.run(training_loop)
        losses = list(outfeed)
        cpu.append(time.process_time() - started)
assert len(losses) == 16
print(json.dumps({"first_call_cpu_s": cpu[0], "second_call_cpu_s": cpu[1]}))
"""

MODES = ("listed", "converted")


def measure(mode):
    # From a file: AutoGraph converts only functions whose source it can read.
    return child_json(CHILD, mode, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                      as_file=True)


def main():
    rounds, median = medians_from_command_line(__doc__, measure, MODES)
    print(f"a TF2 program's first and second call, {rounds} rounds (medians)")
    for mode, name in (("listed", "SDK packages listed (default)"),
                       ("converted", "converted by AutoGraph")):
        m = median[mode]
        print(f"  {name:30s} first call {m['first_call_cpu_s']:.2f} s CPU, "
              f"second {m['second_call_cpu_s']:.3f} s CPU")
    listed, converted = median["listed"], median["converted"]
    print(f"  listed / converted: first call "
          f"{listed['first_call_cpu_s'] / converted['first_call_cpu_s']:.2f}x, second "
          f"{listed['second_call_cpu_s'] / converted['second_call_cpu_s']:.2f}x")


if __name__ == "__main__":
    main()
