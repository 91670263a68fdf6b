"""Notebook 11's code exercise: build the pipeline's stages from a list of splits (pipelining
tutorial, step 4, tasks c and d).

The learner starts from step 3's pipeline written with the notebook's layer functions: two
hard-coded stage functions, split at ``dense32``.  They write
``pipeline_for_splits(layers, splits, learning_rate, infeed, outfeed)`` so that any list of
splits works: cut the layers (in the model's order) before each split, make one stage
function per piece, and hand the pipeline that list.

``check_configurable_pipeline`` calls it with two lists of splits, a 4-stage one and a
2-stage one (the second once the first's run met every rule: the exercise's rules are the
same checks for each splits, in turn), compiles each for a device of one IPU per stage, runs
it once and reads the record: how many stages ran, how many passes each run made, and in
which stage each layer's forward ops were built (from the ``stage<k>_<layer>`` variable
scopes the tutorial gives each layer).
"""
from __future__ import annotations

import functools
import re
from collections import defaultdict, namedtuple
from typing import Dict, List, Sequence, Set, Tuple

import numpy as np
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.code_exercises import (as_a_fresh_script, compiled_program,
                                         fed_digits_dataset, forward_ops_by_stage)
from ipu_emulator.code_exercises.harness import Exercise, Probe, Rule, changed, check_of
from ipu_emulator.code_exercises.reference import (TOLERANCE, Facts, same_values, scaled_update,
                                                   weights_problem)
from ipu_emulator.code_exercises.weights import WeightWatch
from ipu_emulator.exercises import not_yet
from ipu_emulator.ipu import (config, ipu_compiler, ipu_infeed_queue, ipu_outfeed_queue,
                              pipelining_ops, scopes)

BATCH_SIZE = 32
GRADIENT_ACCUMULATION_COUNT = 16   # a multiple of 2 x stages for 2 and 4 stages (Grouped)
# The splits the check tries, each with a device of one IPU per stage: four stages first (a
# program with step 3's two stages hard-coded fails there), then two, split elsewhere than
# step 3 (a program that only works for the tutorial's default fails there).
SPLITS_TRIED = (("dense128", "dense64", "dense32"), ("dense64",))
# Hints for errors a stages-from-splits attempt can meet, by words of their messages.
# The loss met 3-D logits: the Dense layers ran on the 28 x 28 images unflattened.  What the
# stages built by then tells why (``_shape_error_hint``); this hint when they built in no
# stage<k>_<layer> scope.
SHAPE_ERROR = "logits.shape.rank"
EVERY_STAGE_THE_LAST_PIECE = ("your stages seem to run the wrong layers: the first stage got the "
                              "images but built the last piece's layers. A function defined "
                              "inside a `for` loop reads the loop's variables when it runs, "
                              "after the loop has ended, so every stage sees the last piece. "
                              "Make each stage in a helper, `make_stage(k, pieces[k])`, as the "
                              "tutorial does (task b).")
SDK_HINTS = {
    SHAPE_ERROR: EVERY_STAGE_THE_LAST_PIECE,
    # The last piece left out: the last stage hands the optimizer function the activations
    # and the labels along with the learning rate.
    "optimizer_function() takes 2 positional arguments but 3": (
        "the optimizer function got your last stage's three outputs (learning_rate, "
        "activations, labels) where it takes (learning_rate, loss): your last stage did not "
        "end with cel, the loss. The last piece runs from the last split to the end of the "
        "list: the cuts end with len(layers), so that N splits make N + 1 stages (task a)."),
    "no outfeed_queue": "the last stage returns the loss, so the pipeline needs somewhere to "
                        "send it: keep the starting code's outfeed_queue=outfeed (and "
                        "outfeed_loss=True).",
    "shards needs to divide": "the device has one IPU per stage, so the pipeline needs "
                              "exactly len(splits) + 1 stage functions.",
    "must be a multiple of": "keep gradient_accumulation_count=16: with 2 or 4 stages it is a "
                             "multiple of 2 x stages, as the Grouped schedule needs.",
    "not enough values to unpack": "each stage returns what the next one takes: the layer "
                                   "functions pass (learning_rate, activations, labels) along, "
                                   "so a stage returns what its last layer returned.",
}

