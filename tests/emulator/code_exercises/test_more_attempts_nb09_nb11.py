"""More attempts at notebooks 09 and 11's code exercises, written as new learners would: correct
pipelines spelled another way than the reference (each judged Right), and wrong ones of the
kinds learners write (each judged "Not yet" with a hint on its own mistake, no traceback).
Each attempt runs through the check once, in process."""
import functools
import itertools

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb09_pipelining, nb11_configurable_stages
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_not_yet, assert_right, outside_solutions_mode)

pytestmark = pytest.mark.filterwarnings("ignore:`tf.layers.dense` is deprecated")

v1 = tf.compat.v1
DENSE = [("dense256", 256), ("dense128", 128), ("dense64", 64)]


# --- 09: the pipeline, written as learners would -------------------------------------------

def flatten_to_dense64(images):
    with v1.variable_scope("flatten"):
        activations = tf.keras.layers.Flatten()(images)
    for name, width in DENSE:
        with v1.variable_scope(name):
            activations = tf.keras.layers.Dense(width, activation=tf.nn.relu)(activations)
    return activations


def dense32_to_loss(activations, labels, reduce=tf.reduce_mean):
    with v1.variable_scope("dense32"):
        activations = tf.keras.layers.Dense(32, activation=tf.nn.relu)(activations)
    with v1.variable_scope("logits"):
        logits = tf.keras.layers.Dense(10)(activations)
    with v1.variable_scope("softmax_ce"):
        return reduce(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                     logits=logits))


def plain_sgd(learning_rate, loss):
    return ipu.pipelining_ops.OptimizerFunctionOutput(
        v1.train.GradientDescentOptimizer(learning_rate), loss)


def sdk1_pipeline_depth(learning_rate, infeed, outfeed):
    """The stages as inner functions, the pipeline from the module `ipu.ops.pipelining_ops`
    with SDK 1.x's name for the count, pipeline_depth=16."""
    pipelining_ops = ipu.ops.pipelining_ops

    def stage1(lr, images, labels):
        return lr, flatten_to_dense64(images), labels

    def stage2(lr, activations, labels):
        return lr, dense32_to_loss(activations, labels)

    return pipelining_ops.pipeline(
        computational_stages=[stage1, stage2], pipeline_depth=16, repeat_count=4,
        inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=plain_sgd,
        pipeline_schedule=pipelining_ops.PipelineSchedule.Grouped, outfeed_loss=True)


class FirstStage:
    """Stage 1 as an object, its layers written out one by one, the ReLU named by a string."""

    def __call__(self, learning_rate, images, labels):
        with v1.variable_scope("flatten"):
            x = tf.keras.layers.Flatten()(images)
        with v1.variable_scope("dense256"):
            x = tf.keras.layers.Dense(256, activation="relu")(x)
        with v1.variable_scope("dense128"):
            x = tf.keras.layers.Dense(128, activation="relu")(x)
        with v1.variable_scope("dense64"):
            x = tf.keras.layers.Dense(64, activation="relu")(x)
        return learning_rate, x, labels


class SecondStage:
    def __call__(self, learning_rate, x, labels):
        with v1.variable_scope("dense32"):
            x = tf.keras.layers.Dense(32, activation="relu")(x)
        with v1.variable_scope("logits"):
            logits = tf.keras.layers.Dense(10)(x)
        with v1.variable_scope("softmax_ce"):
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=logits))
        return learning_rate, loss


class Optimize:
    def __call__(self, learning_rate, loss):
        return ipu.pipelining_ops.OptimizerFunctionOutput(
            v1.train.GradientDescentOptimizer(learning_rate=learning_rate), loss)


def stage_objects(learning_rate, infeed, outfeed):
    """The stages and the optimizer function as objects with __call__, the stages positional."""
    return ipu.pipelining_ops.pipeline(
        [FirstStage(), SecondStage()], gradient_accumulation_count=16, repeat_count=4,
        inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=Optimize(),
        pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Grouped, outfeed_loss=True)


