"""Pipeline schedules as data: which IPU runs which stage's work on which micro-batch, in order.

A schedule is a small, printable, comparable value, in the style of PyTorch's
``torch.distributed.pipelining.schedules``: per IPU, an ordered list of ``Action`` records
whose compact string form tests and learners read and write::

    >>> s = grouped(num_stages=2, micro_batches=4)
    >>> print(s)                                    # doctest: +NORMALIZE_WHITESPACE
    grouped schedule: 2 stages on 2 IPUs, 4 micro-batches, training; synchronous, 7 time steps
    step  0    1        2        3        4        5    6
    IPU0  0F0  0F1      0F2+0B0  0F3+0B1  0B2      0B3  0U
    IPU1  .    1F0+1B0  1F1+1B1  1F2+1B2  1F3+1B3  .    1U
    >>> [str(a) for a in s.ipu_actions[1][:3]]
    ['1F0', '1B0', '1F1']
    >>> Action.parse("1F0") == Action(stage=1, kind="F", micro_batch=0)
    True

Action kinds: ``F`` forward, ``B`` backward (with a ``W`` in the schedule: only the input
gradient), ``W`` weight gradient (the other half of a split backward, zero-bubble
schedules), ``R`` recompute (the forward pass again, just before the backward pass), ``U``
weight update (once per stage per pipeline pass, no micro-batch: ``"2U"``).

Graphcore's three schedules (``PipelineSchedule`` Grouped / Interleaved / Sequential) are
*bulk-synchronous*: the IPUs work in time steps and all of them sync between steps, when the
stage outputs move to the next IPU.  Their ``Schedule.steps`` holds the step structure.  With
``N`` stages (stage ``k`` on IPU ``device_mapping[k]``) and micro-batches ``m = 0 .. M-1``:

* **Grouped** (the default): in step ``t`` every IPU first runs its forward stage, then its
  backward stage.  ``F_k(m)`` runs in step ``m + k`` and ``B_k(m)`` in step ``m + 2N-2-k``,
  so the last stage runs a micro-batch's forward and backward in the same step.  Stage 0 holds
  up to ``2N - 1`` micro-batches' activations.
* **Interleaved**: IPU ``k`` alternates forward and backward steps, starting with a forward
  in step ``k``: ``F_k(m)`` in step ``2m + k``, ``B_k(m)`` in step ``2m + 2N-1-k``; every step
  runs at most one stage per IPU (``N`` micro-batches in flight on stage 0).  For inference
  (forward stages only) it is the same as Grouped.
* **Sequential**: one stage at a time, one per step (micro-batch by micro-batch, forward then
  backward), so two IPUs never compute at once: as slow as sharding.
* A last step runs every stage's weight update ``U`` (Sequential: one IPU per step).

The comparison schedules are *asynchronous*: an action starts as soon as its inputs have
arrived and its IPU has finished the previous action in its list.

* **gpipe**: every stage runs all forwards, then all backwards.
* **1f1b** (PipeDream-flush, Megatron): stage ``k`` runs ``min(S-k-1, M)`` warm-up
  forwards, then alternates one forward and one backward, then drains the backwards: at most
  ``S`` micro-batches in flight on stage 0.
* **interleaved-1f1b** (Megatron's virtual pipeline): each of ``P`` IPUs holds
  ``v = stages_per_ipu`` chunks, stage ``s`` on IPU ``s % P``; forwards go through the
  chunks in rounds of ``P`` micro-batches, warm-up ``2(P-p-1) + (v-1)P`` on IPU ``p``.
* **zero-bubble** (ZB-H1, Qi et al. 2024): the backward is split into ``B`` (input gradient,
  on the critical path) and ``W`` (weight gradient, can wait).  Built by the paper's greedy
  rule: a ready ``B`` first, else a forward while the stage holds fewer than ``S``
  micro-batches (1F1B's peak, so memory is no worse), else a pending ``W`` -- the ``W``s fill
  what would be bubbles.

Every builder takes ``(num_stages, micro_batches, device_mapping=None, training=True)``;
``validate(schedule)`` checks a schedule (dependencies, each action exactly once, weight
updates last) and reports a deadlock instead of hanging.  Graphcore's configuration rules
(at least two stages, ``gradient_accumulation_count`` multiples) raise
``PipelineConfigurationError`` carrying the SDK's message and exception class name.

Pure Python: no TensorFlow import.
"""
from __future__ import annotations

import heapq
import re
from dataclasses import dataclass
from typing import (Callable, Dict, Iterable, List, NamedTuple, Optional, Sequence, Set,
                    Tuple, Union)

FORWARD, BACKWARD, WEIGHT_GRAD, RECOMPUTE, UPDATE = "F", "B", "W", "R", "U"
ACTION_KINDS = (FORWARD, BACKWARD, WEIGHT_GRAD, RECOMPUTE, UPDATE)
# Work that must finish before a stage's weight update (it all reads or writes gradients).
BACKWARD_WORK = frozenset({BACKWARD, WEIGHT_GRAD, RECOMPUTE})

GRAPHCORE_SCHEDULES = ("grouped", "interleaved", "sequential")
COMPARISON_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zero-bubble")
SCHEDULE_NAMES = GRAPHCORE_SCHEDULES + COMPARISON_SCHEDULES

# ``PipelineSchedule(IntEnum)``: Grouped=0, Interleaved=1, Sequential=2 (IPU_API.md 6.2).
_PIPELINE_SCHEDULE_ENUM = {0: "grouped", 1: "interleaved", 2: "sequential"}


# --- errors ---------------------------------------------------------------------------


class PipelineConfigurationError(Exception):
    """A pipeline the Graphcore SDK would reject, with its message and exception class.

    ``sdk_error`` names the TensorFlow exception the SDK raises ("FailedPreconditionError",
    "ValueError", "NotImplementedError", "TypeError") so the TensorFlow front can re-raise
    the exact type while widgets and the CLI just show ``message``.

    >>> try:
    ...     check_gradient_accumulation_count("grouped", num_stages=2, gac=6)
    ... except PipelineConfigurationError as error:
    ...     print(error.sdk_error + ":", error.message.split(",")[0])
    FailedPreconditionError: The number of iterations of the pipeline must be a multiple of 4
    """

    def __init__(self, message: str, sdk_error: str = "ValueError"):
        super().__init__(message)
        self.message = message
        self.sdk_error = sdk_error


class InvalidScheduleError(ValueError):
    """A schedule that breaks a rule: an action missing, repeated, on the wrong IPU, or
    placed before something it needs."""


class DeadlockError(InvalidScheduleError):
    """A schedule whose IPUs would wait for each other forever."""


# --- actions --------------------------------------------------------------------------

_ACTION_PATTERN = re.compile(r"^\s*(\d+)([FBWRU])(\d*)\s*$")