Layer = namedtuple("Layer", ["position", "name", "function"])


def _relu(units, learning_rate, activations, labels):
    return (learning_rate,
            tf.keras.layers.Dense(units, activation=tf.nn.relu)(activations), labels)


def _flatten(learning_rate, images, labels):
    return learning_rate, tf.keras.layers.Flatten()(images), labels


def _logits(learning_rate, activations, labels):
    return learning_rate, tf.keras.layers.Dense(10)(activations), labels


def _cel(learning_rate, logits, labels):
    per_image = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    return learning_rate, tf.reduce_mean(per_image)


# Notebook 11's layers, as its discover_layers finds them: (position, name, function).
LAYERS = [Layer(10, "flatten", _flatten),
          Layer(20, "dense256", lambda *args: _relu(256, *args)),
          Layer(30, "dense128", lambda *args: _relu(128, *args)),
          Layer(40, "dense64", lambda *args: _relu(64, *args)),
          Layer(50, "dense32", lambda *args: _relu(32, *args)),
          Layer(60, "logits", _logits),
          Layer(70, "cel", _cel)]
LAYER_NAMES = [layer.name for layer in LAYERS]


def optimizer_function(learning_rate, loss):
    """Notebook 11's optimizer function (step 3's)."""
    optimizer = tf.compat.v1.train.GradientDescentOptimizer(learning_rate=learning_rate)
    return pipelining_ops.OptimizerFunctionOutput(optimizer, loss)


# The cell the learner edits (tagged ``code-exercise`` in notebook 11): step 3's pipeline
# with the stages hard-coded, and the tutorial's tasks.  ``print(code_exercises.STARTING_CODE)``
# gives it back, to start again.
STARTING_CODE = '''\
# Your turn: stages from splits (the tutorial's step 4, tasks c and d)
#  [ ] a) cut `layers` (a list in the model's order; each has .name and .function) into
#         pieces: a split names the FIRST layer of the next piece, so N splits make N + 1
#  [ ] b) one stage function per piece: it calls the piece's layers in turn, each inside
#         tf.variable_scope(f"stage{k}_{layer.name}", use_resource=True), passing each
#         layer's outputs on to the next, and returns the last layer's outputs
#  [ ] c) give the pipeline your list of stage functions instead of [stage0, stage1]
def pipeline_for_splits(layers, splits, learning_rate, infeed, outfeed):
    flatten, dense256, dense128, dense64, dense32, logits, cel = layers

    def stage0(*args):                       # hard-coded: the tutorial's split at dense32
        for layer in [flatten, dense256, dense128, dense64]:
            with tf.variable_scope(f"stage0_{layer.name}", use_resource=True):
                args = layer.function(*args)
        return args

    def stage1(*args):
        for layer in [dense32, logits, cel]:
            with tf.variable_scope(f"stage1_{layer.name}", use_resource=True):
                args = layer.function(*args)
        return args

    return ipu.pipelining_ops.pipeline(
        computational_stages=[stage0, stage1],
        gradient_accumulation_count=16,
        inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=optimizer_function,
        pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Grouped,
        outfeed_loss=True)'''


def solution(layers, splits, learning_rate, infeed, outfeed):
    """The tutorial's step 4: the layers cut at the splits, a stage function per piece."""
    names = [layer.name for layer in layers]
    cuts = [0] + [names.index(split) for split in splits] + [len(layers)]
    pieces = [layers[start:end] for start, end in zip(cuts, cuts[1:])]

    def make_stage(index, piece):
        def stage(*args):
            for layer in piece:
                with tf.compat.v1.variable_scope(f"stage{index}_{layer.name}",
                                                 use_resource=True):
                    args = layer.function(*args)
            return args
        return stage

    return pipelining_ops.pipeline(
        computational_stages=[make_stage(k, piece) for k, piece in enumerate(pieces)],
        gradient_accumulation_count=GRADIENT_ACCUMULATION_COUNT,
        inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=optimizer_function,
        pipeline_schedule=pipelining_ops.PipelineSchedule.Grouped,
        outfeed_loss=True)