def layers_stage(layers, learning_rate, activations, labels, ends_with_loss=False):
    """One helper for both stages: ``layers`` as (scope, width), None for the flatten."""
    for name, width in layers:
        with v1.variable_scope(name):
            if width is None:
                activations = tf.keras.layers.Flatten()(activations)
            else:
                activations = tf.keras.layers.Dense(
                    width, activation=tf.nn.relu if name != "logits" else None)(activations)
    if not ends_with_loss:
        return learning_rate, activations, labels
    with v1.variable_scope("softmax_ce"):
        return learning_rate, tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=activations))


def partial_stages_and_explicit_defaults(learning_rate, infeed, outfeed):
    """The stages bound with functools.partial and given as a tuple, the schedule as
    PipelineSchedule(0), and the defaults said outright."""
    stage1 = functools.partial(layers_stage, [("flatten", None)] + DENSE)
    stage2 = functools.partial(layers_stage, [("dense32", 32), ("logits", 10)],
                               ends_with_loss=True)
    return ipu.pipelining_ops.pipeline(
        computational_stages=(stage1, stage2), gradient_accumulation_count=16,
        repeat_count=4, inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=plain_sgd, device_mapping=None,
        pipeline_schedule=ipu.pipelining_ops.PipelineSchedule(0),
        reduction_method=ipu.optimizers.GradientAccumulationReductionMethod.SUM,
        accumulate_outfeed=False, outfeed_loss=True, name="pipeline")


def v1_layers_and_losses(learning_rate, infeed, outfeed):
    """The images reshaped, tf.compat.v1.layers.dense, the loss by
    tf.compat.v1.losses, the stages returning lists, OptimizerFunctionOutput by keyword."""
    def stage1(lr, images, labels):
        with v1.variable_scope("flatten"):
            x = tf.reshape(images, [-1, 28 * 28])
        for name, width in DENSE:
            with v1.variable_scope(name):
                x = v1.layers.dense(x, width, activation=tf.nn.relu)
        return [lr, x, labels]

    def stage2(lr, x, labels):
        with v1.variable_scope("dense32"):
            x = v1.layers.dense(x, 32, activation=tf.nn.relu)
        with v1.variable_scope("logits"):
            logits = v1.layers.dense(x, 10)
        with v1.variable_scope("softmax_ce"):
            loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        return [lr, loss]

    def optimizer_function(lr, loss):
        return ipu.pipelining_ops.OptimizerFunctionOutput(
            opt=v1.train.GradientDescentOptimizer(lr), loss=loss)

    return ipu.pipelining_ops.pipeline(
        computational_stages=[stage1, stage2], gradient_accumulation_count=16,
        repeat_count=4, inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=optimizer_function, outfeed_loss=True)


def layers_made_first(learning_rate, infeed, outfeed):
    """The Keras layers made first, in a dict, and called inside the stages' scopes; stage1 a
    lambda."""
    layers = {"flatten": tf.keras.layers.Flatten()}
    layers.update({name: tf.keras.layers.Dense(width, activation=tf.nn.relu)
                   for name, width in DENSE + [("dense32", 32)]})
    layers["logits"] = tf.keras.layers.Dense(10)

    def apply(names, x):
        for name in names:
            with v1.variable_scope(name):
                x = layers[name](x)
        return x

    stage1 = lambda lr, images, labels: (  # noqa: E731  (as a learner writes it)
        lr, apply(["flatten", "dense256", "dense128", "dense64"], images), labels)

    def stage2(lr, x, labels):
        logits = apply(["dense32", "logits"], x)
        with v1.variable_scope("softmax_ce"):
            return lr, tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=labels, logits=logits))

    return ipu.pipelining_ops.pipeline(
        [stage1, stage2], 16, repeat_count=4, inputs=[learning_rate], infeed_queue=infeed,
        outfeed_queue=outfeed, optimizer_function=plain_sgd, outfeed_loss=True)


