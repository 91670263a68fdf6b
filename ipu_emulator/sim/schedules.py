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
(at least two stages, ``gradient_accumulation_count`` multiples) are in ``schedule_rules``:
they raise ``PipelineConfigurationError`` carrying the SDK's message and exception class.

Pure Python: no TensorFlow import.
"""
from __future__ import annotations

import heapq
from typing import Callable, Dict, Iterable, List, Optional, Tuple

# Actions, the Schedule record and its validation live in schedule_actions (format_actions:
# the examples below print schedules with it), Graphcore's configuration rules in
# schedule_rules: import their names from there.
from ipu_emulator.sim.schedule_actions import (BACKWARD, FORWARD, NO_RECOMPUTE, WEIGHT_GRAD,
                                               Action, B, DeadlockError, F, R, Schedule, U, W,
                                               dependencies, format_actions, validate)
from ipu_emulator.sim.schedule_rules import (PipelineConfigurationError, check_device_mapping,
                                             check_gradient_accumulation_count,
                                             check_interleaved_mapping, check_micro_batches,
                                             normalise_schedule_name)

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
            needs = dependencies(a, num_stages, NO_RECOMPUTE)
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
    n, m_count = num_stages, check_micro_batches(micro_batches)
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


def interleaved(num_stages: int, micro_batches: int, device_mapping=None,
                training: bool = True) -> Schedule:
    """Graphcore's ``PipelineSchedule.Interleaved``: IPU ``k`` alternates forward and backward
    steps, ``F_k(m)`` in step ``2m+k`` and ``B_k(m)`` in step ``2m+2N-1-k``.

    Training with two stages on one IPU raises the SDK's NotImplementedError.

    >>> interleaved(4, 8).step_of()[B(0, 0)]
    7
    """
    mapping = check_interleaved_mapping(num_stages, device_mapping, training)
    n, m_count = num_stages, check_micro_batches(micro_batches)
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
    n, m_count = num_stages, check_micro_batches(micro_batches)
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
    m_count = check_micro_batches(micro_batches)
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
    m_count = check_micro_batches(micro_batches)
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
    m_count = check_micro_batches(micro_batches)
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


def zero_bubble_order(stage: int, num_stages: int, micro_batches: int) -> List[Action]:
    """Stage ``stage``'s ZB-H1 order: 1F1B's forwards and input-gradient backwards (``B``),
    each weight gradient (``W``) ``stage`` micro-batches late; the late ``W``s fill the
    cool-down."""
    warmup = min(num_stages - stage, micro_batches)
    order = [F(stage, m) for m in range(warmup)]
    for m in range(micro_batches):
        order.append(B(stage, m))
        if m >= stage:
            order.append(W(stage, m - stage))
        if warmup + m < micro_batches:
            order.append(F(stage, warmup + m))
    order += [W(stage, m) for m in range(max(0, micro_batches - stage), micro_batches)]
    return order


def zero_bubble(num_stages: int, micro_batches: int, device_mapping=None,
                training: bool = True) -> Schedule:
    """ZB-H1 (Qi et al., "Zero Bubble Pipeline Parallelism", 2024): the backward pass split
    into ``B`` (input gradient, on the critical path) and ``W`` (weight gradient, free to
    move).  Forwards and ``B``s keep 1F1B's order; stage ``k`` runs each ``W`` ``k``
    micro-batches late, so every stage holds at most ``S`` micro-batches (1F1B's peak, on its
    first stage), and the late ``W``s fill the cool-down's bubbles.  The bubble shrinks from
    1F1B's ``(S-1)(T_F + T_B + T_W)`` to ``(S-1)(T_F + T_B - T_W)``.

    >>> format_actions(zero_bubble(2, 3).ipu_actions[1])
    '1F0 1B0 1F1 1B1 1W0 1F2 1B2 1W1 1W2 1U'
    """
    mapping = check_device_mapping(num_stages, device_mapping)
    m_count = check_micro_batches(micro_batches)
    if not training:
        return _renamed(gpipe(num_stages, micro_batches, device_mapping, training=False),
                        "zero-bubble")
    orders = [zero_bubble_order(k, num_stages, m_count) for k in range(num_stages)]
    return _from_stage_orders("zero-bubble", orders, mapping, m_count, training)


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

    The builders are correct by construction (``tests/sim/test_schedules.py`` validates them
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


def single_ipu(micro_batches: int, training: bool = True) -> Schedule:
    """Not a pipeline: the whole model as one stage on one IPU, each micro-batch's forward
    then backward, then one weight update (gradient accumulation, as the tutorial's step 1).

    >>> format_actions(single_ipu(2).ipu_actions[0])
    '0F0 0B0 0F1 0B1 0U'
    """
    m_count = check_micro_batches(micro_batches)
    actions = [a for m in range(m_count) for a in ((F(0, m), B(0, m)) if training else (F(0, m),))]
    if training:
        actions += _weight_updates([0])
    return Schedule("single-ipu", 1, m_count, (0,), (tuple(actions),), None, training)


def build_checked_schedule(schedule, num_stages: int, micro_batches, device_mapping=None,
                           training: bool = True, recompute: bool = False,
                           stages_per_ipu: int = 2) -> Schedule:
    """``build_schedule`` after the SDK's own checks of the configuration, in the SDK's order:
    the device mapping, Interleaved's one-stage-per-IPU rule (Python side), then the
    gradient accumulation count (at compilation).  Raises ``PipelineConfigurationError``
    with the SDK's message.

    >>> build_checked_schedule("grouped", 3, 4)
    Traceback (most recent call last):
    ...
    ipu_emulator.sim.schedule_rules.PipelineConfigurationError: The number of iterations of the pipeline must be a multiple of 6, but it is 4. ...
    """
    check_device_mapping(num_stages, device_mapping)
    name = normalise_schedule_name(schedule)
    if name == "interleaved":
        check_interleaved_mapping(num_stages, device_mapping, training)
    check_gradient_accumulation_count(name, num_stages, micro_batches, training, device_mapping)
    return build_schedule(name, num_stages, micro_batches, device_mapping, training, recompute,
                          stages_per_ipu, check=False)


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
    "BUILDERS", "build_checked_schedule", "single_ipu",
    "grouped", "interleaved", "sequential", "gpipe", "one_f_one_b", "one_f_one_b_order",
    "interleaved_one_f_one_b", "zero_bubble", "build_schedule", "with_recomputation",
    "peak_in_flight_by_order",
]