class _Ran:
    """What one program did: its engine run's record, and the stages each layer's forward ops
    were built in (by the ``stage<k>_<layer>`` scopes; empty when the learner used none)."""

    SCOPE = re.compile(r"stage(\d+)_(\w+?)(?:_\d+)?$")

    def __init__(self, program, run, outfed, weights: WeightWatch):
        self.run = run
        self.outfed = outfed          # what the dequeue gave the host
        self.weights = weights
        self.forward: Dict[str, Set[int]] = defaultdict(set)
        for name, stage in forward_ops_by_stage(program):
            for part in name.split("/"):
                match = self.SCOPE.match(part)
                if match and match.group(2) in LAYER_NAMES:
                    self.forward[match.group(2)].add(stage)

    @property
    def losses(self) -> np.ndarray:
        """The losses the outfeed brought back (empty when it brought back something
        else: a tuple of all the last stage's outputs)."""
        if isinstance(self.outfed, (list, tuple, dict)):
            return np.zeros(0)
        return np.asarray(self.outfed, dtype=np.float64)


def _scopes_built(graph) -> List[Tuple[int, str]]:
    """The ``stage<k>_<layer>`` scopes ``graph``'s ops were built in, ``(k, layer)`` in the
    order the stages built them."""
    built: List[Tuple[int, str]] = []
    for op in graph.get_operations():
        for part in op.name.split("/"):
            match = _Ran.SCOPE.match(part)
            if match and match.group(2) in LAYER_NAMES:
                scope = (int(match.group(1)), match.group(2))
                if scope not in built:
                    built.append(scope)
    return built


def _shape_error_hint(graph, splits) -> str:
    """The hint for the loss meeting 3-D logits, from the scopes the stages built before it:
    every stage the last piece (stage functions defined in a loop), the first piece left out,
    or the right layers in each stage, each fed the stage's inputs instead of the layer's
    before."""
    built = _scopes_built(graph)
    pieces = _pieces(splits)
    names = [name for _, name in built]
    if not built:
        return EVERY_STAGE_THE_LAST_PIECE
    if len(pieces) > 1 and names == pieces[-1][:len(names)]:
        return EVERY_STAGE_THE_LAST_PIECE
    first = [name for k, name in built if k == 0]
    if first[:1] != [LAYER_NAMES[0]]:
        return (f"your first stage got the 28 x 28 images but did not start with "
                f"{LAYER_NAMES[0]}: it built {', '.join(first) or 'no layer'}, so the Dense "
                f"layers ran on the images unflattened. The first piece is the layers before "
                f"the first split, {'-'.join(pieces[0])} here: the cuts start at 0, [0] + the "
                f"splits' indexes + [len(layers)] (task a).")
    if all(name in pieces[k] for k, name in built):
        return ("your stages built the layers of their pieces, in order, but a layer got "
                "other inputs than the outputs of the layer before it: the loss met logits "
                "of another shape. Pass each layer's outputs on to the next, "
                "`args = layer.function(*args)`, and return the last layer's (task b).")
    return (f"your stages built {', '.join(f'stage{k}_{name}' for k, name in built)} before "
            f"the loss met logits of another shape; with splits {list(splits)} they should be "
            f"{_described(pieces)}, each layer getting the outputs of the one before "
            f"(tasks a and b).")