def keras_loss_object(learning_rate, infeed, outfeed):
    """stage2's loss by a Keras loss object (its mean over the batch), the optimizer made with
    its learning rate by keyword and a name of its own."""
    def stage1(lr, images, labels):
        return lr, flatten_to_dense64(images), labels

    def stage2(lr, activations, labels):
        with v1.variable_scope("dense32"):
            activations = tf.keras.layers.Dense(32, activation="relu")(activations)
        with v1.variable_scope("logits"):
            logits = tf.keras.layers.Dense(10)(activations)
        with v1.variable_scope("softmax_ce"):
            loss = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels,
                                                                                    logits)
        return lr, loss

    def optimizer_function(lr, loss):
        optimizer = v1.train.GradientDescentOptimizer(learning_rate=lr, name="sgd")
        return ipu.pipelining_ops.OptimizerFunctionOutput(optimizer, loss)

    return ipu.pipelining_ops.pipeline(
        [stage1, stage2], gradient_accumulation_count=16, repeat_count=4,
        inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=optimizer_function,
        pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Grouped, outfeed_loss=True)


def stages_from_a_comprehension(learning_rate, infeed, outfeed):
    """The two stages made by one factory in a list comprehension, from a table of what each
    does; device_mapping=[0, 1] said."""
    def make(first):
        def stage(lr, x, labels):
            return (lr, flatten_to_dense64(x), labels) if first else \
                (lr, dense32_to_loss(x, labels))
        return stage

    return ipu.pipelining_ops.pipeline(
        [make(first) for first in (True, False)], 16, repeat_count=4, inputs=[learning_rate],
        infeed_queue=infeed, outfeed_queue=outfeed, optimizer_function=plain_sgd,
        device_mapping=[0, 1], pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Grouped,
        outfeed_loss=True)


PIPELINES = {
    "a Keras loss object in stage2, the optimizer named": keras_loss_object,
    "the stages from one factory in a comprehension, device_mapping said":
        stages_from_a_comprehension,
    "SDK 1.x's pipeline_depth, from ipu.ops.pipelining_ops": sdk1_pipeline_depth,
    "stages and optimizer function as callable objects": stage_objects,
    "stages by functools.partial, PipelineSchedule(0), defaults said": (
        partial_stages_and_explicit_defaults),
    "tf.compat.v1 layers and losses, lists returned": v1_layers_and_losses,
    "the Keras layers made before the stages": layers_made_first,
}


@pytest.mark.parametrize("attempt", PIPELINES)
def test_nb09_a_correct_pipeline_written_another_way_is_right(attempt):
    assert_right(nb09_pipelining.check_pipelined_model(PIPELINES[attempt]))


def tutorial_pipeline(second_stage=None, positional_counts=False, **options):
    """Step 3's pipeline as a learner wrote it, with ``options`` to the pipeline changed, the
    second stage replaced, or the counts given by position (16, 4)."""
    def stage1(lr, images, labels):
        return lr, flatten_to_dense64(images), labels

    def stage2(lr, activations, labels):
        return lr, dense32_to_loss(activations, labels)

    settings = dict(gradient_accumulation_count=16, repeat_count=4, optimizer_function=plain_sgd,
                    pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Grouped,
                    outfeed_loss=True)
    settings.update(options)

    def pipelined_model(learning_rate, infeed, outfeed):
        stages = [stage1, second_stage or stage2]
        if positional_counts:   # read by the SDK as (count, accumulators' type)
            rest = {key: value for key, value in settings.items()
                    if key not in ("gradient_accumulation_count", "repeat_count")}
            return ipu.pipelining_ops.pipeline(
                stages, 16, 4, inputs=[learning_rate], infeed_queue=infeed,
                outfeed_queue=outfeed, **rest)
        return ipu.pipelining_ops.pipeline(stages, inputs=[learning_rate], infeed_queue=infeed,
                                           outfeed_queue=outfeed, **settings)
    return pipelined_model


