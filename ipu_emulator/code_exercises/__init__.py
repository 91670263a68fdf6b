"""Code exercises: the learner writes the IPU code, a check runs it and reads what it did.

Graphcore's tutorials are modify-the-code tutorials.  A code exercise's cell (tagged
``code-exercise`` in its metadata) holds the previous step's code and the tutorial's tasks as a
checklist; the learner edits it and runs it, and the next cell passes what they wrote to a
check::

    from ipu_emulator.code_exercises import nb07_sharding as code_exercises
    code_exercises.check_sharded_step(sharded_training_step)

The check builds the learner's code into a program, runs it through the emulator and reads
the record of what ran (engine runs, iterations, the IPU each op ran on, shards, copies), so
its answer can say what the program did and what to change.  Like the numeric exercises
(``ipu_emulator.exercises``) it returns a ``Feedback`` and never raises at the learner: an
error in their code comes back as the SDK's message (or Python's) with a hint at the
tutorial's level, and the kernel stays usable.

In solutions mode (``IPU_LAB_SOLUTIONS=1``, the test command's notebook run) a check runs the
exercise's own solution instead of the cell's code and raises ``SolutionFailed`` if it does
not pass, so a solution that drifts from its check fails the tests.

This layer sits above the API front: it builds and runs TensorFlow programs.
"""
from __future__ import annotations

import contextlib
import functools
import linecache
import os
import re
import traceback
import warnings
from dataclasses import dataclass
from typing import Callable, Dict, Optional, Union

import numpy as np
import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.data import datasets
from ipu_emulator.code_exercises import cell_runs
from ipu_emulator.code_exercises.reference import Facts
from ipu_emulator.code_exercises.weights import WeightWatch
from ipu_emulator.exercises import Feedback, SolutionFailed, not_yet, progress, solutions_mode
from ipu_emulator.ipu import config
from ipu_emulator.runtime import ipu_backend, programs


@dataclass(frozen=True)
class CodeExercise:
    """A registered code exercise: its check and its solution (the tests run both, and the
    wrong attempts written next to them)."""

    name: str
    check: Callable
    solution: Callable


# "NN.short-name" -> CodeExercise, for the tests.
CODE_REGISTRY: Dict[str, CodeExercise] = {}


# Hints by words of an error's message: a text, or a function of the whole message.
Hints = Dict[str, Union[str, Callable[[str], str]]]


class LearnerCodeFailed(Exception):
    """The learner's code raised; ``feedback`` says what and gives a hint."""

    def __init__(self, feedback: Feedback):
        super().__init__(feedback.text)
        self.feedback = feedback


def learner_error(error: BaseException, hints: Optional[Hints] = None) -> Feedback:
    """``Not yet`` with the error's own message folded to its first line (the SDK's text for
    the SDK's errors; TensorFlow's add pages of stack), the learner's line that raised it,
    and a hint: the first of ``hints`` whose key appears in the whole message, else one for
    an error Python raised before running anything; no hint that guesses."""
    message = getattr(error, "message", None) or str(error) or type(error).__name__
    message = _VARIABLE_VALUES.sub(r"\1>", message)
    for words, hint in {**(hints or {}), **_MESSAGE_HINTS}.items():
        if words in message:
            hint = hint(message) if callable(hint) else hint
            break
    else:
        hint = _GENERAL_HINTS.get(type(error).__name__,
                                  "read the message and your line above, fix it and run both "
                                  "cells again.")
    first_line = _first_line(message) or type(error).__name__
    return Feedback(False, f"Not yet. Your code raised {type(error).__name__}: {first_line} "
                           f"Hint: {hint}{_learner_line(error)}")


# A variable's repr in an error message (TensorFlow's "not created in the distribution
# strategy scope", for an eager variable) prints its values: thousands of digits the learner
# need not read.
_VARIABLE_VALUES = re.compile(r"(<tf\.Variable '[^']*' shape=\([^)]*\) dtype=\w+), numpy=.*?\)>",
                              re.DOTALL)


def compiled_program(graph: tf.Graph):
    """The program ``graph`` compiled (a check's runner compiles one)."""
    return next(iter(programs.existing_registry(graph).program_by_fetch.values()))


def _first_line(message: str) -> str:
    """The message's first line; for an error raised while TensorFlow traced a function
    ("in user code:", then a stack), the error's own line at the end."""
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    if lines and lines[0] == "in user code:":
        kind, said, text = lines[-1].partition(": ")
        return text if said and kind.endswith(("Error", "Exception")) else lines[-1]
    return lines[0] if lines else ""


def _learner_line(error: BaseException) -> str:
    """" It came from your line 12: `x = ...`." for the last line of the learner's own code
    the error passed through (a notebook cell, or any file outside this package, TensorFlow
    and the installed libraries), or "" when it passed through none."""
    ours = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    found = None
    for frame in traceback.extract_tb(error.__traceback__):
        path = os.path.abspath(frame.filename) if not frame.filename.startswith("<") \
            else frame.filename
        if path.startswith(ours) or "site-packages" in path or "/lib/python" in path \
                or "__autograph_generated" in path:
            continue
        found = frame
    if found is None:
        return ""
    text = (found.line or linecache.getline(found.filename, found.lineno)).strip()
    where = f"your line {found.lineno}" + (f": `{text}`" if text else "")
    return f" It came from {where}."