def run_pipeline(pipeline_for_splits, splits: Sequence[str]) -> _Ran:
    """Compile ``pipeline_for_splits(LAYERS, splits, ...)`` for a device of one IPU per stage,
    run it once and say what ran.  An error in the learner's code raises
    ``LearnerCodeFailed``.  The IPU system the learner configured is configured again
    afterwards."""
    weights = WeightWatch()
    hints = dict(SDK_HINTS)   # the shape error's hint is worked out when it is met
    with as_a_fresh_script(hints, watch=weights) as graph:
        dataset, digits = fed_digits_dataset(BATCH_SIZE * GRADIENT_ACCUMULATION_COUNT)
        infeed = ipu_infeed_queue.IPUInfeedQueue(
            dataset.repeat().batch(BATCH_SIZE, drop_remainder=True))
        outfeed = ipu_outfeed_queue.IPUOutfeedQueue()
        learning_rate = tf.compat.v1.placeholder(np.float32, [])
        with scopes.ipu_scope("/device:IPU:0"):
            try:
                train = ipu_compiler.compile(
                    lambda lr: pipeline_for_splits(list(LAYERS), list(splits), lr, infeed,
                                                   outfeed), [learning_rate])
            except ValueError as error:
                if SHAPE_ERROR in str(error):
                    hints[SHAPE_ERROR] = _shape_error_hint(graph, splits)
                raise
        dequeue = outfeed.dequeue()
        program = compiled_program(graph)
        devices = config.IPUConfig()
        devices.auto_select_ipus = len(splits) + 1
        devices.selection_order = config.SelectionOrder.SNAKE
        devices.configure_ipu_system()
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(infeed.initializer, digits)
            with record.capture() as runs:
                session.run(train, {learning_rate: 0.01})
            outfed = session.run(dequeue)
            weights.read(session)
    return _Ran(program, runs.runs[-1], outfed, weights)


class _Tried(Facts):
    """What ``pipeline_for_splits`` did with each of ``SPLITS_TRIED``: each splits' run is
    made when a rule first asks for it.  The rules take the splits in turn, so the second
    splits run only once the first's met every rule: an error the learner's code raises
    there (``LearnerCodeFailed``, out of the rule that asked) never hides what was wrong
    with the first."""

    def __init__(self, pipeline_for_splits):
        self.pipeline_for_splits = pipeline_for_splits
        self.runs: Dict[Tuple[str, ...], _Ran] = {}

    def ran(self, splits: Tuple[str, ...]) -> _Ran:
        if splits not in self.runs:
            self.runs[splits] = run_pipeline(self.pipeline_for_splits, splits)
        return self.runs[splits]


def run_splits(pipeline_for_splits) -> _Tried:
    """``pipeline_for_splits`` to be run with each of ``SPLITS_TRIED`` (``run_pipeline``)
    when the rules first ask."""
    return _Tried(pipeline_for_splits)


def _pieces(splits: Sequence[str]) -> List[List[str]]:
    cuts = [0] + [LAYER_NAMES.index(split) for split in splits] + [len(LAYER_NAMES)]
    return [LAYER_NAMES[start:end] for start, end in zip(cuts, cuts[1:])]


def _described(pieces) -> str:
    return " | ".join("-".join(piece) for piece in pieces)


# The checks of one splits' run, in the tutorial's task order; the exercise's rules are these
# checks for the first splits tried, then for the second (``_CHECKS``).

def _pipeline_ran(tried: _Tried, splits):
    if tried.ran(splits).run.pipeline is None:
        return not_yet("your function ran no pipeline: return what "
                       "ipu.pipelining_ops.pipeline(...) returns.")
    return None


def _stages(tried: _Tried, splits) -> int:
    return len(tried.ran(splits).run.pipeline.device_mapping)


def _stage_count(tried: _Tried, splits):
    wanted, stages = _pieces(splits), _stages(tried, splits)
    if stages != len(wanted):
        return not_yet(f"with splits {list(splits)} your pipeline ran {stages} stages; "
                       f"{len(splits)} splits make {len(wanted)} "
                       f"({_described(wanted)}). Tasks a and c: build the stage functions "
                       f"from the splits instead of the hard-coded [stage0, stage1].")
    return None