class Action(NamedTuple):
    """One piece of work: ``stage``'s ``kind`` on ``micro_batch`` (None for ``U``).

    Immutable and hashable; ``str(action)`` is the compact form and ``Action.parse`` reads it:

    >>> str(Action(1, "F", 0)), str(Action(2, "U"))
    ('1F0', '2U')
    >>> Action.parse("3B12")
    Action(stage=3, kind='B', micro_batch=12)
    """

    stage: int
    kind: str
    micro_batch: Optional[int] = None

    def __str__(self) -> str:
        return f"{self.stage}{self.kind}{'' if self.micro_batch is None else self.micro_batch}"

    @classmethod
    def parse(cls, text: str) -> "Action":
        match = _ACTION_PATTERN.match(text) if isinstance(text, str) else None
        if match is None:
            raise ValueError(
                f"Cannot parse {text!r} as an action: write <stage><kind><micro-batch>, e.g. "
                f"'1F0', with kind one of {', '.join(ACTION_KINDS)} ('U' takes no micro-batch, "
                f"e.g. '2U').")
        stage, kind, micro_batch = match.groups()
        if kind == UPDATE and micro_batch:
            raise ValueError(f"Cannot parse {text!r}: a weight update 'U' is per stage and "
                             f"takes no micro-batch (write '{stage}U').")
        if kind != UPDATE and not micro_batch:
            raise ValueError(f"Cannot parse {text!r}: a {kind} action needs a micro-batch "
                             f"number (e.g. '{stage}{kind}0').")
        return cls(int(stage), kind, int(micro_batch) if micro_batch else None)


def parse_actions(text: Union[str, Iterable[str]]) -> Tuple[Action, ...]:
    """``parse_actions("0F0 0F1 0B0")`` -> three Actions (also accepts a list of strings)."""
    items = text.split() if isinstance(text, str) else list(text)
    return tuple(item if isinstance(item, Action) else Action.parse(item) for item in items)


def format_actions(actions: Iterable[Action]) -> str:
    """``format_actions(parse_actions("0F0 0B0")) == "0F0 0B0"``."""
    return " ".join(str(a) for a in actions)


def F(stage: int, micro_batch: int) -> Action:
    return Action(stage, FORWARD, micro_batch)


def B(stage: int, micro_batch: int) -> Action:
    return Action(stage, BACKWARD, micro_batch)


def W(stage: int, micro_batch: int) -> Action:
    return Action(stage, WEIGHT_GRAD, micro_batch)


def R(stage: int, micro_batch: int) -> Action:
    return Action(stage, RECOMPUTE, micro_batch)


def U(stage: int) -> Action:
    return Action(stage, UPDATE, None)


# --- the schedule value ---------------------------------------------------------------


@dataclass(frozen=True)
class Schedule:
    """Per IPU, the ordered actions of one pipeline pass (``micro_batches`` micro-batches
    and, when training, one weight update per stage).

    ``device_mapping[k]`` is the IPU of stage ``k``; ``ipu_actions[i]`` the actions IPU ``i``
    runs, in order.  ``steps`` is set for bulk-synchronous (Graphcore) schedules: the actions
    of each time step; an IPU runs its actions of a step in the order of ``ipu_actions``.
    """

    name: str
    num_stages: int
    micro_batches: int
    device_mapping: Tuple[int, ...]
    ipu_actions: Tuple[Tuple[Action, ...], ...]
    steps: Optional[Tuple[Tuple[Action, ...], ...]] = None
    training: bool = True

    @property
    def num_ipus(self) -> int:
        return len(self.ipu_actions)

    @property
    def synchronous(self) -> bool:
        """True for BSP schedules (time steps, all IPUs sync between steps)."""
        return self.steps is not None

    def ipu_of(self, stage: int) -> int:
        return self.device_mapping[stage]

    def stages_on(self, ipu: int) -> List[int]:
        return [k for k, i in enumerate(self.device_mapping) if i == ipu]

    @property
    def recompute(self) -> bool:
        return any(a.kind == RECOMPUTE for actions in self.ipu_actions for a in actions)

    @property
    def split_backward(self) -> bool:
        return any(a.kind == WEIGHT_GRAD for actions in self.ipu_actions for a in actions)

    def actions(self) -> List[Action]:
        """All actions, IPU by IPU."""
        return [a for actions in self.ipu_actions for a in actions]

    def step_of(self) -> Dict[Action, int]:
        """``{action: time step}`` of a synchronous schedule (empty for asynchronous ones)."""
        return {a: t for t, step in enumerate(self.steps or ()) for a in step}

    def describe(self) -> str:
        mode = (f"synchronous, {len(self.steps)} time steps" if self.synchronous
                else "asynchronous: an action starts when its inputs and its IPU are ready")
        return (f"{self.name} schedule: {self.num_stages} stages on {self.num_ipus} IPUs, "
                f"{self.micro_batches} micro-batch{'es' if self.micro_batches != 1 else ''}, "
                f"{'training' if self.training else 'inference'}; {mode}")

    def to_text(self) -> str:
        """One line per IPU, ``"IPU0: 0F0 0F1 ..."``; ``Schedule.parse`` reads it back."""
        return "\n".join(f"IPU{i}: {format_actions(actions)}"
                         for i, actions in enumerate(self.ipu_actions))

    def grid(self) -> str:
        """The time-step grid of a synchronous schedule: a row per IPU, a column per step,
        ``.`` where the IPU idles and ``+`` between the actions of one step."""
        if not self.synchronous:
            raise ValueError(f"The {self.name} schedule is asynchronous: it has no time steps.")
        cells = [["." for _ in self.steps] for _ in range(self.num_ipus)]
        for t, step in enumerate(self.steps):
            per_ipu: Dict[int, List[str]] = {}
            for a in step:
                per_ipu.setdefault(self.ipu_of(a.stage), []).append(str(a))
            for ipu, names in per_ipu.items():
                cells[ipu][t] = "+".join(names)
        header = ["step"] + [str(t) for t in range(len(self.steps))]
        rows = [header] + [[f"IPU{i}"] + row for i, row in enumerate(cells)]
        widths = [max(len(row[c]) for row in rows) for c in range(len(header))]
        return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                         for row in rows)

    def __str__(self) -> str:
        body = self.grid() if self.synchronous else self.to_text()
        return f"{self.describe()}\n{body}"

    @classmethod
    def from_actions(cls, ipu_actions: Sequence[Union[str, Sequence[Union[Action, str]]]],
                     num_stages: Optional[int] = None, micro_batches: Optional[int] = None,
                     name: str = "custom", training: Optional[bool] = None,
                     steps: Optional[Sequence[Sequence[Union[Action, str]]]] = None,
                     ) -> "Schedule":
        """A schedule written by hand: per IPU, its actions (Actions, strings, or one
        space-separated string).  Stage placement, stage count, micro-batch count and training
        are read from the actions unless given.  Nothing is checked here; see ``validate``.

        >>> s = Schedule.from_actions(["0F0 0F1 0B0 0B1 0U", "1F0 1B0 1F1 1B1 1U"])
        >>> s.device_mapping, s.micro_batches, s.training
        ((0, 1), 2, True)
        """
        per_ipu = tuple(parse_actions(actions) for actions in ipu_actions)
        every = [a for actions in per_ipu for a in actions]
        stages = num_stages if num_stages is not None else (
            max((a.stage for a in every), default=-1) + 1)
        batches = micro_batches if micro_batches is not None else (
            max((a.micro_batch for a in every if a.micro_batch is not None), default=-1) + 1)
        # A stage lives on the IPU that lists most of its actions, so a stray action is the
        # one validation reports.
        counts: List[Dict[int, int]] = [{} for _ in range(max(stages, 0))]
        for ipu, actions in enumerate(per_ipu):
            for a in actions:
                if 0 <= a.stage < stages:
                    counts[a.stage][ipu] = counts[a.stage].get(ipu, 0) + 1
        mapping = tuple(max(c, key=lambda ipu: (c[ipu], -ipu)) if c else 0 for c in counts)
        is_training = training if training is not None else any(a.kind != FORWARD for a in every)
        step_tuple = (tuple(parse_actions(step) for step in steps) if steps is not None else None)
        return cls(name, stages, batches, mapping, per_ipu, step_tuple, is_training)

    @classmethod
    def parse(cls, text: str, **options) -> "Schedule":
        """Read ``to_text()`` output (lines ``IPU<n>: actions``); options as ``from_actions``.

        >>> s = gpipe(2, 2)
        >>> Schedule.parse(s.to_text(), name="gpipe").ipu_actions == s.ipu_actions
        True
        """
        lines: Dict[int, str] = {}
        for line in text.strip().splitlines():
            match = re.match(r"^\s*IPU(\d+)\s*:(.*)$", line)
            if match is None:
                raise ValueError(f"Cannot parse schedule line {line!r}: expected "
                                 f"'IPU<n>: <actions>', e.g. 'IPU0: 0F0 0F1 0B0'.")
            lines[int(match.group(1))] = match.group(2)
        count = max(lines, default=-1) + 1
        return cls.from_actions([lines.get(i, "") for i in range(count)], **options)


