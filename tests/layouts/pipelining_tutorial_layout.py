"""An MNIST trainer laid out as the pipelining tutorial's scripts are (our own code).

Like the tutorial's steps, it builds the whole model first, inside ``ipu_scope`` and
``ipu_shard`` or ``pipeline``, and only then configures the IPU system, just before opening
the session (``--configure-first`` moves the configuration to the top, for comparison).

    --step 1   one IPU: an on-device loop with GradientAccumulationOptimizerV2
    --step 2   the same model sharded over two IPUs (``--colocate-gradients``: each gradient
               with its forward op instead of in the last shard, where minimize is built)
    --step 3   two pipeline stages written by hand (--schedule picks the schedule)
    --step 4   stages cut from layers found by name at the --splits; as many IPUs as stages

``--replicas N`` asks for N times the IPUs, so the device replicates the program (data
parallelism, with CrossReplicaOptimizer keeping the replicas' weights the same).

It prints one line per step with the mean loss and ends with ``Elapsed``.
"""
import argparse
import os
import sys
import time

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.keras import layers
from tensorflow.python import ipu


# The model's layers, one function each (``layer<N>_<name>``), are the pipelining example's.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "examples"))
from pipelining_step3 import (  # noqa: E402  pylint: disable=wrong-import-position,unused-import
    layer1_flatten, layer2_dense256, layer3_dense128, layer4_dense64, layer5_dense32,
    layer6_logits, layer7_cel)


def discover_layers():
    """The ``layer<N>_<name>`` functions of this module, in order of N."""
    found = []
    for symbol, function in globals().items():
        prefix, _, rest = symbol.partition("layer")
        index, _, name = rest.partition("_")
        if prefix == "" and index.isdigit() and name:
            found.append({"func": function, "id": name, "idx": int(index)})
    return sorted(found, key=lambda layer: layer["idx"])


def cut_into_stages(model_layers, splits):
    """Each split names the first layer of the next stage."""
    stages = [[]]
    pending = list(splits)
    for layer in model_layers:
        if pending and layer["id"] == pending[0]:
            pending.pop(0)
            stages.append([])
        stages[-1].append(layer)
    return stages


def parse_args(model_layers):
    parser = argparse.ArgumentParser()
    parser.add_argument("--step", type=int, choices=[1, 2, 3, 4], default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--batches-to-accumulate", type=int, default=4)
    parser.add_argument("--repeat-count", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--schedule", default="Grouped",
                        choices=["Grouped", "Interleaved", "Sequential"])
    parser.add_argument("--splits", nargs="+", default=["dense32"],
                        help="first layer of each later stage, among: "
                        + ", ".join(layer["id"] for layer in model_layers))
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--configure-first", action="store_true")
    parser.add_argument("--colocate-gradients", action="store_true",
                        help="steps 1-2: minimize(colocate_gradients_with_ops=True)")
    return parser.parse_args()


def configure(args):
    config = ipu.config.IPUConfig()
    if args.step == 1:
        config.auto_select_ipus = args.replicas
    elif args.step == 4:
        config.auto_select_ipus = (len(args.splits) + 1) * args.replicas
    else:
        config.auto_select_ipus = 2 * args.replicas
    config.selection_order = ipu.utils.SelectionOrder.SNAKE
    config.configure_ipu_system()


def data_parallel(args, optimizer):
    """With replicas, gradients are averaged over them before each update."""
    if args.replicas > 1:
        return ipu.optimizers.CrossReplicaOptimizer(optimizer)
    return optimizer


def loop_model(args, infeed, outfeed, shards):
    """Steps 1 and 2: a repeat loop whose body trains one mini-batch; ``shards(k)`` is the
    scope of the k-th half of the model."""
    def body(learning_rate, images, labels):
        with shards(0):
            r = layer1_flatten(learning_rate, images, labels)
            r = layer2_dense256(*r)
            r = layer3_dense128(*r)
            r = layer4_dense64(*r)
        with shards(1):
            r = layer5_dense32(*r)
            r = layer6_logits(*r)
            learning_rate, loss = layer7_cel(*r)
            optimizer = data_parallel(args, tf.train.GradientDescentOptimizer(
                learning_rate=learning_rate))
            optimizer = ipu.optimizers.GradientAccumulationOptimizerV2(
                optimizer, num_mini_batches=args.batches_to_accumulate)
            train_op = optimizer.minimize(
                loss=loss, colocate_gradients_with_ops=args.colocate_gradients)
        with tf.control_dependencies([train_op]):
            return learning_rate, outfeed.enqueue(loss)

    def model(learning_rate):
        iterations = args.batches_to_accumulate * args.repeat_count
        return ipu.loops.repeat(iterations, body, [learning_rate], infeed)
    return model


def pipelined_model(args, infeed, outfeed, stages):
    def make_stage(index, stage_layers):
        def stage(*values):
            for layer in stage_layers:
                with tf.variable_scope("stage%d_%s" % (index, layer["id"]), use_resource=True):
                    values = layer["func"](*values)
            return values
        return stage

    def optimizer_function(learning_rate, loss):
        optimizer = data_parallel(args, tf.train.GradientDescentOptimizer(
            learning_rate=learning_rate))
        return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

    def model(learning_rate):
        with tf.variable_scope("FCModel", use_resource=True):
            return ipu.pipelining_ops.pipeline(
                computational_stages=[make_stage(k, s) for k, s in enumerate(stages)],
                gradient_accumulation_count=args.batches_to_accumulate,
                repeat_count=args.repeat_count,
                inputs=[learning_rate],
                infeed_queue=infeed,
                outfeed_queue=outfeed,
                optimizer_function=optimizer_function,
                pipeline_schedule=getattr(ipu.pipelining_ops.PipelineSchedule, args.schedule),
                outfeed_loss=True,
                name="Pipeline")
    return model


class _NoShard:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    model_layers = discover_layers()
    args = parse_args(model_layers)
    if args.configure_first:
        configure(args)

    (images, labels), _ = tf.keras.datasets.mnist.load_data()
    images = (images[:2048] / 255.0).astype(np.float32)
    labels = labels[:2048].astype(np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).repeat()
    dataset = dataset.batch(args.batch_size, drop_remainder=True)
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    if args.step == 1:
        model = loop_model(args, infeed, outfeed, lambda index: _NoShard())
    elif args.step == 2:
        model = loop_model(args, infeed, outfeed, ipu.scopes.ipu_shard)
    else:
        splits = args.splits if args.step == 4 else ["dense32"]
        stages = cut_into_stages(model_layers, splits)
        print("Stages: " + " | ".join("-".join(l["id"] for l in s) for s in stages))
        model = pipelined_model(args, infeed, outfeed, stages)

    learning_rate = tf.placeholder(np.float32, [])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        train = ipu.ipu_compiler.compile(model, inputs=[learning_rate])
    read_losses = outfeed.dequeue()

    if not args.configure_first:
        configure(args)  # the tutorial's place: after the model, just before the session
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(infeed.initializer)
        started = time.time()
        for step in range(args.steps):
            sess.run(train, feed_dict={learning_rate: args.learning_rate})
            print("Step %d, Mean loss: %.6f" % (step, np.mean(sess.run(read_losses))))
        print("Elapsed %.2f s" % (time.time() - started))


if __name__ == "__main__":
    main()