def _scoped(tried: _Tried, splits):
    if not tried.ran(splits).forward:
        return not_yet("no layer of your stages was built in a "
                       "tf.variable_scope(f\"stage{k}_{layer.name}\"): the check finds the "
                       "layers by these names, and so do the trace and the variables (task "
                       "b).")
    return None


def _listed(items) -> str:
    items = [str(item) for item in items]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _placement(tried: _Tried, splits):
    # The first layer out of its piece's stage, in the model's order, says whether a split's
    # layer ended the stage before (the cut after it, not before); else the stages as built
    # say what went wrong: layers in no stage, a layer in two, stages with no layer.
    ran, wanted = tried.ran(splits), _pieces(splits)
    built = [[name for name in LAYER_NAMES if k in ran.forward.get(name, ())]
             for k in range(_stages(tried, splits))]
    misplaced = [(name, stage) for stage, piece in enumerate(wanted) for name in piece
                 if ran.forward.get(name, set()) != {stage}]
    if not misplaced:
        return None
    said = f"with splits {list(splits)} your stages were {_described(built)}"
    name, stage = misplaced[0]
    if (ran.forward.get(name) == {stage - 1} and name in splits
            and built[stage - 1][-1:] == [name]):
        return not_yet(f"{said}: {name} ended stage {stage - 1}. A split names the first "
                       f"layer of the NEXT stage: cut just before it, so {name} starts stage "
                       f"{stage} (task a).")
    should = f"they should be {_described(wanted)}"
    nowhere = [name for name in LAYER_NAMES if not ran.forward.get(name)]
    if nowhere:
        return not_yet(f"{said}, so {_listed(nowhere)} ran in no stage<k>_<layer> scope; "
                       f"{should}. Every layer runs once, in its piece's stage, and a piece "
                       f"starts with its split's layer: layers[cut:next_cut] (task a).")
    twice = [name for name in LAYER_NAMES if len(ran.forward.get(name, ())) > 1]
    if twice:
        return not_yet(f"{said}, so {twice[0]} ran in stages "
                       f"{_listed(sorted(ran.forward[twice[0]]))}; {should}. Each layer runs "
                       f"in one stage: the cuts rise along the model, taking the splits in "
                       f"the order they come (the model's), each piece from one split's "
                       f"index up to the next one's (task a).")
    empty = [k for k, names in enumerate(built) if not names]
    if empty:
        positions = ", ".join(str(layer.position) for layer in LAYERS[:3])
        return not_yet(f"{said}: stage{'s' if len(empty) > 1 else ''} {_listed(empty)} ran "
                       f"no layer; {should}. The cuts are the splits' indexes in the list "
                       f"of layers, [layer.name for layer in layers].index(split): a "
                       f"layer's .position ({positions}, ...) is no index in it (task a).")
    return not_yet(f"{said}; {should}: each stage runs the layers from one split up to the "
                   f"next (task a).")


def _accumulation_count(tried: _Tried, splits):
    count = tried.ran(splits).run.pipeline.gradient_accumulation_count
    if count != GRADIENT_ACCUMULATION_COUNT:
        return not_yet(f"with splits {list(splits)} your stages were "
                       f"{_described(_pieces(splits))}, but the pipeline updated the weights "
                       f"every {count} micro-batches: keep the starting code's "
                       f"gradient_accumulation_count={GRADIENT_ACCUMULATION_COUNT}, which every "
                       f"split tried divides as the Grouped schedule needs.")
    return None


def _one_pass(tried: _Tried, splits):
    passes = tried.ran(splits).run.pipeline.repeat_count
    if passes != 1:
        return not_yet(f"with splits {list(splits)} your stages were "
                       f"{_described(_pieces(splits))}, but each run made {passes} passes of "
                       f"{GRADIENT_ACCUMULATION_COUNT} micro-batches, {passes} weight updates: "
                       f"the starting code's pipeline makes one pass per run, and the check "
                       f"compares that one update with the tutorial's. Leave repeat_count "
                       f"out, as the starting code does (1).")
    return None