# --- argument checks, as the SDK makes them -------------------------------------------


def check_device_mapping(num_stages: int, device_mapping=None) -> Tuple[int, ...]:
    """The stage -> IPU list, checked with the SDK's messages (IPU_API.md 6.3 items 6, 8, 9).

    >>> check_device_mapping(3)
    (0, 1, 2)
    """
    if not isinstance(num_stages, int) or isinstance(num_stages, bool):
        raise PipelineConfigurationError(
            f"The number of pipeline stages must be an integer, got {num_stages!r}.", "TypeError")
    if num_stages < 2:
        raise PipelineConfigurationError(
            "Pipeline requires at least two computational stages.", "ValueError")
    if device_mapping is None:
        return tuple(range(num_stages))
    if not isinstance(device_mapping, (list, tuple)):
        raise PipelineConfigurationError(
            "device_mapping argument needs to be a list or a tuple.", "TypeError")
    if len(device_mapping) != num_stages:
        raise PipelineConfigurationError(
            "Each stage must be mapped to an IPU: %d mappings != %d stages"
            % (len(device_mapping), num_stages), "ValueError")
    for ipu in device_mapping:
        if not isinstance(ipu, int) or isinstance(ipu, bool) or ipu < 0:
            raise PipelineConfigurationError(
                f"device_mapping entries must be IPU numbers (integers >= 0); got "
                f"{list(device_mapping)}.", "ValueError")
    return tuple(device_mapping)


def _check_micro_batches(micro_batches) -> int:
    if not isinstance(micro_batches, int) or isinstance(micro_batches, bool) or micro_batches < 1:
        raise ValueError(f"A pipeline pass needs at least one micro-batch; got "
                         f"micro_batches={micro_batches!r}.")
    return micro_batches


def normalise_schedule_name(schedule) -> str:
    """The canonical name of a schedule given as a name, ``PipelineSchedule`` member or int.

    >>> normalise_schedule_name("PipelineSchedule.Interleaved"), normalise_schedule_name(0)
    ('interleaved', 'grouped')
    >>> normalise_schedule_name("ZB-H1")
    'zero-bubble'
    """
    if isinstance(schedule, Schedule):
        return schedule.name
    if isinstance(schedule, int) and not isinstance(schedule, bool) and not hasattr(schedule, "name"):
        if schedule in _PIPELINE_SCHEDULE_ENUM:
            return _PIPELINE_SCHEDULE_ENUM[schedule]
    elif hasattr(schedule, "name") and isinstance(getattr(schedule, "name"), str):
        schedule = schedule.name  # an IntEnum member such as PipelineSchedule.Grouped
    if isinstance(schedule, str):
        key = schedule.strip().lower().split(".")[-1].replace("_", "-").replace(" ", "-")
        key = _ALIASES.get(key, key)
        if key in SCHEDULE_NAMES:
            return key
    raise PipelineConfigurationError(
        f"Unknown pipeline schedule {schedule!r}; the schedules are: "
        f"{', '.join(SCHEDULE_NAMES)}.", "ValueError")


_ALIASES = {
    "one-f-one-b": "1f1b", "pipedream-flush": "1f1b", "interleaved1f1b": "interleaved-1f1b",
    "interleaved-one-f-one-b": "interleaved-1f1b", "virtual-pipeline": "interleaved-1f1b",
    "zb-h1": "zero-bubble", "zbh1": "zero-bubble", "zb": "zero-bubble",
    "zerobubble": "zero-bubble", "g-pipe": "gpipe",
}


# --- gradient accumulation count (IPU_API.md 6.5) -------------------------------------

_GAC_SUFFIX = ("This number might be called `gradient_accumulation_count`, "
               "`gradient_accumulation_steps_per_replica` or `steps_per_execution` depending "
               "on the API used.")


def pipeline_overlap(schedule, num_stages: int, training: bool = True,
                     device_mapping=None) -> int:
    """How many micro-batches one unrolled cycle of the compiled pipeline holds (the SDK's
    ``|ScheduleOffsets(schedule, M)|``); the gradient accumulation count must be a multiple.

    ``M`` is the forward stages' IPUs followed, when training, by the backward stages' IPUs
    in reverse.  Grouped: ``len(M)`` (``2N`` training, ``N`` inference).  Interleaved: the
    rotations of ``M`` that can run side by side without using one IPU twice in the same
    slot, chosen greedily from rotation 0 (``N`` for distinct IPUs).  Sequential: 1.  The
    comparison schedules compile to no such cycle: 1.

    >>> [pipeline_overlap(s, 4) for s in ("grouped", "interleaved", "sequential")]
    [8, 4, 1]
    >>> pipeline_overlap("grouped", 4, training=False)
    4
    """
    name = normalise_schedule_name(schedule)
    mapping = list(check_device_mapping(num_stages, device_mapping))
    slots = mapping + (mapping[::-1] if training else [])
    if name == "grouped":
        return len(slots)
    if name == "interleaved":
        return len(_non_overlapping_rotations(slots))
    return 1


def _non_overlapping_rotations(slots: List[int]) -> List[int]:
    """Greedy ``ScheduleOffsets`` for Interleaved: rotation ``r`` joins if no slot position
    would then hold the same IPU twice (one IPU cannot run two stages in one slot)."""
    length = len(slots)
    taken: Set[Tuple[int, int]] = {(position, ipu) for position, ipu in enumerate(slots)}
    offsets = [0]
    for r in range(1, length):
        rotated = [(position, slots[(position + r) % length]) for position in range(length)]
        if not any(slot in taken for slot in rotated):
            offsets.append(r)
            taken.update(rotated)
    return offsets