WRONG_PIPELINES = {
    "the loop's 64 made the repeat count": (
        tutorial_pipeline(repeat_count=64),
        "each sess.run made 64 passes of 16 micro-batches (1024)"),
    "the loop's 64 made the micro-batches per update": (
        tutorial_pipeline(gradient_accumulation_count=64, repeat_count=1),
        "your pipeline updated the weights every 64 micro-batches"),
    "stage2's loss summed over the batch": (
        tutorial_pipeline(second_stage=lambda lr, activations, labels: (
            lr, dense32_to_loss(activations, labels, reduce=tf.reduce_sum))),
        "the learning rate it is given"),   # diverged or 19x larger: data decides
    "the loss divided by 16 in optimizer_function": (
        tutorial_pipeline(optimizer_function=lambda lr, loss: plain_sgd(lr, loss / 16)),
        "times smaller. The pipeline adds up the 16 micro-batches' gradients itself"),
    "the Sequential schedule": (
        tutorial_pipeline(pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Sequential),
        "the schedule was Sequential; the tutorial asks for Grouped"),
    "optimizer_function's learning rate fixed at 0.1": (
        tutorial_pipeline(optimizer_function=lambda lr, loss: plain_sgd(0.1, loss)),
        "the learning rate it is given"),   # diverged or 19x larger: data decides
    "stage2 stops the gradient at its input": (
        tutorial_pipeline(second_stage=lambda lr, activations, labels: (
            lr, dense32_to_loss(tf.stop_gradient(activations), labels))),
        "only some of the weights trained: those of dense256, dense128, dense64 never moved"),
    "the counts positional, the repeat count read as a type": (
        tutorial_pipeline(positional_counts=True),
        "gradient_accumulation_dtype is the pipeline's THIRD positional parameter"),
}


@pytest.mark.parametrize("attempt", WRONG_PIPELINES)
def test_nb09_a_wrong_pipeline_gets_a_hint_on_its_own_mistake(attempt):
    program, words = WRONG_PIPELINES[attempt]
    assert_not_yet(nb09_pipelining.check_pipelined_model(program), words)


# --- 11: stages from splits, written as learners would -------------------------------------

optimizer_function = nb11_configurable_stages.optimizer_function


def make_stage(k, piece):
    def stage(*args):
        for layer in piece:
            with v1.variable_scope(f"stage{k}_{layer.name}", use_resource=True):
                args = layer.function(*args)
        return args
    return stage


def pipeline_of(stages, learning_rate, infeed, outfeed, **options):
    settings = dict(gradient_accumulation_count=16, optimizer_function=optimizer_function,
                    pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Grouped,
                    outfeed_loss=True)
    settings.update(options)
    return ipu.pipelining_ops.pipeline(computational_stages=stages, inputs=[learning_rate],
                                       infeed_queue=infeed, outfeed_queue=outfeed, **settings)


def walked_pieces(layers, splits, learning_rate, infeed, outfeed):
    """The pieces by walking the layers: a new piece at each split's name."""
    pieces = [[]]
    for layer in layers:
        if layer.name in splits:
            pieces.append([])
        pieces[-1].append(layer)
    return pipeline_of([make_stage(k, piece) for k, piece in enumerate(pieces)],
                       learning_rate, infeed, outfeed)


def grouped_by_itertools(layers, splits, learning_rate, infeed, outfeed):
    """Each layer's stage the count of splits met so far (itertools.accumulate, groupby);
    SDK 1.x's pipeline_depth, from ipu.ops.pipelining_ops, the device mapping said."""
    stage_of = itertools.accumulate(int(layer.name in splits) for layer in layers)
    groups = itertools.groupby(zip(stage_of, layers), key=lambda pair: pair[0])
    stages = [make_stage(k, [layer for _, layer in group]) for k, group in groups]
    return ipu.ops.pipelining_ops.pipeline(
        stages, pipeline_depth=16, inputs=[learning_rate], infeed_queue=infeed,
        outfeed_queue=outfeed, optimizer_function=optimizer_function,
        device_mapping=list(range(len(stages))), outfeed_loss=True)


def sorted_by_position_and_yielded(layers, splits, learning_rate, infeed, outfeed):
    """The layers sorted by .position, the cuts from a dict of indexes, the stages yielded by
    a generator function and handed over as a tuple."""
    ordered = sorted(layers, key=lambda layer: layer.position)
    index_of = {layer.name: index for index, layer in enumerate(ordered)}
    bounds = [0, *(index_of[split] for split in splits), len(ordered)]

    def stages():
        for k in range(len(bounds) - 1):
            yield make_stage(k, ordered[bounds[k]:bounds[k + 1]])

    return pipeline_of(tuple(stages()), learning_rate, infeed, outfeed)