def _grouped(tried: _Tried, splits):
    schedule = tried.ran(splits).run.pipeline.schedule
    if schedule != "grouped":
        return not_yet(f"with splits {list(splits)} your pipeline ran the {schedule.title()} "
                       f"schedule; the starting code's is Grouped, and the tasks change only "
                       f"the stages: keep pipeline_schedule=ipu.pipelining_ops."
                       f"PipelineSchedule.Grouped.")
    return None


def _loss_alone(tried: _Tried, splits):
    outfed = tried.ran(splits).outfed
    if isinstance(outfed, (list, tuple, dict)):
        return not_yet(f"with splits {list(splits)} the outfeed brought back "
                       f"{len(outfed)} values per micro-batch, all of the last stage's "
                       f"outputs: keep outfeed_loss=True in the pipeline, so that it sends "
                       f"the loss alone.")
    return None


def _outfed_losses(tried: _Tried, splits):
    losses = tried.ran(splits).losses
    if not (np.isfinite(losses).all() and losses.size):
        return not_yet("the outfeed returned no loss: keep outfeed_queue=outfeed and "
                       "outfeed_loss=True in the pipeline.")
    return None


def _weights(tried: _Tried, splits):
    return weights_problem(
        tried.ran(splits).weights, tried.reference.ran(splits).weights,
        f"with splits {list(splits)} your stages were {_described(_pieces(splits))}",
        "Keep the starting code's optimizer_function as it is, passed to the pipeline.",
        "The stages call each layer's function once, in the model's order, passing each "
        "layer's outputs on to the next; the pipeline keeps gradient_accumulation_count=16 "
        "and the starting code's optimizer_function.")


def _losses(tried: _Tried, splits):
    if not same_values(tried.ran(splits).losses, tried.reference.ran(splits).losses):
        return not_yet(f"with splits {list(splits)} your stages were "
                       f"{_described(_pieces(splits))} and trained as the tutorial's, but the "
                       f"outfeed brought back other values than the losses they computed: the "
                       f"last stage returns the loss, and outfeed_loss=True sends it.")
    return None


def _right(tried: _Tried) -> str:
    described = "; ".join(f"{list(splits)} -> {_described(_pieces(splits))} on "
                          f"{len(splits) + 1} IPUs" for splits in SPLITS_TRIED)
    return (f"your stages follow the splits: {described}, each layer in its own "
            f"stage<k>_<layer> scope. The rest of the tutorial's step 4 is plumbing: "
            f"reading the splits from the command line and asking for one IPU per "
            f"stage. The next sections show why asking for IPUs needs a rule for "
            f"three stages.")


def _with(splits) -> str:
    return f"with splits {list(splits)}"


def _pipeline_changed(ran: _Ran, **values) -> Dict[str, object]:
    return {"run": changed(ran.run, pipeline=changed(ran.run.pipeline, **values))}


def _forward_changed(ran: _Ran, layer: str, stages) -> Dict[str, object]:
    forward = {name: set(found) for name, found in ran.forward.items() if name != layer}
    if stages:
        forward[layer] = set(stages)
    return {"forward": forward}


def _stage_of(layer: str, splits) -> int:
    return next(k for k, piece in enumerate(_pieces(splits)) if layer in piece)