def check_gradient_accumulation_count(schedule, num_stages: int, gac, training: bool = True,
                                      device_mapping=None) -> int:
    """Apply the SDK's rules for ``gradient_accumulation_count``; return the overlap.

    Python-side (ValueError): it must be given and not negative.  Compile time
    (FailedPreconditionError, on the first run): ``gac % overlap == 0`` (checked first, so 0
    passes it) and ``gac >= overlap``, with the SDK's messages verbatim.

    >>> check_gradient_accumulation_count("interleaved", 4, 8)
    4
    >>> try:
    ...     check_gradient_accumulation_count("grouped", 3, 10, training=False)
    ... except PipelineConfigurationError as error:
    ...     print(error.message.split(".")[0])
    The number of iterations of the pipeline must be a multiple of 3, but it is 10
    """
    if gac is None:
        raise PipelineConfigurationError("gradient_accumulation_count must be specified.",
                                         "ValueError")
    if not isinstance(gac, int) or isinstance(gac, bool):
        raise PipelineConfigurationError(
            f"gradient_accumulation_count must be an integer, got {gac!r}.", "TypeError")
    if gac < 0:
        raise PipelineConfigurationError("gradient_accumulation_count must be >= 0.",
                                         "ValueError")
    overlap = pipeline_overlap(schedule, num_stages, training, device_mapping)
    if gac % overlap != 0:
        raise PipelineConfigurationError(
            f"The number of iterations of the pipeline must be a multiple of {overlap}, but it "
            f"is {gac}. {_GAC_SUFFIX}", "FailedPreconditionError")
    if gac < overlap:
        raise PipelineConfigurationError(
            f"The number of iterations of the pipeline must be at least {overlap}, but it is "
            f"{gac}. {_GAC_SUFFIX}", "FailedPreconditionError")
    return overlap


# --- building blocks ------------------------------------------------------------------


def _weight_updates(stages: Iterable[int]) -> List[Action]:
    return [U(k) for k in stages]


def _from_steps(name: str, steps: List[List[Action]], mapping: Tuple[int, ...],
                micro_batches: int, training: bool) -> Schedule:
    """A synchronous schedule from its time steps (empty steps are dropped)."""
    steps = [tuple(step) for step in steps if step]
    num_ipus = max(mapping) + 1
    per_ipu: List[List[Action]] = [[] for _ in range(num_ipus)]
    for step in steps:
        for a in step:
            per_ipu[mapping[a.stage]].append(a)
    return Schedule(name, len(mapping), micro_batches, mapping,
                    tuple(tuple(actions) for actions in per_ipu), tuple(steps), training)


def _from_stage_orders(name: str, stage_orders: List[List[Action]], mapping: Tuple[int, ...],
                       micro_batches: int, training: bool) -> Schedule:
    """An asynchronous schedule from each stage's own order of work.

    With one stage per IPU the IPU's list is its stage's list.  IPUs holding several stages
    interleave them as a dataflow machine would: whenever the IPU is free it takes the stage
    whose next action became ready first (simulated with unit costs).  Weight updates go last.
    """
    num_ipus = max(mapping) + 1
    if len(set(mapping)) == len(mapping):
        per_ipu: List[List[Action]] = [[] for _ in range(num_ipus)]
        for stage, order in enumerate(stage_orders):
            per_ipu[mapping[stage]] = list(order)
    else:
        per_ipu = _merge_stage_orders(stage_orders, mapping, len(mapping))
    if training:
        for ipu in range(num_ipus):
            per_ipu[ipu] += _weight_updates(k for k in range(len(mapping)) if mapping[k] == ipu)
    return Schedule(name, len(mapping), micro_batches, mapping,
                    tuple(tuple(actions) for actions in per_ipu), None, training)


def _dependencies(a: Action, num_stages: int, recomputed: Set[Tuple[int, int]]) -> tuple:
    """What ``a`` needs done first (weight updates are handled separately: they need all of
    their stage's backward work).  Plain tuples: they equal and hash like Actions and are
    cheaper to build in these hot loops."""
    k, kind, m = a
    if kind == FORWARD:
        return ((k - 1, FORWARD, m),) if k > 0 else ()
    if kind == BACKWARD:
        needs = [(k, FORWARD, m)]
        if (k, m) in recomputed:
            needs.append((k, RECOMPUTE, m))
        if k < num_stages - 1:
            needs.append((k + 1, BACKWARD, m))
        return tuple(needs)
    if kind == RECOMPUTE:
        return ((k, FORWARD, m),)
    if kind == WEIGHT_GRAD:
        return ((k, BACKWARD, m),)
    return ()


_NO_RECOMPUTE: Set[Tuple[int, int]] = frozenset()


def _merge_stage_orders(stage_orders: List[List[Action]], mapping: Tuple[int, ...],
                        num_stages: int) -> List[List[Action]]:
    """Interleave per-stage orders on shared IPUs by a unit-cost dataflow simulation."""
    queues = [list(order) for order in stage_orders]
    heads = [0] * num_stages
    stages_of: Dict[int, List[int]] = {}
    for stage, ipu in enumerate(mapping):
        stages_of.setdefault(ipu, []).append(stage)
    finished: Dict[Action, float] = {}

    def pick(ipu: int, now: float) -> Optional[Action]:
        best = None
        for stage in stages_of[ipu]:
            if heads[stage] >= len(queues[stage]):
                continue
            a = queues[stage][heads[stage]]
            needs = _dependencies(a, num_stages, _NO_RECOMPUTE)
            if all(d in finished for d in needs):
                ready = max((finished[d] for d in needs), default=0.0)
                if best is None or (ready, stage) < best[0]:
                    best = ((ready, stage), a)
        if best is None:
            return None
        heads[best[1].stage] += 1
        return best[1]

    total = sum(len(q) for q in queues)
    return _list_schedule(mapping, num_stages, total, pick, finished, _unit_duration)


def _unit_duration(a: Action) -> float:
    return 0.5 if a.kind in (WEIGHT_GRAD,) else 1.0


def _list_schedule(mapping: Tuple[int, ...], num_stages: int, total: int,
                   pick: Callable[[int, float], Optional[Action]],
                   finished: Dict[Action, float],
                   duration: Callable[[Action], float]) -> List[List[Action]]:
    """Event-driven list scheduling: whenever an IPU is idle it asks ``pick`` for its next
    action.  Only IPUs whose inputs may have changed are asked again, so each completion costs
    O(1) picks.  Returns the per-IPU orders (raises DeadlockError if ``pick`` never finishes)."""
    num_ipus = max(mapping) + 1
    per_ipu: List[List[Action]] = [[] for _ in range(num_ipus)]
    busy = [False] * num_ipus
    running: List[Tuple[float, int, Action]] = []
    sequence = 0
    now = 0.0
    to_try = list(range(num_ipus))
    placed = 0
    while True:
        for ipu in to_try:
            if busy[ipu]:
                continue
            a = pick(ipu, now)
            if a is not None:
                busy[ipu] = True
                per_ipu[ipu].append(a)
                placed += 1
                heapq.heappush(running, (now + duration(a), sequence, a))
                sequence += 1
        if not running:
            break
        now, _, done = heapq.heappop(running)
        batch = [done]
        while running and running[0][0] == now:
            batch.append(heapq.heappop(running)[2])
        to_try = []
        for a in batch:
            finished[a] = now
            ipu = mapping[a.stage]
            busy[ipu] = False
            to_try.append(ipu)
            if a.kind == FORWARD and a.stage + 1 < num_stages:
                to_try.append(mapping[a.stage + 1])
            if a.kind == BACKWARD and a.stage > 0:
                to_try.append(mapping[a.stage - 1])
        to_try = sorted(set(to_try))
    if placed != total:
        raise DeadlockError(f"Could not build the schedule: {total - placed} of {total} actions "
                            f"never became ready.")
    return per_ipu


