"""Build first, configure last: the layout of the 2019 user guide's feed example (our code).

Scripts for the ``tensorflow.contrib.ipu`` API often build the whole graph (feeds, loop,
compile) and only configure the IPU system right before opening the session.  The feeds'
``replication_factor`` is then what tells the program how many replicas it will have; the
device configured later must agree (IPUs / shards = replication factor).

    python -m ipu_emulator run --tf1 examples/tf1_configure_after_build.py
    python -m ipu_emulator run --tf1 examples/tf1_configure_after_build.py --ipus 4  # refused
"""
import argparse

import tensorflow.compat.v1 as tf

from tensorflow.contrib.ipu import (ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue, loops,
                                    ops, utils)

parser = argparse.ArgumentParser()
parser.add_argument("--replicas", type=int, default=2, help="the feeds' replication_factor")
parser.add_argument("--ipus", type=int, default=2, help="IPUs of the configured device")
parser.add_argument("--iterations", type=int, default=10)
args = parser.parse_args()

# Element k is a vector filled with k, so the output shows which element each replica took.
counting = tf.data.Dataset.range(1_000_000).map(lambda k: tf.fill([4], tf.cast(k, tf.float32)))
pairs = counting.map(lambda v: (v, 10.0 * v))

infeed = ipu_infeed_queue.IPUInfeedQueue(pairs, feed_name="pairs_in",
                                         replication_factor=args.replicas)
outfeed = ipu_outfeed_queue.IPUOutfeedQueue(feed_name="sums_out",
                                            replication_factor=args.replicas)


def body(small, large):
    return outfeed.enqueue({"total": small + large, "gap": large - small})


def device_loop():
    return loops.repeat(args.iterations, body, [], infeed)


with ops.ipu_scope("/device:IPU:0"):
    run_loop = ipu_compiler.compile(device_loop, inputs=[])
fetch_results = outfeed.dequeue()

# Only now is the hardware chosen: a 1-shard program on this device runs as IPUs/1 replicas.
config = utils.create_ipu_config()
config = utils.auto_select_ipus(config, args.ipus)
utils.configure_ipu_system(config)

with tf.Session() as sess:
    sess.run(infeed.initializer)
    sess.run(run_loop)
    results = sess.run(fetch_results)

total = results["total"]
print("total shape %s" % (total.shape,))
if total.ndim == 3:  # [iterations, replicas, 4]
    for replica in range(total.shape[1]):
        taken = (total[:, replica, 0] / 11.0).astype(int).tolist()
        print("replica %d took elements %s" % (replica, taken))
