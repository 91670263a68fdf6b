"""Pipelining benchmark: simulated speed-ups over sharding, and the emulator's host overhead.

(a) Simulated IPU time (ipu2).  The pipelining tutorial's MLP (flatten, dense256, dense128,
    dense64, dense32, logits, cross-entropy) is cut into balanced stages (the split whose
    busiest stage has the fewest FLOPs) and simulated with Graphcore's three schedules:
    Sequential (what sharding does: one IPU busy at a time), Grouped and Interleaved.  One
    engine run makes ``--passes`` pipeline passes (the pipeline's repeat count) of
    ``--micro-batches`` micro-batches each; a pass ends in one weight update, and figures
    are per weight update (the run's makespan / passes, so the host's per-run cost is
    shared as it is in the tutorial).  Two sources of stage costs sit side by side:

      model      the layer cost model (``cost_model.stage_costs``) fed to ``simulate_pipeline``
      recorded   the same MLP built with ``pipelining_ops.pipeline``, really run through
                 the emulator, and its recorded run re-simulated (``record.last_runs``)

    The tutorial MLP has only seven layers, so eight stages cannot be cut from it; the
    8-stage figures use a uniform MLP (eight equal Dense(256) layers) whose stages balance
    exactly, and show the same for 2 and 4 stages for comparison.

(b) Host wall time on this machine.  The emulated pipeline (Grouped; 2 and 4 stages, the
    same MLP and micro-batches) against the same training in plain TensorFlow doing the
    same work: a while loop over the micro-batches accumulating the gradients, one apply
    per pass, and every micro-batch's loss brought to the host.  The plain loop runs twice
    over: on one device, and with its stages placed on the CPU devices the emulator gives
    the pipeline's IPUs.  The emulator really runs each stage on its own device, and
    TensorFlow charges for every loop that spans devices (send/receive pairs, a control loop
    per device), so the figures separate that cost of placement (placed / one device) from
    the emulator's own overhead (emulator / placed).  Variants run interleaved, round after
    round; medians are compared as ratios.

Usage:  python bench/pipelining.py [--micro-batches M] [--passes P] [--rounds R]
"""
import argparse
import contextlib
import itertools
import statistics
import time

import numpy as np

import ipu_emulator  # noqa: F401  (legacy Keras switch before TensorFlow loads)
import tensorflow.compat.v1 as tf

tf.disable_v2_behavior()
from ipu_emulator import ipu, record
from ipu_emulator.sim import builtin_models, cost_model, model_layers  # noqa: E402
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline  # noqa: E402
from ipu_emulator.runtime import shards  # noqa: E402

BATCH = 32
TARGET = "ipu2"
SCHEDULES = ("sequential", "grouped", "interleaved")
SDK_SCHEDULE = {"sequential": "Sequential", "grouped": "Grouped", "interleaved": "Interleaved"}

UNIFORM_MLP = ((model_layers.Input((256,), name="features"),)
               + tuple(model_layers.Dense(256, activation="relu", name="dense%d" % k)
                       for k in range(8))
               + (model_layers.Dense(10, name="logits"), model_layers.SoftmaxCrossEntropy(name="cel")))


# --- balanced splits ------------------------------------------------------------------------

def balanced_splits(layers, num_stages):
    """The split whose busiest stage has the fewest forward + backward FLOPs, the rest spread
    as evenly as possible (None: the model has fewer layers than stages)."""
    names = [layer.name for layer in layers[1:]]
    if num_stages > len(names):
        return None
    flops = {c.name: c.forward_flops + c.backward_flops
             for c in cost_model.layer_costs(layers, BATCH)}
    best, best_key = None, None
    for cut in itertools.combinations(range(1, len(names)), num_stages - 1):
        bounds = (0,) + cut + (len(names),)
        loads = [sum(flops[n] for n in names[a:b]) for a, b in zip(bounds, bounds[1:])]
        key = (max(loads), sum(load * load for load in loads))
        if best_key is None or key < best_key:
            best, best_key = [names[i] for i in cut], key
    return best


# --- (a) model-based figures --------------------------------------------------------------