def cut_recursively(layers, splits, learning_rate, infeed, outfeed):
    """The first piece split off and the rest cut by a recursive call; the scope names by
    str.format, the scope by keyword."""
    def cut(rest, splits):
        if not splits:
            return [rest]
        at = [layer.name for layer in rest].index(splits[0])
        return [rest[:at]] + cut(rest[at:], splits[1:])

    def stage_for(k, piece):
        def stage(*args):
            for layer in piece:
                with v1.variable_scope(name_or_scope="stage{}_{}".format(k, layer.name),
                                       use_resource=True):
                    args = layer.function(*args)
            return args
        return stage

    return pipeline_of([stage_for(k, piece) for k, piece in enumerate(cut(layers, splits))],
                       learning_rate, infeed, outfeed)


def chained_by_reduce(layers, splits, learning_rate, infeed, outfeed):
    """Each stage a lambda folding its layers with functools.reduce."""
    def scoped(k):
        def apply(args, layer):
            with v1.variable_scope("stage%d_%s" % (k, layer.name), use_resource=True):
                return layer.function(*args)
        return apply

    names = [layer.name for layer in layers]
    cuts = [0] + [names.index(split) for split in splits] + [len(layers)]
    stages = [lambda *args, k=k, piece=layers[a:b]: functools.reduce(scoped(k), piece, args)
              for k, (a, b) in enumerate(zip(cuts[:-1], cuts[1:]))]
    return pipeline_of(stages, learning_rate, infeed, outfeed)


class Piece:
    """A piece of the model, filled while walking the layers; its bound method is the stage."""

    def __init__(self, index):
        self.index, self.layers = index, []

    def run(self, *args):
        for layer in self.layers:
            with v1.variable_scope(f"stage{self.index}_{layer.name}", use_resource=True):
                args = layer.function(*args)
        return args


def bound_methods_from_a_while_loop(layers, splits, learning_rate, infeed, outfeed):
    """The pieces filled by a while loop, the stages their bound methods; the reduction said."""
    pieces, i = [Piece(0)], 0
    while i < len(layers):
        if layers[i].name in splits:
            pieces.append(Piece(len(pieces)))
        pieces[-1].layers.append(layers[i])
        i += 1
    return pipeline_of([piece.run for piece in pieces], learning_rate, infeed, outfeed,
                       reduction_method=ipu.optimizers.GradientAccumulationReductionMethod.SUM)


def stages_by_number(layers, splits, learning_rate, infeed, outfeed):
    """The splits numbered in a dict, the layers assigned with setdefault, the stages built by
    map over the numbers; AUTO_REUSE scopes; the count positional."""
    split_at = {name: k + 1 for k, name in enumerate(splits)}
    stage, assigned = 0, {}
    for layer in layers:
        stage = split_at.get(layer.name, stage)
        assigned.setdefault(stage, []).append(layer)

    def build(k):
        def run(*args):
            for layer in assigned[k]:
                with v1.variable_scope(f"stage{k}_{layer.name}", reuse=v1.AUTO_REUSE,
                                       use_resource=True):
                    args = layer.function(*args)
            return args
        return run

    return ipu.pipelining_ops.pipeline(
        list(map(build, sorted(assigned))), 16, inputs=[learning_rate], infeed_queue=infeed,
        outfeed_queue=outfeed, optimizer_function=optimizer_function, outfeed_loss=True,
        pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Grouped)


FROM_SPLITS = {
    "pieces by walking the layers": walked_pieces,
    "stages grouped by itertools, pipeline_depth": grouped_by_itertools,
    "layers sorted by position, stages yielded": sorted_by_position_and_yielded,
    "pieces cut recursively, scopes by str.format": cut_recursively,
    "each stage a functools.reduce over its layers": chained_by_reduce,
    "bound methods of pieces filled by a while loop": bound_methods_from_a_while_loop,
    "stages by number from a dict of splits": stages_by_number,
}


@pytest.mark.parametrize("attempt", FROM_SPLITS)
def test_nb11_correct_stages_written_another_way_are_right(attempt):
    assert_right(nb11_configurable_stages.check_configurable_pipeline(FROM_SPLITS[attempt]))


