"""Judging the learner's run against the reference solution's run.

A check runs the learner's program and the exercise's reference on the same data, the same
step count and the same start weights (``weights.WeightWatch``), then compares what both did:
the record's structure first (each check's own rules, in the tutorial's task order), then the
weights each left and the values each returned.  A correct alternative (another spelling of
the API, another order of building, a ``while_loop`` for ``repeat``) leaves the reference's
weights to float32 rounding; a program that never trains, scales its update, skips a batch or
returns something else does not, and the size of the difference names the mistake.
"""
from __future__ import annotations

import copy
import functools
import re
from dataclasses import dataclass
from typing import Callable, Dict, FrozenSet, Optional

import numpy as np

from ipu_emulator.code_exercises.weights import WeightWatch
from ipu_emulator.exercises import Feedback, not_yet
from ipu_emulator.ipu.gradient_accumulation import GradientAccumulationReductionMethod

# How far (relative to the size of the reference's update) the learner's weights may land
# from the reference's.  Reordered float32 sums move them by ~1e-6; every wrong program the
# tests try moves them by 0.3 or more.
TOLERANCE = 0.02
# How close two returned values must be (relative): the same losses, computed again.
VALUES_TOLERANCE = 1e-3

_APPLY_OP = re.compile(r"^(Resource)?(Sparse)?Apply(\w+)$")


@dataclass(frozen=True)
class WeightsCompared:
    """The learner's weights after their run beside the reference's."""

    shapes_match: bool
    moved: bool          # the learner's weights left their start
    scale: float         # the size of the learner's update over the reference's
    distance: float      # how far the learner's weights are from the reference's, relative

    @property
    def same(self) -> bool:
        return self.shapes_match and self.distance <= TOLERANCE


def _length(vector: np.ndarray) -> float:
    """The Euclidean length of ``vector``, summed by NumPy itself rather than by its BLAS:
    ``np.linalg.norm`` of a long vector is a BLAS dot product, which wakes OpenBLAS's worker
    threads, and they spin after each call while the check goes on building graphs (thirty
    correct pipelines judged took 16.3 s of CPU with the spinning, 11.8 s without it;
    bench/blas_spin.py).  A learner's kernel on a shared hub pays that CPU too."""
    return float(np.sqrt(np.sum(np.square(vector))))


def _flat(values):
    return np.concatenate([np.ravel(np.asarray(v, dtype=np.float64)) for v in values]) \
        if values else np.zeros(0)


def compare_weights(learner: WeightWatch, reference: WeightWatch) -> Optional[WeightsCompared]:
    """The comparison of the weights (the floating-point variables whose start the watch
    knows: counters and seeds left out), or None when the learner's could not be read."""
    if learner.final is None or reference.final is None:
        return None
    mine, theirs = _weights(learner), _weights(reference)
    if [np.shape(start) for start, _ in mine] != [np.shape(start) for start, _ in theirs]:
        moved = any(not np.array_equal(start, final) for start, final in mine)
        return WeightsCompared(False, moved, float("nan"), float("inf"))
    learner_change = _flat([final - start for start, final in mine])
    reference_change = _flat([final - start for start, final in theirs])
    reference_size = _length(reference_change) or 1.0
    return WeightsCompared(
        shapes_match=True,
        moved=bool(np.any(learner_change != 0)),
        scale=_length(learner_change) / reference_size,
        distance=_length(learner_change - reference_change) / reference_size)


def _weights(watch: WeightWatch):
    """``(start, final)`` of each watched weight whose start is known."""
    return [(start, np.asarray(final)) for start, final in zip(watch.start, watch.final)
            if start is not None]


def _layer_names(variables) -> list:
    """Each variable's layer, as the learner named it: the first name scope below those all
    the variables share ("FCModel/dense256/dense/kernel:0" -> "dense256")."""
    scopes = [variable.name.split(":")[0].split("/")[:-1] for variable in variables]
    shared = 0
    while scopes and all(len(scope) > shared + 1 and scope[shared] == scopes[0][shared]
                         for scope in scopes):
        shared += 1
    return [scope[shared] if len(scope) > shared else variable.name.split(":")[0]
            for scope, variable in zip(scopes, variables)]