def model_figures(layers, num_stages, micro_batches, passes):
    splits = balanced_splits(layers, num_stages)
    if splits is None:
        return None
    stages = cost_model.stage_costs(layers, splits, batch_size=BATCH)
    result = {}
    for schedule in SCHEDULES:
        timeline = simulate_pipeline(stages, schedule, micro_batches, repeat_count=passes,
                                     target=TARGET, batch_size=BATCH)
        result[schedule] = timeline.metrics
    return result


# --- the tutorial MLP in TensorFlow, one function per layer -------------------------------

def _tf_layers():
    """The MLP's Keras layers by name (made once per graph: calling a layer again reuses
    its weights)."""
    dense = tf.keras.layers.Dense
    return {"flatten": tf.keras.layers.Flatten(), "dense256": dense(256, tf.nn.relu),
            "dense128": dense(128, tf.nn.relu), "dense64": dense(64, tf.nn.relu),
            "dense32": dense(32, tf.nn.relu), "logits": dense(10)}


def _apply_layers(layers, names, activations, labels):
    """Run the named layers; returns (activations, labels) or the loss if 'cel' is among them."""
    for name in names:
        if name == "cel":
            return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=activations))
        activations = layers[name](activations)
    return activations, labels


def _make_stage(layers, names):
    def stage(activations, labels):
        return _apply_layers(layers, names, activations, labels)
    return stage


def _dataset():
    rng = np.random.default_rng(0)
    images = rng.random((64 * BATCH, 28, 28), dtype=np.float32)
    labels = rng.integers(0, 10, 64 * BATCH).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(
        BATCH, drop_remainder=True)


def _sgd(loss):
    return ipu.pipelining_ops.OptimizerFunctionOutput(
        tf.train.GradientDescentOptimizer(0.01), loss)


def build_emulated_pipeline(stage_names, schedule, micro_batches, passes, ordinal):
    """``pipelining_ops.pipeline`` on ``/device:IPU:{ordinal}``: ``passes`` weight updates of
    ``micro_batches`` micro-batches per ``sess.run``."""
    infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(_dataset())
    outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue()
    layers = _tf_layers()

    def model():
        with tf.variable_scope("mlp", use_resource=True):
            return ipu.pipelining_ops.pipeline(
                computational_stages=[_make_stage(layers, names) for names in stage_names],
                gradient_accumulation_count=micro_batches, repeat_count=passes,
                infeed_queue=infeed, outfeed_queue=outfeed, outfeed_loss=True,
                optimizer_function=_sgd,
                pipeline_schedule=getattr(ipu.pipelining_ops.PipelineSchedule,
                                          SDK_SCHEDULE[schedule]))

    with ipu.scopes.ipu_scope("/device:IPU:%d" % ordinal):
        program = ipu.ipu_compiler.compile(model, inputs=[])
    losses = outfeed.dequeue()
    return [infeed.initializer], lambda sess: (sess.run(program), sess.run(losses))


def build_plain_accumulation(stage_names, micro_batches, passes, devices=None):
    """The same training in plain TensorFlow, doing the same work as the pipeline: per pass,
    a while loop over the micro-batches adds each one's gradients into one accumulator
    variable per weight, then one apply with their mean (what the pipeline computes).  Every
    micro-batch's loss reaches the host (a TensorArray fetched with the run), as the
    pipeline's loss outfeed does.

    ``devices``: one TensorFlow device per stage.  Each stage's forward ops, their gradients
    (colocated), its weights' accumulators and updates then run there, the loop itself on
    the first stage's device and the dataset iterator on CPU:0, which is where the emulator
    puts a pipeline's stages, loop and infeed.  None: everything on the session's default
    device."""
    iterator = tf.data.make_initializable_iterator(_dataset())
    layers = _tf_layers()
    optimizer = tf.train.GradientDescentOptimizer(0.01)
    total = micro_batches * passes

    def on(device):
        return tf.device(device) if devices else contextlib.nullcontext()

    def loss_of_next_batch():
        with on("/device:CPU:0"):
            values = iterator.get_next()
        with tf.variable_scope("mlp", use_resource=True):
            for k, names in enumerate(stage_names):
                with on(devices[k] if devices else None):
                    values = _apply_layers(layers, names, *values)
        return values

    loss_of_next_batch()  # create the variables once, outside the loops
    variables = tf.trainable_variables()
    sums = []
    for variable in variables:
        with on(variable.device):
            sums.append(tf.Variable(tf.zeros(variable.shape), trainable=False,
                                    use_resource=True, name="sum"))

    def one_pass(count, losses):
        def accumulate(step, losses):
            loss = loss_of_next_batch()
            gradients = tf.gradients(loss, variables, colocate_gradients_with_ops=True)
            added = []
            for total_so_far, gradient in zip(sums, gradients):
                with on(total_so_far.device):
                    added.append(total_so_far.assign_add(gradient))
            with tf.control_dependencies(added):
                return step + 1, losses.write(count * micro_batches + step, loss)

        steps, losses = tf.while_loop(lambda step, _: step < micro_batches, accumulate,
                                      [0, losses], parallel_iterations=1)
        means, cleared = [], []
        for total_so_far, variable in zip(sums, variables):
            with on(total_so_far.device), tf.control_dependencies([steps]):
                value = total_so_far.read_value()
                means.append((value / micro_batches, variable))
                cleared.append(total_so_far.assign(tf.zeros_like(value)))
        update = optimizer.apply_gradients(means)
        with tf.control_dependencies([update] + cleared):
            return count + 1, losses

    with on(devices[0] if devices else None):
        count, losses = tf.while_loop(lambda count, _: count < passes, one_pass,
                                      [0, tf.TensorArray(tf.float32, size=total)],
                                      parallel_iterations=1)
        run = [count, losses.stack()]
    return [iterator.initializer], lambda sess: sess.run(run)


