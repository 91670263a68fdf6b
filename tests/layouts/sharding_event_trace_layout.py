"""A graph sharded over two IPUs, laid out as the SDK 1.x user guide's sharding examples are
(our own code, TF1): configure two IPUs with the functional configuration API and profiling on,
build the inputs and an IPU event trace op on the CPU, compile a function whose two halves sit
in two ``ipu_shard`` scopes, and run it.  As in the guide the trace op is built but not run,
unless ``--report`` asks for it: then the events of the runs are fetched and read with the
``ipu.utils`` report helpers.

    --steps N    how many times the sharded graph runs (default: 2)
    --report     run the trace op after the steps and print what the helpers extract

Each step prints ``step {k}: {result}``; with ``--report`` the script then prints the event
types (``event types: [...]``), the number of compile and execute reports and the whole text.
"""
import argparse

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.compiler.plugin.poplar.ops import gen_ipu_ops
from tensorflow.python.ipu import ipu_compiler, scopes, utils

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=2)
parser.add_argument("--report", action="store_true")
args = parser.parse_args()

NUM_IPUS = 2

cfg = utils.create_ipu_config(profiling=True, use_poplar_text_report=True,
                              profile_execution=True)
cfg = utils.auto_select_ipus(cfg, NUM_IPUS)
utils.configure_ipu_system(cfg)

# The host side of the graph: the inputs, and the op that reads the IPU event trace.
with tf.device("cpu"):
    pa = tf.placeholder(np.float32, [4], name="a")
    pb = tf.placeholder(np.float32, [4], name="b")
    pc = tf.placeholder(np.float32, [4], name="c")
    report = gen_ipu_ops.ipu_event_trace()


def sharded_graph(a, b, c):
    with scopes.ipu_shard(0):
        first = a * b + 1.0
    with scopes.ipu_shard(1):
        second = tf.reduce_sum(first * c)
    return second


with scopes.ipu_scope("/device:IPU:0"):
    result = ipu_compiler.compile(sharded_graph, [pa, pb, pc])

with tf.Session() as sess:
    feed = {pa: np.arange(4.0), pb: np.ones(4), pc: np.full(4, 2.0)}
    for step in range(args.steps):
        print("step %d: %s" % (step, sess.run(result, feed_dict=feed)[0]))
    if args.report:
        events = sess.run(report)
        print("event types: %s" % utils.extract_all_types_from_event_trace(events))
        print("compile reports: %d" % len(utils.extract_compile_reports(events)))
        print("execute reports: %d" % len(utils.extract_execute_reports(events)))
        print(utils.extract_all_strings_from_event_trace(events))
