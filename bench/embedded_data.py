"""What a check's digits cost when they are embedded in its graph as constants
(``Dataset.from_tensor_slices`` of the NumPy arrays) against fed from placeholders at the
infeed's initializer (``code_exercises.fed_digits_dataset``), side by side.

Each setting builds twenty small graphs in a fresh Python, as twenty checks of notebook 09 do:
2,048 digits (6.4 MB of float32 images) in a dataset, an initializable iterator, a session that
reads 64 batches; the process's user and system CPU and its page faults, medians over
alternating rounds.  Embedded, the digits are copied into the graph, its serialized form and
the session's own copy, and each copy is memory the kernel hands out afresh.  On this machine
(2026-11-30, medians of three rounds): 1.87 s of CPU and 404,000 page faults embedded, 0.54 s
and 1,400 fed: about 65 ms a check.
Usage:  python bench/embedded_data.py [--rounds R]
"""
import os

from _alternating import child_json, medians_from_command_line, print_two_settings

CHILD = r"""
import json, resource, sys
import ipu_emulator
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_v2_behavior()
embedded = sys.argv[1] == "embedded"
images = np.random.default_rng(0).random((2048, 28, 28), dtype=np.float32)
labels = np.zeros(2048, np.int32)

def one_check():
    with tf.Graph().as_default():
        if embedded:
            dataset, feed = tf.data.Dataset.from_tensor_slices((images, labels)), None
        else:
            images_in = tf.placeholder(tf.float32, images.shape)
            labels_in = tf.placeholder(tf.int32, labels.shape)
            dataset = tf.data.Dataset.from_tensor_slices((images_in, labels_in))
            feed = {images_in: images, labels_in: labels}
        iterator = tf.data.make_initializable_iterator(dataset.repeat().batch(32))
        total = tf.reduce_sum(iterator.get_next()[0])
        with tf.Session() as session:
            session.run(iterator.initializer, feed)
            for _ in range(64):
                session.run(total)

one_check()   # TensorFlow's first session, outside the measure
before = resource.getrusage(resource.RUSAGE_SELF)
for _ in range(20):
    one_check()
after = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"CPU s": after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime,
                  "page faults": after.ru_minflt - before.ru_minflt}))
"""


def measure(setting):
    return child_json(CHILD, setting, env=dict(os.environ))


if __name__ == "__main__":
    rounds, medians = medians_from_command_line(__doc__, measure, ["embedded", "fed"])
    print_two_settings(rounds, medians, "CPU s", "CPU, fed over embedded")