def loop_arity_hint(message: str, example: str = "") -> str:
    """The hint for a loop body the loop cannot call: how the loop calls it (``example``: the
    exercise's body, as a signature), and, when the body needs one argument more than it is
    given, the ``self`` of a method, which the SDK counts (XLA's
    check_function_argument_count reads tf_inspect.getargspec)."""
    given = re.search(r"specified (\d+) inputs(?:.*? and (\d+) additional inputs)?", message)
    needed = re.search(r"needs (?:exactly|at least|at most) (\d+) argument", message)
    hint = ("the loop calls its body with the loop-carried values (`inputs`) first, then the "
            "elements of each infeed element, in order (a dict's by keyword)"
            + (f": {example}." if example else "."))
    if given and needed and int(needed.group(1)) == \
            int(given.group(1)) + int(given.group(2) or 0) + 1:
        hint += (" Your body asks for one argument more: if it is a method, the SDK counts its "
                 "`self` too, so give the loop a plain function or a lambda that calls the "
                 "method, `lambda images, labels: self.step(images, labels)`.")
    return hint


# Hints for messages any exercise's code can meet (after the exercise's own): a text, or a
# function of the message.
_MESSAGE_HINTS = {
    "Supplied loop body function cannot be called": loop_arity_hint,
    "Mismatch between input types and output types for loop body": (
        "a loop body returns its loop-carried values first, one for each entry of `inputs`, "
        "in the same order and types, then its ops (minimize's result, an outfeed's "
        "enqueue). The message lists what the loop carries, then what your body returned: "
        "with no inputs, return only ops, minimize's result rather than the loss; to carry a "
        "running total, start it in inputs=[0.0] and return [total + loss, train_op]."),
}

_GENERAL_HINTS = {
    "NameError": "a name is not defined in your code: check its spelling, and that the cell "
                 "that defines it has run.",
    "SyntaxError": "Python could not read the code: look for a missing bracket, colon or "
                   "indentation.",
    "IndentationError": "Python could not read the code: the lines inside a `with` block "
                        "must be indented by the same amount.",
}


def code_exercise(name: str, solution: Callable):
    """Make ``check(code, *context)`` a code exercise named ``"NN.short-name"``: in solutions
    mode it checks ``solution`` instead and raises ``SolutionFailed`` when that fails; an
    exception from the learner's code (``LearnerCodeFailed``) or anything else becomes a
    ``Not yet`` with the message and a hint."""
    def decorate(check):
        @functools.wraps(check)
        def run(code=..., *context, **named):
            filled = solutions_mode()
            if filled:
                code = solution
            if code is ...:
                return Feedback(False, "Not yet. Write your code in the cell above, run it, "
                                       "then run this cell again.")
            reason = next(filter(None, map(cell_runs.stale, (code, *context))), None)
            if reason is not None and not filled:
                return Feedback(False, reason)
            try:
                feedback = check(code, *context, **named)
            except LearnerCodeFailed as failed:
                feedback = failed.feedback
            except Exception as error:  # pylint: disable=broad-except  (a hint, not a traceback)
                feedback = learner_error(error)
            progress.record(name, feedback.ok, feedback.text)
            if filled and not feedback.ok:
                raise SolutionFailed(f"the solution of code exercise {name!r} fails its "
                                     f"check: {feedback.text}")
            return feedback
        CODE_REGISTRY[name] = CodeExercise(name, run, solution)
        run.exercise_name = name
        return run
    return decorate


@contextlib.contextmanager
def as_a_fresh_script(hints: Optional[Hints] = None, seed: int = 0,
                      watch: Optional[WeightWatch] = None):
    """Run the learner's code as a fresh script would: in a new graph (yielded), with no IPU
    system configured and a fixed seed; with ``watch``, its weights start as the reference's
    and are read when it ends (``weights.WeightWatch``).  The system configured before (the
    notebook's own) is configured again afterwards, and an error in the code raises
    ``LearnerCodeFailed`` with its message and a hint (``hints``: the exercise's, by words of
    the SDK's messages)."""
    try:
        with ipu_backend.configuration_kept(), tf.Graph().as_default() as graph:
            config.reset_ipu_configuration()
            tf.compat.v1.set_random_seed(seed)
            with (watch.watching() if watch is not None else contextlib.nullcontext()):
                yield graph
    except Exception as error:  # pylint: disable=broad-except  (the learner's code: a hint)
        raise LearnerCodeFailed(learner_error(error, hints)) from error


@dataclass
class ProgramRun(Facts):
    """What one run of a program did: the record of its engine runs, what it returned, its
    weights (start and end) and the graph it built."""

    runs: record.ProgramRecord
    returned: object
    weights: WeightWatch
    graph: Optional[tf.Graph] = None