# --- Graphcore's synchronous schedules ------------------------------------------------


def grouped(num_stages: int, micro_batches: int, device_mapping=None,
            training: bool = True) -> Schedule:
    """Graphcore's default ``PipelineSchedule.Grouped``: ``F_k(m)`` in step ``m+k``,
    ``B_k(m)`` in step ``m+2N-2-k``; in a step each IPU runs its forwards, then its backwards.

    >>> s = grouped(4, 8)
    >>> s.step_of()[B(0, 0)], s.step_of()[F(3, 0)], s.step_of()[B(3, 0)]
    (6, 3, 3)
    """
    mapping = check_device_mapping(num_stages, device_mapping)
    n, m_count = num_stages, _check_micro_batches(micro_batches)
    last = m_count - 1 + (2 * n - 2 if training else n - 1)
    forwards: List[List[Action]] = [[] for _ in range(last + 1)]
    backwards: List[List[Action]] = [[] for _ in range(last + 1)]
    for m in range(m_count):
        for k in range(n):
            forwards[m + k].append(F(k, m))
    if training:
        for m in range(m_count):
            for k in reversed(range(n)):
                backwards[m + 2 * n - 2 - k].append(B(k, m))
    steps = [f + b for f, b in zip(forwards, backwards)]
    if training:
        steps.append(_weight_updates(range(n)))
    return _from_steps("grouped", steps, mapping, m_count, training)


def check_interleaved_mapping(num_stages: int, device_mapping=None, training: bool = True):
    """The SDK's Python-side check of an Interleaved pipeline: training may not put two
    stages on one IPU (``NotImplementedError``).  Returns the checked device mapping."""
    mapping = check_device_mapping(num_stages, device_mapping)
    if training and len(set(mapping)) != len(mapping):
        raise PipelineConfigurationError(
            "The pipelining schedule 'Interleaved' does not currently support multiple "
            "pipeline stages on the same device for training graphs. Please use a different "
            "pipeline schedule.", "NotImplementedError")
    return mapping


def interleaved(num_stages: int, micro_batches: int, device_mapping=None,
                training: bool = True) -> Schedule:
    """Graphcore's ``PipelineSchedule.Interleaved``: IPU ``k`` alternates forward and backward
    steps, ``F_k(m)`` in step ``2m+k`` and ``B_k(m)`` in step ``2m+2N-1-k``.

    Training with two stages on one IPU raises the SDK's NotImplementedError.

    >>> interleaved(4, 8).step_of()[B(0, 0)]
    7
    """
    mapping = check_interleaved_mapping(num_stages, device_mapping, training)
    n, m_count = num_stages, _check_micro_batches(micro_batches)
    if not training:
        # Forward stages only: nothing to alternate with, so it runs like Grouped.
        return _renamed(grouped(num_stages, micro_batches, device_mapping, training=False),
                        "interleaved")
    last = 2 * (m_count - 1) + 2 * n - 1
    steps: List[List[Action]] = [[] for _ in range(last + 1)]
    for m in range(m_count):
        for k in range(n):
            steps[2 * m + k].append(F(k, m))
            steps[2 * m + 2 * n - 1 - k].append(B(k, m))
    for step in steps:  # forwards before backwards within a step, like Grouped
        step.sort(key=lambda a: (a.kind != FORWARD, a.stage if a.kind == FORWARD else -a.stage))
    steps.append(_weight_updates(range(n)))
    return _from_steps("interleaved", steps, mapping, m_count, training)


def sequential(num_stages: int, micro_batches: int, device_mapping=None,
               training: bool = True) -> Schedule:
    """Graphcore's ``PipelineSchedule.Sequential``: one stage per time step (forwards
    ``0..N-1`` then backwards ``N-1..0`` for each micro-batch, then the weight updates one
    IPU at a time), so no two IPUs ever compute at once.

    >>> format_actions(a for step in sequential(2, 1).steps for a in step)
    '0F0 1F0 1B0 0B0 0U 1U'
    """
    mapping = check_device_mapping(num_stages, device_mapping)
    n, m_count = num_stages, _check_micro_batches(micro_batches)
    steps: List[List[Action]] = []
    for m in range(m_count):
        steps += [[F(k, m)] for k in range(n)]
        if training:
            steps += [[B(k, m)] for k in reversed(range(n))]
    if training:
        steps += [[U(k)] for k in range(n)]
    return _from_steps("sequential", steps, mapping, m_count, training)


def _renamed(schedule: Schedule, name: str) -> Schedule:
    return Schedule(name, schedule.num_stages, schedule.micro_batches, schedule.device_mapping,
                    schedule.ipu_actions, schedule.steps, schedule.training)


# --- asynchronous comparison schedules ------------------------------------------------


def gpipe(num_stages: int, micro_batches: int, device_mapping=None,
          training: bool = True) -> Schedule:
    """GPipe: each stage runs every forward, then every backward (bubble ``(S-1)/(M+S-1)``
    with unit costs; all ``M`` micro-batches in flight).

    >>> format_actions(gpipe(2, 2).ipu_actions[0])
    '0F0 0F1 0B0 0B1 0U'
    """
    mapping = check_device_mapping(num_stages, device_mapping)
    m_count = _check_micro_batches(micro_batches)
    orders = [[F(k, m) for m in range(m_count)]
              + ([B(k, m) for m in range(m_count)] if training else [])
              for k in range(num_stages)]
    return _from_stage_orders("gpipe", orders, mapping, m_count, training)


def one_f_one_b_order(stage: int, num_stages: int, micro_batches: int) -> List[Action]:
    """Stage ``stage``'s 1F1B order: warm-up forwards, one-forward-one-backward, cool-down."""
    warmup = min(num_stages - stage - 1, micro_batches)
    order = [F(stage, m) for m in range(warmup)]
    for i in range(micro_batches - warmup):
        order += [F(stage, warmup + i), B(stage, i)]
    order += [B(stage, m) for m in range(micro_batches - warmup, micro_batches)]
    return order


