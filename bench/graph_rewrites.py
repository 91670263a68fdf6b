"""Sessions with and without TensorFlow's Grappler rewrites (ipu_emulator.runtime.graph_rewrites).

Each round starts two fresh Python processes, one as the emulator runs now (Grappler off)
and one with Grappler's default rewrites, in alternating order.  Each runs the checks of
the model-parallel exercises (notebooks 07, 09, 11 and 12) on their reference solutions,
as a learner's first check does, and then trains notebook 02's conv net through the
emulator (3 looped epochs of 125 steps, batch 32, Adam, on random images).  It reports the
CPU time of the checks and the host wall time of the training; medians over the rounds,
then ratios.  Usage:  python bench/graph_rewrites.py [--rounds R]
"""
import os

from _alternating import child_json, medians_from_command_line

CHILD = r"""
import json, sys, time
import numpy as np
import ipu_emulator
import tensorflow.compat.v1 as tf
tf.get_logger().setLevel("ERROR")
tf.disable_v2_behavior()
from ipu_emulator import ipu
from ipu_emulator.runtime import shards
if sys.argv[1] == "grappler":
    shards.without_grappler = lambda config: config      # the session's config as given
from ipu_emulator.code_exercises import (nb07_sharding, nb09_pipelining,
                                         nb11_configurable_stages, nb12_memory)

started = time.process_time()
for feedback in (nb07_sharding.check_sharded_step(nb07_sharding.solution),
                 nb09_pipelining.check_pipelined_model(nb09_pipelining.solution),
                 nb11_configurable_stages.check_configurable_pipeline(
                     nb11_configurable_stages.solution),
                 nb12_memory.check_fits_in_memory(nb12_memory.solution_configure_ipus,
                                                  nb12_memory.solution_pipelined_model)):
    assert feedback.ok, feedback.text
checks = time.process_time() - started

STEPS, BATCH = 125, 32
rng = np.random.default_rng(0)
images = rng.integers(0, 256, (STEPS * BATCH, 28, 28), dtype=np.uint8)
labels = rng.integers(0, 10, STEPS * BATCH).astype(np.int32)
with tf.Graph().as_default():
    data = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(
        BATCH, drop_remainder=True).map(lambda x, y: (tf.cast(x, tf.float32) / 255, y))
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
    model = tf.keras.Sequential([
        tf.keras.layers.Reshape((28, 28, 1)),
        tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
        tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
        tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
    optimizer = tf.train.AdamOptimizer(0.01)

    def body(total, x, y):
        loss = tf.losses.sparse_softmax_cross_entropy(y, model(x, training=True))
        return [total + loss, optimizer.minimize(loss)]

    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 1
    config.configure_ipu_system()
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        epoch = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(STEPS, body, [0.0], infeed))
    with tf.Session() as sess:
        sess.run([tf.global_variables_initializer(), infeed.initializer])
        started = time.perf_counter()
        for _ in range(3):
            sess.run(epoch)
        training = time.perf_counter() - started
print(json.dumps({"checks_cpu_s": checks, "training_s": training}))
"""

MODES = ("off", "grappler")


def measure(mode):
    return child_json(CHILD, mode, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
                                            IPU_EMULATOR_DATA="sample"))


def main():
    rounds, median = medians_from_command_line(__doc__, measure, MODES)
    print(f"checks of 07, 09, 11, 12 and notebook 02's training, {rounds} rounds (medians)")
    for mode, name in (("off", "Grappler off (default)"), ("grappler", "Grappler on")):
        m = median[mode]
        print(f"  {name:24s} checks {m['checks_cpu_s']:.2f} s CPU, "
              f"training {m['training_s']:.2f} s host wall time")
    off, on = median["off"], median["grappler"]
    print(f"  off / on: checks {off['checks_cpu_s'] / on['checks_cpu_s']:.2f}x, "
          f"training {off['training_s'] / on['training_s']:.2f}x")


if __name__ == "__main__":
    main()