def left_behind(learner: WeightWatch, reference: WeightWatch) -> list:
    """The layers (a weight's first name scope: "dense256") whose weights never moved in the
    learner's run though the reference's moved them; empty unless the two runs made weights
    of the same shapes and the learner's run moved some of them."""
    if learner.final is None or reference.final is None:
        return []
    mine, theirs = _weights(learner), _weights(reference)
    if [np.shape(start) for start, _ in mine] != [np.shape(start) for start, _ in theirs]:
        return []
    names = _layer_names([variable for variable, start in zip(learner.variables, learner.start)
                          if start is not None])
    still = [np.array_equal(start, final) for start, final in mine]
    if all(still):
        return []
    return list(dict.fromkeys(name for name, stayed, (start, final) in zip(names, still, theirs)
                              if stayed and not np.array_equal(start, final)))


def scaled_update(watch: WeightWatch, factor: float) -> WeightWatch:
    """A copy of ``watch`` whose weights moved ``factor`` times as far from their start: the
    tests' probe of the weights rule at its tolerance."""
    scaled = copy.copy(watch)
    scaled.final = [final if start is None else start + factor * (np.asarray(final) - start)
                    for start, final in zip(watch.start, watch.final)]
    return scaled


def optimizer_kinds(watch: WeightWatch) -> FrozenSet[str]:
    """The weight-update ops (``ApplyGradientDescent``, ``ResourceApplyAdam``...) of the graph
    the watched variables live in, by kind ("GradientDescent", "Adam"...); empty for eager
    variables."""
    if not watch.variables:
        return frozenset()
    try:
        operations = watch.variables[0].graph.get_operations()
    except AttributeError:
        return frozenset()
    return frozenset(found.group(3) for found in (_APPLY_OP.match(op.type)
                                                   for op in operations) if found)


def times(scale: float) -> str:
    """"16 times smaller", "twice as large" (``weights_problem`` words a scale near 1
    itself)."""
    if not np.isfinite(scale):
        return "of another shape"
    if scale > 1:
        return "twice as large" if abs(scale - 2) < 0.1 else f"{scale:.3g} times larger"
    return "half as large" if abs(scale - 0.5) < 0.05 else f"{1 / scale:.3g} times smaller"