def one_f_one_b(num_stages: int, micro_batches: int, device_mapping=None,
                training: bool = True) -> Schedule:
    """1F1B (PipeDream-flush): at most ``S - k`` micro-batches in flight on stage ``k``.

    >>> format_actions(one_f_one_b(3, 4).ipu_actions[0])
    '0F0 0F1 0F2 0B0 0F3 0B1 0B2 0B3 0U'
    """
    mapping = check_device_mapping(num_stages, device_mapping)
    m_count = _check_micro_batches(micro_batches)
    if not training:
        return _renamed(gpipe(num_stages, micro_batches, device_mapping, training=False), "1f1b")
    orders = [one_f_one_b_order(k, num_stages, m_count) for k in range(num_stages)]
    return _from_stage_orders("1f1b", orders, mapping, m_count, training)


def interleaved_one_f_one_b(num_stages: int, micro_batches: int, device_mapping=None,
                            training: bool = True, stages_per_ipu: int = 2) -> Schedule:
    """Megatron-LM's interleaved 1F1B with ``stages_per_ipu`` virtual stages (chunks) per IPU.

    ``P = num_stages / stages_per_ipu`` IPUs; stage ``s`` runs on IPU ``s % P`` (chunk
    ``s // P``).  Each IPU runs forwards chunk by chunk in rounds of micro-batches
    (``_micro_batch_rounds``: ``P`` each when ``M % P == 0``, as in Megatron), backwards with
    the chunks reversed, after ``2(P-p-1) + (v-1)g`` warm-up forwards (``g`` = first round).

    >>> s = interleaved_one_f_one_b(4, 4)
    >>> s.device_mapping, format_actions(s.ipu_actions[1][:4])
    ((0, 1, 0, 1), '1F0 1F1 3F0 3B0')
    """
    check_device_mapping(num_stages)
    if (not isinstance(stages_per_ipu, int) or stages_per_ipu < 1
            or num_stages % stages_per_ipu):
        raise PipelineConfigurationError(
            f"interleaved-1f1b puts {stages_per_ipu} stages (virtual stages) on each IPU, so "
            f"the number of stages must be a multiple of {stages_per_ipu}; got {num_stages}.",
            "ValueError")
    ipus = num_stages // stages_per_ipu
    round_robin = tuple(s % ipus for s in range(num_stages))
    if device_mapping is not None and tuple(check_device_mapping(num_stages, device_mapping)) \
            != round_robin:
        raise PipelineConfigurationError(
            f"interleaved-1f1b places stage s on IPU s % {ipus} (device_mapping "
            f"{list(round_robin)}); got device_mapping {list(device_mapping)}.", "ValueError")
    mapping = check_device_mapping(num_stages, list(round_robin))
    m_count = _check_micro_batches(micro_batches)
    chunks = stages_per_ipu
    rounds = _micro_batch_rounds(m_count, ipus)
    per_ipu = []
    for p in range(ipus):
        forwards, backwards = [], []
        for group in rounds:
            for c in range(chunks):
                forwards += [F(c * ipus + p, m) for m in group]
            for c in reversed(range(chunks)):
                backwards += [B(c * ipus + p, m) for m in group]
        if not training:
            per_ipu.append(forwards)
            continue
        total = len(forwards)
        warmup = min(total, 2 * (ipus - p - 1) + (chunks - 1) * len(rounds[0]))
        order = forwards[:warmup]
        for i in range(total - warmup):
            order += [forwards[warmup + i], backwards[i]]
        order += backwards[total - warmup:]
        order += _weight_updates(range(p, num_stages, ipus))
        per_ipu.append(order)
    return Schedule("interleaved-1f1b", num_stages, m_count, mapping,
                    tuple(tuple(o) for o in per_ipu), None, training)