# Each check's fact, and the smallest wrong changes of one splits' run it must catch first
# (``change(run, splits)`` gives the values to change in the run).
_CHECKS = (
    ("a pipeline ran", _pipeline_ran,
     ((lambda ran, splits: {"run": changed(ran.run, pipeline=None)}, "no pipeline"),)),
    ("one stage per piece", _stage_count,
     ((lambda ran, splits: _pipeline_changed(
         ran, device_mapping=tuple(range(len(splits) + 2))), "one stage more"),
      (lambda ran, splits: _pipeline_changed(
          ran, device_mapping=tuple(range(len(splits)))), "one stage fewer"))),
    ("the layers in stage<k>_<layer> scopes", _scoped,
     ((lambda ran, splits: {"forward": {}}, "no layer in its scope"),)),
    ("each layer in its piece's stage", _placement,
     ((lambda ran, splits: _forward_changed(
         ran, splits[-1], (_stage_of(splits[-1], splits) - 1,)),
       "the last split's layer ending the stage before"),
      (lambda ran, splits: _forward_changed(
          ran, splits[0], (_stage_of(splits[0], splits) - 1, _stage_of(splits[0], splits))),
       "the first split's layer in both its stage and the one before"),
      (lambda ran, splits: _forward_changed(ran, "cel", (len(splits) - 1,)),
       "the loss a stage early"),
      (lambda ran, splits: _forward_changed(ran, "logits", ()), "the logits in no scope"))),
    ("16 micro-batches per update", _accumulation_count,
     ((lambda ran, splits: _pipeline_changed(
         ran, gradient_accumulation_count=GRADIENT_ACCUMULATION_COUNT + 1),
       "one micro-batch more per update"),
      (lambda ran, splits: _pipeline_changed(
          ran, gradient_accumulation_count=GRADIENT_ACCUMULATION_COUNT - 1),
       "one micro-batch fewer per update"))),
    ("one pass per run", _one_pass,
     ((lambda ran, splits: _pipeline_changed(ran, repeat_count=2), "two passes per run"),)),
    ("the Grouped schedule", _grouped,
     ((lambda ran, splits: _pipeline_changed(ran, schedule="sequential"), "sharding's schedule"),
      (lambda ran, splits: _pipeline_changed(ran, schedule="interleaved"),
       "the Interleaved schedule"))),
    ("the outfeed sends the loss alone", _loss_alone,
     ((lambda ran, splits: {"outfed": (np.full_like(ran.outfed, 0.01), ran.outfed)},
       "the learning rate outfed with the loss"),)),
    ("the outfeed returned losses", _outfed_losses,
     ((lambda ran, splits: {"outfed": np.zeros(0)}, "no loss outfed"),
      (lambda ran, splits: {"outfed": np.full_like(ran.outfed, np.nan)}, "NaN losses"))),
    ("the reference's weights", _weights,
     ((lambda ran, splits: {"weights": scaled_update(ran.weights, 1 + 3 * TOLERANCE)},
       "the update a little larger"),)),
    ("the losses the stages computed", _losses,
     ((lambda ran, splits: {"outfed": ran.outfed * 1.01}, "the losses 1 % larger"),)),
)


def _changed_run(tried: _Tried, splits, change) -> _Tried:
    """``tried`` (all its splits run) with ``change`` made to the run of ``splits``."""
    runs = {tried_splits: tried.ran(tried_splits) for tried_splits in SPLITS_TRIED}
    runs[splits] = changed(runs[splits], **change(runs[splits], splits))
    return changed(tried, runs=runs)


EXERCISE = Exercise(
    name="11.stages-from-splits", starting_code=STARTING_CODE, solution=solution,
    run=run_splits, call="check_configurable_pipeline(pipeline_for_splits)",
    rules=tuple(Rule(f"{fact} {_with(splits)}", functools.partial(check, splits=splits))
                for splits in SPLITS_TRIED for fact, check, _ in _CHECKS),
    right=_right,
    probes=tuple(Probe(f"{fact} {_with(splits)}",
                       functools.partial(_changed_run, splits=splits, change=change),
                       f"{what} {_with(splits)}")
                 for splits in SPLITS_TRIED for fact, _, probes in _CHECKS
                 for change, what in probes))

check_configurable_pipeline = check_of(
    EXERCISE, "check_configurable_pipeline",
    """``pipeline_for_splits(layers, splits, learning_rate, infeed, outfeed)``: the stages
    the splits describe, for any splits.""")


__all__ = ["EXERCISE", "check_configurable_pipeline", "solution", "run_pipeline", "STARTING_CODE",
           "LAYERS", "optimizer_function"]
