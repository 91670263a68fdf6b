"""Kernel memory with and without the emulator's release of freed memory once runs pause.

Each round starts two fresh Python processes, one with IPU_EMULATOR_RELEASE_MEMORY=1 (the
default) and one with =0, in alternating order; each trains notebook 02's conv net through
the emulator on 4,000 random images (3 looped epochs of 125 steps, then 125 per-step runs,
batch 32, Adam, as notebook 02 did on the 4,000-digit stand-in for Fashion-MNIST), and reports its peak resident memory (VmHWM), its anonymous (private)
memory once it has been idle for longer than memory_release.IDLE_S, and the host wall time
of the training.  Medians over the rounds, then
ratios.  Usage:  python bench/memory_release.py [--rounds R]
"""
import os

from _alternating import child_json, medians_from_command_line

CHILD = r"""
import json, time
import numpy as np
import ipu_emulator
import tensorflow.compat.v1 as tf
tf.get_logger().setLevel("ERROR")
tf.disable_v2_behavior()
from ipu_emulator import ipu

STEPS, BATCH = 125, 32
rng = np.random.default_rng(0)
images = rng.integers(0, 256, (STEPS * BATCH, 28, 28), dtype=np.uint8)
labels = rng.integers(0, 10, STEPS * BATCH).astype(np.int32)
data = tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(
    BATCH, drop_remainder=True).map(lambda x, y: (tf.cast(x, tf.float32) / 255, y))
infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(data)
host_batches = tf.data.make_initializable_iterator(data)
model = tf.keras.Sequential([
    tf.keras.layers.Reshape((28, 28, 1)),
    tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
    tf.keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
    tf.keras.layers.Flatten(), tf.keras.layers.Dense(10)])
optimizer = tf.train.AdamOptimizer(0.01)

def loss_of(x, y):
    return tf.losses.sparse_softmax_cross_entropy(y, model(x, training=True))

def body(total, x, y):
    loss = loss_of(x, y)
    return [total + loss, optimizer.minimize(loss)]

def step(x, y):
    loss = loss_of(x, y)
    return [loss, optimizer.minimize(loss)]

config = ipu.config.IPUConfig()
config.auto_select_ipus = 1
config.configure_ipu_system()
with ipu.scopes.ipu_scope("/device:IPU:0"):
    epoch = ipu.ipu_compiler.compile(lambda: ipu.loops.repeat(STEPS, body, [0.0], infeed))
    one_step = ipu.ipu_compiler.compile(step, list(host_batches.get_next()))
with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run([infeed.initializer, host_batches.initializer])
    started = time.perf_counter()
    for _ in range(3):
        sess.run(epoch)
    for _ in range(STEPS):
        sess.run(one_step)
    seconds = time.perf_counter() - started
    from ipu_emulator.runtime import memory_release
    during = memory_release.releases()        # none expected: the runs never paused
time.sleep(memory_release.IDLE_S + 1.0)       # the learner reads: the kernel is idle

status = dict(line.split(":", 1) for line in open("/proc/self/status"))
rollup = dict(line.split(":", 1) for line in open("/proc/self/smaps_rollup").read().splitlines()[1:])
kib = lambda text: int(text.split()[0])
print(json.dumps({"peak_gb": kib(status["VmHWM"]) / 2**20,
                  "private_gb": kib(rollup["Anonymous"]) / 2**20, "seconds": seconds,
                  "during": during, "releases": memory_release.releases()}))
"""


def measure(release):
    return child_json(CHILD, env=dict(os.environ, IPU_EMULATOR_RELEASE_MEMORY=release,
                                      TF_CPP_MIN_LOG_LEVEL="3"))


def main():
    rounds, median = medians_from_command_line(__doc__, measure, ("1", "0"))
    print(f"notebook 02's training, {rounds} rounds (medians)")
    for release, name in (("1", "release on (default)"), ("0", "release off")):
        m = median[release]
        print(f"  {name:22s} peak resident {m['peak_gb']:.3f} GB, private when idle "
              f"{m['private_gb']:.3f} GB, training {m['seconds']:.2f} s host wall time, "
              f"releases {m['during']:.0f} during it, {m['releases']:.0f} in all")
    on, off = median["1"], median["0"]
    print(f"  on / off: peak resident {on['peak_gb'] / off['peak_gb']:.2f}x, private "
          f"{on['private_gb'] / off['private_gb']:.2f}x, time {on['seconds'] / off['seconds']:.2f}x")


if __name__ == "__main__":
    main()
