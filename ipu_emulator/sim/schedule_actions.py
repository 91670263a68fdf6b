"""Pipeline schedules as values: actions, the ``Schedule`` record, and their validation.

An ``Action`` is one piece of work (``1F0``: stage 1's forward pass of micro-batch 0; kinds
``F``, ``B``, ``W``, ``R``, ``U`` as in ``schedules``); a ``Schedule`` is, per IPU, the ordered
actions it runs.  ``validate`` checks a schedule (each action exactly once, dependencies,
weight updates last) and reports a deadlock instead of hanging; ``execution_order`` runs it
with unit costs.  The schedules themselves are built in ``schedules``.

Pure Python: no TensorFlow import.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, Iterable, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

FORWARD, BACKWARD, WEIGHT_GRAD, RECOMPUTE, UPDATE = "F", "B", "W", "R", "U"
ACTION_KINDS = (FORWARD, BACKWARD, WEIGHT_GRAD, RECOMPUTE, UPDATE)
# Work that must finish before a stage's weight update (it all reads or writes gradients).
BACKWARD_WORK = frozenset({BACKWARD, WEIGHT_GRAD, RECOMPUTE})

# --- errors ---------------------------------------------------------------------------


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

        >>> s = Schedule.from_actions(["0F0 0F1 0B0 0B1 0U", "1F0 1B0 1F1 1B1 1U"])
        >>> Schedule.parse(s.to_text()).ipu_actions == s.ipu_actions
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


def dependencies(a: Action, num_stages: int, recomputed: Set[Tuple[int, int]]) -> tuple:
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


NO_RECOMPUTE: Set[Tuple[int, int]] = frozenset()


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
    ipu_emulator.sim.schedule_actions.DeadlockError: Schedule deadlocks: no IPU can run its next action. IPU0 waits at 0B0 for 1B0 (IPU1); IPU1 waits at 1B0 for 1F0 (IPU1, later in its own list).
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

    >>> gpipe_2x1 = Schedule.from_actions(["0F0 0B0 0U", "1F0 1B0 1U"])
    >>> [str(a) for a in execution_order(gpipe_2x1)]
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
    for needed in dependencies(a, n, recomputed):
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
        for needed in dependencies(a, schedule.num_stages, recomputed):
            needed = Action(*needed)
            if schedule.ipu_of(needed.stage) != schedule.ipu_of(a.stage) \
                    and step_of[needed] >= step_of[a]:
                raise InvalidScheduleError(
                    f"Invalid schedule: {a} runs in time step {step_of[a]} on IPU"
                    f"{schedule.ipu_of(a.stage)} but needs {needed} from IPU"
                    f"{schedule.ipu_of(needed.stage)}, which runs in time step "
                    f"{step_of[needed]}; data moves between IPUs only at the end of a step.")


__all__ = ["FORWARD", "BACKWARD", "WEIGHT_GRAD", "RECOMPUTE", "UPDATE", "ACTION_KINDS",
           "BACKWARD_WORK", "InvalidScheduleError", "DeadlockError", "Action", "Schedule",
           "parse_actions", "format_actions", "F", "B", "W", "R", "U", "dependencies", "NO_RECOMPUTE",
           "validate", "execution_order"]
