"""A pipelined MNIST classifier in the style of Graphcore's TF1 pipelining tutorial, step 3
(our own code).

The model is written as a chain of layer functions; two stages group them and
``ipu.pipelining_ops.pipeline`` runs the stages on two IPUs, feeding micro-batches from an
infeed and returning each micro-batch's loss through an outfeed.  Each ``sess.run`` processes
``batch_size x batches_to_accumulate x repeat_count`` examples.

    python -m ipu_emulator run --tf1 examples/pipelining_step3.py --epochs 1
    bash examples/profile_step3.sh            # one step, with a simulated execution trace
"""
import argparse
import time

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.keras import layers
from tensorflow.python import ipu


def parse_args():
    parser = argparse.ArgumentParser(description="Pipelined MNIST training on two IPUs.")
    parser.add_argument("--batch-size", type=int, default=32, help="micro-batch size")
    parser.add_argument("--batches-to-accumulate", type=int, default=16,
                        help="gradient accumulation count: micro-batches per weight update")
    parser.add_argument("--repeat-count", type=int, default=10,
                        help="pipeline passes per session run")
    parser.add_argument("--epochs", type=float, default=1.0, help="epochs to train for")
    parser.add_argument("--steps", type=int, default=None,
                        help="session runs to make (overrides --epochs)")
    parser.add_argument("--learning-rate", type=float, default=0.01)
    parser.add_argument("--schedule", default="Grouped",
                        choices=["Grouped", "Interleaved", "Sequential"],
                        help="pipeline schedule")
    return parser.parse_args()


# --- the model, one function per layer ------------------------------------------------
# Every layer takes and returns the learning rate, so it reaches the optimizer at the end.

def layer1_flatten(learning_rate, images, labels):
    with tf.variable_scope("flatten"):
        return learning_rate, layers.Flatten()(images), labels


def layer2_dense256(learning_rate, activations, labels):
    with tf.variable_scope("dense256"):
        return learning_rate, layers.Dense(256, activation=tf.nn.relu)(activations), labels


def layer3_dense128(learning_rate, activations, labels):
    with tf.variable_scope("dense128"):
        return learning_rate, layers.Dense(128, activation=tf.nn.relu)(activations), labels


def layer4_dense64(learning_rate, activations, labels):
    with tf.variable_scope("dense64"):
        return learning_rate, layers.Dense(64, activation=tf.nn.relu)(activations), labels


def layer5_dense32(learning_rate, activations, labels):
    with tf.variable_scope("dense32"):
        return learning_rate, layers.Dense(32, activation=tf.nn.relu)(activations), labels


def layer6_logits(learning_rate, activations, labels):
    with tf.variable_scope("logits"):
        return learning_rate, layers.Dense(10)(activations), labels


def layer7_cel(learning_rate, logits, labels):
    with tf.variable_scope("softmax_ce"):
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                     logits=logits)
    with tf.variable_scope("mean"):
        return learning_rate, tf.reduce_mean(per_example)


def optimizer_function(learning_rate, loss):
    # The pipeline accumulates the gradients and applies them after each pass.
    optimizer = tf.train.GradientDescentOptimizer(learning_rate=learning_rate)
    return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)


def main():
    args = parse_args()
    (images, labels), _ = tf.keras.datasets.mnist.load_data()
    images = (images / 255.0).astype(np.float32)
    labels = labels.astype(np.int32)

    examples_per_step = args.batch_size * args.batches_to_accumulate * args.repeat_count
    steps = args.steps or max(1, int(np.ceil(args.epochs * len(images) / examples_per_step)))
    print("Steps %d x examples per step %d (== %d training examples, %.2f epochs of %d "
          "examples)" % (steps, examples_per_step, steps * examples_per_step,
                         steps * examples_per_step / len(images), len(images)))

    # Two IPUs, one per stage; SNAKE numbering keeps consecutive stages on linked IPUs.
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.selection_order = ipu.utils.SelectionOrder.SNAKE
    config.configure_ipu_system()

    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.shuffle(len(images), seed=0).repeat()
    dataset = dataset.batch(args.batch_size, drop_remainder=True)
    infeed_queue = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset)
    outfeed_queue = ipu.ipu_outfeed_queue.IPUOutfeedQueue()

    def pipelined_model(learning_rate):
        def stage1(learning_rate, images, labels):
            r = layer1_flatten(learning_rate, images, labels)
            r = layer2_dense256(*r)
            r = layer3_dense128(*r)
            return layer4_dense64(*r)

        def stage2(*r):
            r = layer5_dense32(*r)
            r = layer6_logits(*r)
            return layer7_cel(*r)

        with tf.variable_scope("FCModel", use_resource=True):
            return ipu.pipelining_ops.pipeline(
                computational_stages=[stage1, stage2],
                gradient_accumulation_count=args.batches_to_accumulate,
                repeat_count=args.repeat_count,
                inputs=[learning_rate],
                infeed_queue=infeed_queue,
                outfeed_queue=outfeed_queue,
                optimizer_function=optimizer_function,
                pipeline_schedule=getattr(ipu.pipelining_ops.PipelineSchedule, args.schedule),
                outfeed_loss=True,
                name="Pipeline")

    learning_rate = tf.placeholder(np.float32, [])
    with ipu.scopes.ipu_scope("/device:IPU:0"):
        train = ipu.ipu_compiler.compile(pipelined_model, inputs=[learning_rate])
    read_losses = outfeed_queue.dequeue()

    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        sess.run(infeed_queue.initializer)
        started = time.time()
        for step in range(steps):
            sess.run(train, feed_dict={learning_rate: args.learning_rate})
            losses = sess.run(read_losses)
            if step % 10 == 0 or step == steps - 1:
                epoch = (step + 1) * examples_per_step / len(images)
                print("Step %d, Epoch %.1f, Mean loss: %.3f" % (step, epoch, np.mean(losses)))
        print("Elapsed %.2f s" % (time.time() - started))


if __name__ == "__main__":
    main()