def _micro_batch_rounds(micro_batches: int, ipus: int) -> List[range]:
    """Micro-batches in ``max(1, M // P)`` rounds of nearly equal size, larger rounds first.

    Megatron uses rounds of exactly ``P`` (so needs ``M % P == 0``), PyTorch rounds of
    ``M // rounds`` (needs ``M % rounds == 0``); putting the one-larger rounds first and
    sizing the warm-up by the first round extends both to any ``M`` without deadlock
    (checked for up to 16 IPUs, 6 chunks, 130 micro-batches).
    """
    count = max(1, micro_batches // ipus)
    base, extra = divmod(micro_batches, count)
    rounds, first = [], 0
    for r in range(count):
        size = base + (1 if r < extra else 0)
        rounds.append(range(first, first + size))
        first += size
    return rounds


def zero_bubble(num_stages: int, micro_batches: int, device_mapping=None,
                training: bool = True) -> Schedule:
    """ZB-H1: backward split into ``B`` (input gradient) and ``W`` (weight gradient).

    Greedy, per IPU whenever it is free (costs F=1, B=W=1/2): a ready ``B`` first; else the
    next forward if its input has arrived and the stage holds fewer than ``S`` micro-batches
    (a micro-batch is held from its ``F`` to its ``W``); else the oldest pending ``W``.

    >>> format_actions(zero_bubble(2, 3).ipu_actions[1])
    '1F0 1B0 1F1 1B1 1W0 1F2 1B2 1W1 1W2 1U'
    """
    mapping = check_device_mapping(num_stages, device_mapping)
    m_count = _check_micro_batches(micro_batches)
    if not training:
        return _renamed(gpipe(num_stages, micro_batches, device_mapping, training=False),
                        "zero-bubble")
    n = num_stages
    finished: Dict[Action, float] = {}
    next_forward = [0] * n
    next_backward = [0] * n
    held = [0] * n
    pending_w: List[List[int]] = [[] for _ in range(n)]
    stages_of: Dict[int, List[int]] = {}
    for stage, ipu in enumerate(mapping):
        stages_of.setdefault(ipu, []).append(stage)
    limit = n  # 1F1B's peak (stage 0 holds S micro-batches): ZB-H1 uses no more memory

    def pick(ipu: int, now: float) -> Optional[Action]:
        stages = stages_of[ipu]
        for k in reversed(stages):  # backward first: it is on the critical path
            m = next_backward[k]
            if (m < next_forward[k] and (k, FORWARD, m) in finished
                    and (k == n - 1 or (k + 1, BACKWARD, m) in finished)):
                next_backward[k] += 1
                pending_w[k].append(m)
                return B(k, m)
        for k in stages:
            m = next_forward[k]
            if m < m_count and held[k] < limit and (k == 0 or (k - 1, FORWARD, m) in finished):
                next_forward[k] += 1
                held[k] += 1
                return F(k, m)
        for k in stages:
            if pending_w[k]:
                m = pending_w[k].pop(0)
                return W(k, m)
        return None

    def duration(a: Action) -> float:
        if a.kind == WEIGHT_GRAD:
            # The micro-batch is released when this W ends; counting it now is the same,
            # because the count only gates forwards of this stage, which must wait for the
            # IPU to finish the W anyway.
            held[a.stage] -= 1
        return 1.0 if a.kind == FORWARD else 0.5

    per_ipu = _list_schedule(mapping, n, 3 * n * m_count, pick, finished, duration)
    for ipu in range(len(per_ipu)):
        per_ipu[ipu] += _weight_updates(stages_of.get(ipu, []))
    return Schedule("zero-bubble", n, m_count, mapping, tuple(tuple(o) for o in per_ipu),
                    None, training)


# --- registry -------------------------------------------------------------------------

BUILDERS: Dict[str, Callable[..., Schedule]] = {
    "grouped": grouped,
    "interleaved": interleaved,
    "sequential": sequential,
    "gpipe": gpipe,
    "1f1b": one_f_one_b,
    "interleaved-1f1b": interleaved_one_f_one_b,
    "zero-bubble": zero_bubble,
}


def build_schedule(schedule, num_stages: int, micro_batches: int, device_mapping=None,
                   training: bool = True, recompute: bool = False,
                   stages_per_ipu: int = 2, check: bool = True) -> Schedule:
    """Build the schedule called ``schedule`` (a name, ``PipelineSchedule`` member or int),
    with recomputation inserted if asked, and (unless ``check=False``) validate it.

    The builders are correct by construction (``tests/test_schedules.py`` validates them
    over many shapes), so the simulator skips the check to stay fast.

    >>> build_schedule("1F1B", 2, 2).name
    '1f1b'
    """
    name = normalise_schedule_name(schedule)
    if name == "interleaved-1f1b":
        built = interleaved_one_f_one_b(num_stages, micro_batches, device_mapping, training,
                                        stages_per_ipu=stages_per_ipu)
    else:
        built = BUILDERS[name](num_stages, micro_batches, device_mapping, training)
    if recompute and training:
        built = with_recomputation(built)
    if check:
        validate(built)
    return built


# --- recomputation --------------------------------------------------------------------


def with_recomputation(schedule: Schedule) -> Schedule:
    """Insert a recompute ``R_k(m)`` just before each backward ``B_k(m)``.

    The stage then keeps only its input per micro-batch and runs its forward pass again just
    before the backward pass (Graphcore's ``RecomputeThenBackpropagate``).  No ``R`` is
    needed where the IPU's previous action is that very forward (e.g. the last stage of
    Grouped): its activations are still there.

    >>> format_actions(with_recomputation(one_f_one_b(2, 2)).ipu_actions[0])
    '0F0 0F1 0R0 0B0 0R1 0B1 0U'
    """
    last_on_ipu: Dict[int, Action] = {}

    def expand(actions: Iterable[Action]) -> List[Action]:
        result: List[Action] = []
        for a in actions:
            ipu = schedule.ipu_of(a.stage)
            if a.kind == BACKWARD and last_on_ipu.get(ipu) != F(a.stage, a.micro_batch):
                result.append(R(a.stage, a.micro_batch))
            result.append(a)
            last_on_ipu[ipu] = a
        return result

    if schedule.synchronous:
        steps = [expand(step) for step in schedule.steps]
        return _from_steps(schedule.name, steps, schedule.device_mapping,
                           schedule.micro_batches, schedule.training)
    per_ipu = tuple(tuple(expand(actions)) for actions in schedule.ipu_actions)
    return Schedule(schedule.name, schedule.num_stages, schedule.micro_batches,
                    schedule.device_mapping, per_ipu, None, schedule.training)


# --- validation -----------------------------------------------------------------------


def validate(schedule: Schedule) -> None:
    """Check ``schedule``; raise ``InvalidScheduleError`` (``DeadlockError`` for a deadlock).

    Rules: every action sits on its stage's IPU; each micro-batch's forward runs exactly once
    per stage, and when training its backward too (a ``W`` exactly once per micro-batch on a
    stage that splits its backward, an ``R`` at most once); one weight update ``U`` per stage
    when training, none otherwise; ``F_k(m)`` after ``F_{k-1}(m)``; ``R_k(m)`` after
    ``F_k(m)``; ``B_k(m)`` after ``F_k(m)``, its ``R_k(m)`` and ``B_{k+1}(m)``; ``W`` after its
    ``B``; ``U_k`` after all of stage ``k``'s backward work.  In a synchronous schedule data
    crosses IPUs only between steps, so an input from another IPU must come from an earlier
    step.  Checking simulates a ready list and never loops more than once per action.

    >>> validate(Schedule.from_actions(["0F0 0B0 0U", "1B0 1F0 1U"]))
    Traceback (most recent call last):
    ...
    ipu_emulator.schedules.DeadlockError: Schedule deadlocks: no IPU can run its next action. IPU0 waits at 0B0 for 1B0 (IPU1); IPU1 waits at 1B0 for 1F0 (IPU1, later in its own list).
    """
    _check_contents(schedule)
    execution_order(schedule)
    if schedule.synchronous:
        _check_steps(schedule)


def _check_contents(schedule: Schedule) -> None:
    n, m_count, mapping = schedule.num_stages, schedule.micro_batches, schedule.device_mapping
    if len(mapping) != n:
        raise InvalidScheduleError(f"Invalid schedule: device_mapping has {len(mapping)} "
                                   f"entries for {n} stages.")
    if schedule.num_ipus < max(mapping, default=-1) + 1:
        raise InvalidScheduleError(
            f"Invalid schedule: stage {mapping.index(max(mapping))} is mapped to IPU"
            f"{max(mapping)} but the schedule lists actions for {schedule.num_ipus} IPUs.")
    seen: Dict[Action, int] = {}
    for ipu, actions in enumerate(schedule.ipu_actions):
        for a in actions:
            if not (0 <= a.stage < n):
                raise InvalidScheduleError(f"Invalid schedule: {a} names stage {a.stage}, but "
                                           f"there are {n} stages (0..{n - 1}).")
            if a.kind not in ACTION_KINDS:
                raise InvalidScheduleError(f"Invalid schedule: {a} has unknown kind {a.kind!r}.")
            if a.kind == UPDATE:
                if a.micro_batch is not None:
                    raise InvalidScheduleError(f"Invalid schedule: {a!r} is a weight update, "
                                               f"which takes no micro-batch.")
            elif not (isinstance(a.micro_batch, int) and 0 <= a.micro_batch < m_count):
                raise InvalidScheduleError(
                    f"Invalid schedule: {a} names micro-batch {a.micro_batch}, but a pass has "
                    f"{m_count} micro-batches (0..{m_count - 1}).")
            if mapping[a.stage] != ipu:
                raise InvalidScheduleError(
                    f"Invalid schedule: {a} is listed on IPU{ipu}, but stage {a.stage} is "
                    f"mapped to IPU{mapping[a.stage]}.")
            if a in seen:
                raise InvalidScheduleError(f"Invalid schedule: {a} appears more than once "
                                           f"(each action runs exactly once per pass).")
            seen[a] = ipu
    for k in range(n):
        for m in range(m_count):
            if F(k, m) not in seen:
                raise InvalidScheduleError(f"Invalid schedule: {F(k, m)} is missing (every "
                                           f"micro-batch runs forward on every stage).")
            if schedule.training and B(k, m) not in seen:
                raise InvalidScheduleError(f"Invalid schedule: {B(k, m)} is missing (when "
                                           f"training, every micro-batch runs backward on "
                                           f"every stage).")
            if R(k, m) in seen and B(k, m) not in seen:
                raise InvalidScheduleError(f"Invalid schedule: {R(k, m)} recomputes for a "
                                           f"backward pass {B(k, m)} that never runs.")
        splits = [m for m in range(m_count) if W(k, m) in seen]
        if splits and len(splits) != m_count:
            missing = next(m for m in range(m_count) if W(k, m) not in seen)
            raise InvalidScheduleError(f"Invalid schedule: {W(k, missing)} is missing (stage "
                                       f"{k} splits its backward, so every micro-batch needs "
                                       f"its weight gradient W).")
        if schedule.training and U(k) not in seen:
            raise InvalidScheduleError(f"Invalid schedule: {U(k)} is missing (when training, "
                                       f"every stage updates its weights once per pass).")
    if not schedule.training:
        extra = [a for a in seen if a.kind != FORWARD]
        if extra:
            raise InvalidScheduleError(f"Invalid schedule: inference runs forward passes only, "
                                       f"but the schedule has {extra[0]}.")


def execution_order(schedule: Schedule) -> List[Action]:
    """A global order in which the actions can run: each IPU's list in order, each action
    after what it needs.  Raises ``DeadlockError`` when IPUs would wait for each other.

    Ready-list simulation: an IPU advances while its next action's inputs are done; if not,
    it waits on the first missing input and is woken when that completes.  Each action is
    done once and each wake-up follows a completion, so this is linear and cannot hang.

    >>> [str(a) for a in execution_order(gpipe(2, 1))]
    ['0F0', '1F0', '1B0', '1U', '0B0', '0U']
    """
    n = schedule.num_stages
    lists = schedule.ipu_actions
    everything = {a for actions in lists for a in actions}
    recomputed = {(a.stage, a.micro_batch) for a in everything if a.kind == RECOMPUTE}
    backward_left = [0] * n
    for a in everything:
        if a.kind in BACKWARD_WORK:
            backward_left[a.stage] += 1
    position = [0] * len(lists)
    done: Set[Action] = set()
    waiting: Dict[object, List[int]] = {}
    order: List[Action] = []
    to_run = list(range(len(lists)))
    while to_run:
        ipu = to_run.pop()
        actions = lists[ipu]
        while position[ipu] < len(actions):
            a = actions[position[ipu]]
            missing = _first_missing(a, n, recomputed, done, backward_left)
            if missing is not None:
                waiting.setdefault(missing, []).append(ipu)
                break
            done.add(a)
            order.append(a)
            position[ipu] += 1
            to_run.extend(waiting.pop(a, ()))
            if a.kind in BACKWARD_WORK:
                backward_left[a.stage] -= 1
                if backward_left[a.stage] == 0:
                    to_run.extend(waiting.pop(("all backward work", a.stage), ()))
    if len(order) != len(everything) or any(p < len(l) for p, l in zip(position, lists)):
        raise DeadlockError(_deadlock_message(schedule, position, recomputed, done,
                                              backward_left))
    return order


def _first_missing(a: Action, n: int, recomputed, done: Set[Action], backward_left) -> object:
    if a.kind == UPDATE:
        return ("all backward work", a.stage) if backward_left[a.stage] > 0 else None
    for needed in _dependencies(a, n, recomputed):
        if needed not in done:
            return needed
    return None


def _deadlock_message(schedule: Schedule, position, recomputed, done, backward_left) -> str:
    parts = []
    for ipu, actions in enumerate(schedule.ipu_actions):
        if position[ipu] >= len(actions):
            continue
        a = actions[position[ipu]]
        missing = _first_missing(a, schedule.num_stages, recomputed, done, backward_left)
        if missing is not None and not isinstance(missing[0], str):
            missing = Action(*missing)
            owner = schedule.ipu_of(missing.stage)
            where = f"IPU{owner}" + (", later in its own list" if owner == ipu else "")
            parts.append(f"IPU{ipu} waits at {a} for {missing} ({where})")
        else:
            parts.append(f"IPU{ipu} waits at {a} for the rest of stage {a.stage}'s backward work")
        if len(parts) == 8:
            parts.append("...")
            break
    return ("Schedule deadlocks: no IPU can run its next action. " + "; ".join(parts) + ".")


def _check_steps(schedule: Schedule) -> None:
    step_of: Dict[Action, int] = {}
    for t, step in enumerate(schedule.steps):
        for a in step:
            if a in step_of:
                raise InvalidScheduleError(f"Invalid schedule: {a} is in time steps "
                                           f"{step_of[a]} and {t}.")
            step_of[a] = t
    listed = set(schedule.actions())
    if set(step_of) != listed:
        stray = next(iter(set(step_of) ^ listed))
        raise InvalidScheduleError(f"Invalid schedule: {stray} is in the IPU lists or the time "
                                   f"steps, but not both.")
    for ipu, actions in enumerate(schedule.ipu_actions):
        steps = [step_of[a] for a in actions]
        for before, after, a in zip(steps, steps[1:], actions[1:]):
            if after < before:
                raise InvalidScheduleError(f"Invalid schedule: IPU{ipu} lists {a} after an "
                                           f"action of a later time step.")
    recomputed = {(a.stage, a.micro_batch) for a in listed if a.kind == RECOMPUTE}
    for a in listed:
        for needed in _dependencies(a, schedule.num_stages, recomputed):
            needed = Action(*needed)
            if schedule.ipu_of(needed.stage) != schedule.ipu_of(a.stage) \
                    and step_of[needed] >= step_of[a]:
                raise InvalidScheduleError(
                    f"Invalid schedule: {a} runs in time step {step_of[a]} on IPU"
                    f"{schedule.ipu_of(a.stage)} but needs {needed} from IPU"
                    f"{schedule.ipu_of(needed.stage)}, which runs in time step "
                    f"{step_of[needed]}; data moves between IPUs only at the end of a step.")


# --- measures of a schedule -----------------------------------------------------------


def peak_in_flight_by_order(schedule: Schedule, stage: int) -> int:
    """The most micro-batches stage ``stage`` holds at once, judged from its IPU's order alone
    (a micro-batch is held from its forward until its last backward work).

    >>> peak_in_flight_by_order(one_f_one_b(4, 16), 0), peak_in_flight_by_order(gpipe(4, 16), 0)
    (4, 16)
    """
    release = WEIGHT_GRAD if any(a.kind == WEIGHT_GRAD and a.stage == stage
                                 for a in schedule.actions()) else BACKWARD
    held = peak = 0
    for a in schedule.ipu_actions[schedule.ipu_of(stage)]:
        if a.stage != stage:
            continue
        if a.kind == FORWARD:
            held += 1
            peak = max(peak, held)
        elif a.kind == release:
            held -= 1
    return peak if schedule.training else min(peak, 1)


__all__ = [
    "Action", "Schedule", "F", "B", "W", "R", "U",
    "ACTION_KINDS", "SCHEDULE_NAMES", "GRAPHCORE_SCHEDULES", "COMPARISON_SCHEDULES", "BUILDERS",
    "PipelineConfigurationError", "InvalidScheduleError", "DeadlockError",
    "parse_actions", "format_actions", "normalise_schedule_name", "check_device_mapping",
    "check_interleaved_mapping",
    "pipeline_overlap", "check_gradient_accumulation_count",
    "grouped", "interleaved", "sequential", "gpipe", "one_f_one_b", "one_f_one_b_order",
    "interleaved_one_f_one_b", "zero_bubble", "build_schedule", "with_recomputation",
    "validate", "execution_order", "peak_in_flight_by_order",
]