# --- (a) recorded figures -------------------------------------------------------------------

def recorded_figures(num_stages, ordinal, micro_batches, passes):
    """Simulated metrics of a real emulated run per schedule."""
    names = cost_model.split_stages(builtin_models.TUTORIAL_MLP,
                              balanced_splits(builtin_models.TUTORIAL_MLP, num_stages))
    result = {}
    for schedule in SCHEDULES:
        graph = tf.Graph()
        with graph.as_default():
            initializers, run = build_emulated_pipeline(names, schedule, micro_batches,
                                                        passes, ordinal)
            init = [tf.global_variables_initializer()] + initializers
            with tf.Session(graph=graph) as sess:
                sess.run(init)
                run(sess)  # first run: the compile-time checks
                run(sess)
        result[schedule] = record.last_runs(1).simulate(target=TARGET,
                                                        batch_size=BATCH).metrics
    return result


def print_speedups(title, figures_by_stages, micro_batches, passes):
    print(title)
    print("  %-7s %-12s %14s %12s %9s %10s" % ("stages", "schedule", "makespan/upd",
                                              "samples/s", "speed-up", "host share"))
    for num_stages, figures in figures_by_stages.items():
        if figures is None:
            print("  %-7d (not possible: the model has fewer layers than stages)" % num_stages)
            continue
        sharded = figures["sequential"].makespan
        for schedule in SCHEDULES:
            metrics = figures[schedule]
            per_update = metrics.makespan / passes
            print("  %-7d %-12s %11.1f us %12.0f %8.2fx %9.0f%%" % (
                num_stages, schedule if schedule != "sequential" else "sequential*",
                per_update * 1e6, BATCH * micro_batches / per_update,
                sharded / metrics.makespan, 100 * metrics.host_overhead_fraction))
    print("  (* sequential = sharding; speed-up = sharded makespan / schedule makespan; host "
          "share = the host's per-run cost in the makespan)")


# --- (b) host overhead ----------------------------------------------------------------------