def cut_by(cuts, **options):
    """A learner's pipeline_for_splits whose pieces are ``layers[a:b]`` between the
    ``cuts(names, layers, splits)`` they worked out."""
    def pipeline_for_splits(layers, splits, learning_rate, infeed, outfeed):
        bounds = cuts([layer.name for layer in layers], layers, splits)
        pieces = [layers[a:b] for a, b in zip(bounds, bounds[1:])]
        return pipeline_of([make_stage(k, piece) for k, piece in enumerate(pieces)],
                           learning_rate, infeed, outfeed, **options)
    return pipeline_for_splits


def right_cuts(names, layers, splits):
    return [0] + [names.index(split) for split in splits] + [len(layers)]


def every_layer_a_stage(layers, splits, learning_rate, infeed, outfeed):
    return pipeline_of([make_stage(k, [layer]) for k, layer in enumerate(layers)],
                       learning_rate, infeed, outfeed)


def outputs_not_passed_on(layers, splits, learning_rate, infeed, outfeed):
    """Each layer called on the stage's inputs: its outputs kept apart, never passed on."""
    def make(k, piece):
        def stage(*args):
            for layer in piece:
                with v1.variable_scope(f"stage{k}_{layer.name}", use_resource=True):
                    outputs = layer.function(*args)
            return outputs
        return stage
    bounds = right_cuts([layer.name for layer in layers], layers, splits)
    return pipeline_of([make(k, layers[a:b]) for k, (a, b) in enumerate(zip(bounds, bounds[1:]))],
                       learning_rate, infeed, outfeed)


def split_layers_skipped(layers, splits, learning_rate, infeed, outfeed):
    """Each piece after the first starts one past its cut: the split's layer left out."""
    bounds = right_cuts([layer.name for layer in layers], layers, splits)
    pieces = [layers[a + (1 if k else 0):b] for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    return pipeline_of([make_stage(k, piece) for k, piece in enumerate(pieces)],
                       learning_rate, infeed, outfeed)


def no_outfeed(layers, splits, learning_rate, infeed, outfeed):
    bounds = right_cuts([layer.name for layer in layers], layers, splits)
    stages = [make_stage(k, layers[a:b]) for k, (a, b) in enumerate(zip(bounds, bounds[1:]))]
    return ipu.pipelining_ops.pipeline(stages, 16, inputs=[learning_rate], infeed_queue=infeed,
                                       optimizer_function=optimizer_function, outfeed_loss=True)


WRONG_SPLITS = {
    "the layers' .position taken for list indexes": (
        cut_by(lambda names, layers, splits: [0] + [layer.position for layer in layers
                                                    if layer.name in splits] + [len(layers)]),
        "stages 1, 2 and 3 ran no layer"),
    "the cuts missing the end: the last piece left out": (
        cut_by(lambda names, layers, splits: [0] + [names.index(split) for split in splits]),
        "your last stage did not end with cel"),
    "the cuts missing the 0: the first piece left out": (
        cut_by(lambda names, layers, splits: [names.index(split) for split in splits]
               + [len(layers)]),
        "did not start with flatten: it built dense128"),
    "every layer a stage of its own, the splits ignored": (
        every_layer_a_stage, "exactly len(splits) + 1 stage functions"),
    "each layer's outputs not passed on to the next": (
        outputs_not_passed_on, "Pass each layer's outputs on to the next"),
    "the splits sorted by name": (
        cut_by(lambda names, layers, splits: [0] + [names.index(split)
                                                    for split in sorted(splits)]
               + [len(layers)]),
        "so dense64 ran in stages 1 and 3"),
    "the split's layer skipped at each cut": (
        split_layers_skipped, "dense128, dense64 and dense32 ran in no stage<k>_<layer> scope"),
    "notebook 09's repeat_count=4 carried over": (
        cut_by(right_cuts, repeat_count=4), "each run made 4 passes of 16 micro-batches"),
    "the Sequential schedule (sharding's) in place of Grouped": (
        cut_by(right_cuts, pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Sequential),
        "your pipeline ran the Sequential schedule"),
    "the outfeed left out of the pipeline": (
        no_outfeed, "keep the starting code's outfeed_queue=outfeed"),
}


@pytest.mark.parametrize("attempt", WRONG_SPLITS)
def test_nb11_wrong_stages_get_a_hint_on_their_own_mistake(attempt):
    program, words = WRONG_SPLITS[attempt]
    assert_not_yet(nb11_configurable_stages.check_configurable_pipeline(program), words)