class IpuGraph:
    """What a TensorFlow 1 graph holds for the IPU: its compiled programs, the ops placed in
    an IPU scope outside any program (built there but never compiled), and the ops outside
    the programs that use their results (work left on the host)."""

    def __init__(self, graph: tf.Graph):
        registry = programs.existing_registry(graph)
        built = [] if registry is None else registry.program_by_fetch.values()
        self.programs = list({id(program): program for program in built}.values())
        in_programs = {op for program in self.programs for op in program.new_ops}
        # The emulator runs an ipu_scope's ops on a host CPU device that stands for the IPU
        # (ipu/scopes.py); a plain CPU program leaves its ops unplaced.
        self.placed_outside_programs = [op for op in graph.get_operations()
                                        if op.device and op not in in_programs]
        self.host_consumers = [consumer for program in self.programs
                               for tensor in program.output_tensors
                               for consumer in tensor.consumers()
                               if consumer not in in_programs]


def run_attempt(attempt: Callable, *args, hints: Optional[Hints] = None,
                ipus: Optional[int] = None) -> ProgramRun:
    """``attempt(*args)`` as a fresh script, watched (``as_a_fresh_script``), on a device of
    ``ipus`` IPUs configured first (None: the attempt configures its own).  An error in the
    learner's code raises ``LearnerCodeFailed``."""
    weights = WeightWatch()
    with as_a_fresh_script(hints, watch=weights) as graph:
        if ipus is not None:
            device = config.IPUConfig()
            device.auto_select_ipus = ipus
            device.configure_ipu_system()
        with record.capture() as runs:
            returned = attempt(*args)
    return ProgramRun(runs, returned, weights, graph)


def optimizer_state(graph: tf.Graph):
    """A test of whether an op belongs to an optimizer's state (Momentum's or Adam's slots,
    an accumulation wrapper's accumulators): those are variables that do not train, named
    after the weight they belong to, and made where the optimizer runs, so they must not
    count as the weight's layer."""
    names = tuple(variable.op.name for variable in
                  graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES)
                  if not variable.trainable)
    return lambda op_name: any(op_name == name or op_name.startswith(name + "/")
                               for name in names)


def forward_ops_by_stage(program):
    """``(op name, stage)`` for each op of the forward pass of ``program``'s pipelines: not
    the gradients, nor the weight update's plumbing, nor an optimizer's state."""
    is_state = optimizer_state(program.graph)
    for build in programs.pipelines_of(program):
        for name, stage in build.stage_of_op.items():
            parts = name.split("/")
            if "gradients" in parts or any(part.startswith("update_") for part in parts):
                continue
            if not is_state(name):
                yield name, stage


def sample_digits(count: int):
    """The first ``count`` training digits of the bundled MNIST sample, as every check feeds
    them: float32 images in [0, 1] and int32 labels, the caller's own copies.  Quietly: a check
    needs a few hundred digits, never a download (even when the notebook asks for the full
    data), nor a line about the sample."""
    images, labels = _first_digits(count)
    return images.copy(), labels.copy()


def fed_digits_dataset(count: int, flatten: bool = False):
    """A dataset of the first ``count`` digits (``sample_digits``; images flattened to 784
    values with ``flatten``) read from placeholders, and the feed that fills them: pass it to
    the infeed's initializer.  Embedded as constants, the digits (6.4 MB of them for notebook
    09's 2,048) would be copied into the graph, its serialized form and the session's own copy
    at every check, about 65 ms of CPU each time, much of it the kernel handing out fresh pages
    (bench/embedded_data.py)."""
    images, labels = sample_digits(count)
    if flatten:
        images = images.reshape(-1, 784)
    images_in = tf.compat.v1.placeholder(tf.float32, images.shape, name="sample_images")
    labels_in = tf.compat.v1.placeholder(tf.int32, labels.shape, name="sample_labels")
    dataset = tf.data.Dataset.from_tensor_slices((images_in, labels_in))
    return dataset, {images_in: images, labels_in: labels}


@functools.lru_cache(maxsize=8)
def _first_digits(count: int):
    """Kept per count: reading the sample decompresses all its 24,000 digits (75 ms, more than
    a small check's run), and a check takes a few hundred (under 2 MB kept)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", datasets.SampleDataWarning)
        previous = os.environ.get(datasets.MODE_ENV_VAR)
        os.environ[datasets.MODE_ENV_VAR] = "sample"
        try:
            (images, labels), _ = datasets.mnist.load_data()
            return (images[:count] / 255).astype(np.float32), labels[:count].astype(np.int32)
        finally:
            if previous is None:
                del os.environ[datasets.MODE_ENV_VAR]
            else:
                os.environ[datasets.MODE_ENV_VAR] = previous


cell_runs.install()   # inside a kernel: note which cell defined each function, and how it ran

__all__ = ["CODE_REGISTRY", "IpuGraph", "as_a_fresh_script", "compiled_program",
           "forward_ops_by_stage",
           "loop_arity_hint",
           "optimizer_state", "run_attempt",
           "ProgramRun", "sample_digits", "fed_digits_dataset", "CodeExercise",
           "LearnerCodeFailed", "code_exercise", "learner_error", "not_yet"]