def host_overhead(micro_batches, passes, rounds, ordinals):
    """Emulated pipelines against the same training in plain TensorFlow, both on one device
    and with the stages placed on the CPU devices the emulator uses for the pipeline's IPUs
    (TensorFlow's own cost of running one loop across several devices: send/receive pairs
    and a control loop per device)."""
    one_device = "plain TF, one device"
    variants = {one_device: lambda: build_plain_accumulation(
        cost_model.split_stages(builtin_models.TUTORIAL_MLP, ()), micro_batches, passes)}
    for num_stages, ordinal in ordinals.items():
        names = cost_model.split_stages(builtin_models.TUTORIAL_MLP,
                                   balanced_splits(builtin_models.TUTORIAL_MLP, num_stages))
        devices = [shards.cpu_device(ordinal, k) for k in range(num_stages)]
        variants["plain TF, %d stages placed" % num_stages] = (
            lambda n=names, d=devices: build_plain_accumulation(n, micro_batches, passes, d))
        variants["emulator pipeline, %d stages" % num_stages] = (
            lambda n=names, o=ordinal: build_emulated_pipeline(n, "grouped", micro_batches,
                                                               passes, o))

    sessions = {}
    for name, build in variants.items():
        graph = tf.Graph()
        with graph.as_default():
            tf.set_random_seed(1)
            initializers, run = build()
            init = [tf.global_variables_initializer()] + initializers
        sess = tf.Session(graph=graph)
        sess.run(init)
        run(sess)  # warm-up: graph optimisation and first-run checks
        sessions[name] = (sess, run)

    seconds = {name: [] for name in variants}
    for _ in range(rounds):
        for name, (sess, run) in sessions.items():
            started = time.perf_counter()
            run(sess)
            seconds[name].append(time.perf_counter() - started)
    median = {name: statistics.median(times) for name, times in seconds.items()}
    samples = BATCH * micro_batches * passes
    print("host wall time, %d passes x %d micro-batches of %d (median of %d interleaved "
          "rounds)" % (passes, micro_batches, BATCH, rounds))
    for name, value in median.items():
        print("  %-36s %8.3f s  %8.0f samples/s" % (name, value, samples / value))
    print("ratios measured side by side in this run:")
    print("  %-7s %16s %18s %22s" % ("stages", "emulator/plain", "emulator/placed",
                                     "placed/plain"))
    plain = median[one_device]
    for num_stages in ordinals:
        emulated = median["emulator pipeline, %d stages" % num_stages]
        placed = median["plain TF, %d stages placed" % num_stages]
        print("  %-7d %15.2fx %17.2fx %21.2fx" % (num_stages, emulated / plain,
                                                  emulated / placed, placed / plain))
    print("  (plain = plain TF on one device; placed = plain TF with its stages on the "
          "pipeline's devices;\n   emulator/placed is the emulator's own overhead, "
          "placed/plain TensorFlow's cost of the placement)")
    for sess, _ in sessions.values():
        sess.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--micro-batches", type=int, default=16,
                        help="gradient accumulation count (a multiple of 16 suits every "
                             "schedule up to 8 stages)")
    parser.add_argument("--passes", type=int, default=10,
                        help="pipeline passes (weight updates) per engine run / sess.run")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    # One TensorFlow device per pipeline depth: /device:IPU:0 has 2 IPUs, IPU:1 has 4.
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = [2, 4]
    config.configure_ipu_system()
    ordinals = {2: 0, 4: 1}

    print("simulated %s time; micro-batch %d, %d micro-batches per weight update, %d "
          "weight updates per engine run\n" % (TARGET, BATCH, args.micro_batches, args.passes))
    for layers, label in ((builtin_models.TUTORIAL_MLP, "tutorial MLP"),
                          (UNIFORM_MLP, "uniform MLP (8 x Dense 256)")):
        for num_stages in (2, 4, 8):
            splits = balanced_splits(layers, num_stages)
            if splits is not None:
                print("  %s, %d stages: %s" % (
                    label, num_stages,
                    " | ".join(",".join(s) for s in cost_model.split_stages(layers, splits))))
    print()
    print_speedups("(a) model-based, tutorial MLP (cost_model.stage_costs):",
                   {n: model_figures(builtin_models.TUTORIAL_MLP, n, args.micro_batches, args.passes)
                    for n in (2, 4, 8)}, args.micro_batches, args.passes)
    print()
    print_speedups("(a) recorded, tutorial MLP (pipelining_ops.pipeline run in the emulator):",
                   {n: recorded_figures(n, ordinals[n], args.micro_batches, args.passes)
                    for n in (2, 4)}, args.micro_batches, args.passes)
    print()
    print_speedups("(a) model-based, uniform MLP (balanced exactly):",
                   {n: model_figures(UNIFORM_MLP, n, args.micro_batches, args.passes)
                    for n in (2, 4, 8)}, args.micro_batches, args.passes)
    print()
    print("(b) ", end="")
    host_overhead(args.micro_batches, args.passes, args.rounds, ordinals)


if __name__ == "__main__":
    main()