def same_values(learner, reference) -> bool:
    """Whether the learner returned the reference's values (losses), to float32 rounding."""
    try:
        mine = np.asarray(learner, dtype=np.float64)
        theirs = np.asarray(reference, dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return mine.shape == theirs.shape and bool(
        np.allclose(mine, theirs, rtol=VALUES_TOLERANCE, atol=1e-6))


# Why weights stay put, whatever the exercise: an update built but never asked for.
NEVER_RUN_UPDATE = ("in TensorFlow 1 an op runs only if something asks for it, so the "
                    "optimizer's op (minimize's result) must be among what the step returns")


# The accumulated gradients averaged instead of added up: the SDK's reduction_method
# (GradientAccumulationOptimizerV2, pipeline) offers it, and a task that does not name the
# reduction accepts it.
MEAN_REDUCTION = "a mean of the gradients (reduction_method MEAN or RUNNING_MEAN)"

# Forms of the reference the SDK offers for a task, each accepted: {what it is: its weights,
# run when first needed}.
Variants = Dict[str, Callable[[], WeightWatch]]


def mean_variant(reduction: str, name: str, run: Callable[[Callable], object],
                 solution: Callable) -> Variants:
    """The reference run with the gradients averaged (``run(solution)`` with
    ``reduction_method=MEAN``: a run that holds ``weights``), as an accepted variant, when the
    learner's run averaged them too (``reduction``: the recorded reduction method's name);
    none when it added them up, so that a learning rate divided by the count is not taken for
    a mean."""
    if reduction not in ("MEAN", "RUNNING_MEAN"):
        return {}
    averaging = functools.partial(solution,
                                  reduction_method=GradientAccumulationReductionMethod.MEAN)
    return {MEAN_REDUCTION: lambda: reference_run(f"{name} MEAN",
                                                  lambda: run(averaging)).weights}


def matched_variant(learner: WeightWatch, variants: Variants) -> Optional[str]:
    """The first of ``variants`` whose weights the learner's match, or None."""
    for name, weights in variants.items():
        compared = compare_weights(learner, weights())
        if compared is not None and compared.same:
            return name
    return None


def same_weights(variant: Optional[str]) -> str:
    """How a "Right" text says where the learner's weights ended: with the reference's, or
    with an accepted variant's (``matched_variant``)."""
    if variant is None:
        return "to the weights the tutorial's program ends with"
    return (f"to the weights the tutorial's program ends with when it uses {variant}, which "
            f"the SDK offers too")


def weights_problem(learner: WeightWatch, reference: WeightWatch, what_ran: str,
                    never_changed: str, elsewhere: str, optimizer_free: bool = False,
                    variants: Optional[Variants] = None) -> Optional[Feedback]:
    """"Not yet" when the learner's weights were initialized again during training, never
    moved (``never_changed``: the hint) or ended away from the reference's and from each of
    its accepted ``variants`` (``elsewhere``: what the task keeps as it was), after
    ``what_ran`` (what the learner's run did right, in their numbers); None when they agree
    or could not be read.  ``optimizer_free``: the task lets the learner pick the optimizer,
    so with another one only that the weights moved is judged."""
    if learner.initializations > max(1, reference.initializations):
        return not_yet(f"{what_ran}, but it initialized the variables "
                       f"{learner.initializations} times: each sess.run of the initializer "
                       f"puts the weights back at their start, undoing the training before "
                       f"it. Run it once, before the training loop.")
    compared = compare_weights(learner, reference)
    if compared is None:
        return None
    if not compared.moved:
        return not_yet(f"{what_ran}, but the weights never changed: the program computed the "
                       f"loss and left the model as it was. {never_changed}")
    behind = left_behind(learner, reference)
    if behind:
        return not_yet(f"{what_ran}, but only some of the weights trained: those of "
                       f"{', '.join(behind)} never moved, where the tutorial's program "
                       f"updates them. The gradients never reached them: a tf.stop_gradient, "
                       f"a layer whose output the loss does not use, or an optimizer given "
                       f"only some of the variables stops them there.")
    if optimizer_free and optimizer_kinds(learner) != optimizer_kinds(reference):
        return None
    if not compared.same and matched_variant(learner, variants or {}) is None:
        if 0.8 <= compared.scale <= 1.25:   # as large, pointing elsewhere
            return not_yet(f"{what_ran}, but the weights ended elsewhere than the tutorial's "
                           f"program's from the same start: your updates were about as large "
                           f"but pointed elsewhere, as if the steps saw other batches or "
                           f"computed another loss. The check feeds both programs the same "
                           f"batches in the same order: a shuffle, a skipped batch or a "
                           f"changed layer makes them differ. {elsewhere}")
        return not_yet(f"{what_ran}, but the weights ended elsewhere than the tutorial's "
                       f"program's from the same start, on the same data: your updates were "
                       f"{times(compared.scale)}. {elsewhere}")
    return None


_REFERENCE_RUNS: Dict[str, object] = {}


def reference_run(name: str, run: Callable[[], object]):
    """The reference's run for exercise ``name``, run once per process: it is the same every
    time (same data, same start weights)."""
    if name not in _REFERENCE_RUNS:
        _REFERENCE_RUNS[name] = run()
    return _REFERENCE_RUNS[name]


def remember_reference_run(name: str, facts) -> None:
    """``facts``, a run of exercise ``name``'s reference solution itself (a check given the
    solution, as in solutions mode), serve as its reference run if none was run yet: the
    reference would be the same program on the same data and start weights, run again."""
    _REFERENCE_RUNS.setdefault(name, facts)


class Facts:
    """What one run of a program did, as an exercise's rules read it.  ``judge`` (and the
    probes' test) tie it to its exercise, so that rules can read the reference's run."""

    exercise = None   # the harness.Exercise this run was judged for

    @property
    def reference(self) -> "Facts":
        """The reference solution's facts, on the same data and start weights."""
        return self.exercise.reference()

    def mean_variants(self, reduction: str) -> Variants:
        """The reference averaging its gradients, accepted when ``reduction`` (this run's
        recorded reduction method) averaged too (``reference.mean_variant``)."""
        exercise = self.exercise
        return mean_variant(reduction, exercise.name, exercise.run, exercise.solution)


__all__ = ["Facts", "TOLERANCE", "WeightsCompared", "compare_weights", "optimizer_kinds", "times",
           "same_values", "reference_run", "remember_reference_run", "weights_problem",
           "left_behind", "matched_variant", "Variants", "MEAN_REDUCTION", "mean_variant",
           "scaled_update", "same_weights", "NEVER_RUN_UPDATE"]
