"""The pipeline simulator: a schedule plus stage costs plus hardware -> a timeline and metrics.

    >>> from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    >>> grouped = simulate_pipeline(unit_stages(4), "grouped", gradient_accumulation_count=8,
    ...                             unit_cost=True)
    >>> first_backward = [e for e in grouped.events if e.kind == "backward" and e.stage == 0][0]
    >>> first_backward.end                       # Graphcore's tutorial: step 11
    11.0
    >>> round(grouped.metrics.bubble_fraction, 4)  # (N-1)/(M+N-1) = 3/11
    0.2727

Two ways of running a schedule (``ipu_emulator.sim.schedules``):

* **Bulk-synchronous** (Graphcore's Grouped, Interleaved, Sequential).  Each time step is
  ``Sync (External)`` on every IPU, then one ``GlobalExchange`` moving the previous step's
  stage outputs (forward) and gradients (backward) over IPU-Links, then compute: each IPU
  runs its actions of the step one after another, stage 0 first copying its infeed element
  in (``StreamCopy``, the step's sync being the external sync it needs) and the last stage
  copying its outfeed element out after its forward.  The next step starts when every IPU
  has finished: the slowest IPU sets the pace.
* **Asynchronous** (gpipe, 1f1b, interleaved-1f1b, zero-bubble): an action starts when its
  IPU has finished the previous action in its list and its input has arrived; an input from
  another IPU costs the receiving IPU one IPU-Link transfer (``exchange``).  Passes are
  separated by a barrier (the training loop waits for every optimizer step).

Around the passes: one host ``Engine::run`` starts the engine run, which holds
``repeat_count`` pipeline passes of ``gradient_accumulation_count`` micro-batches each.  At
the end of each training pass, per IPU: with replicas, an all-reduce of the accumulated
gradients over IPU-Links (ring: ``2(R-1)`` transfers of ``1/R`` of them); with
``offload_weights``, the optimizer state is loaded from streaming memory before and stored
after the weight update.  ``offload_activations`` stores each micro-batch's kept activations
to streaming memory after its forward and loads them before its backward work.
``recompute`` adds a forward ``R`` before each backward and keeps only the stage input
between them.  Replicas run identical lanes (IPU ``r * P + i`` is replica ``r``'s IPU ``i``).

Durations: compute is ``timeline.compute_seconds`` of the stage's FLOPs and bytes (the
weight update reads and writes weights and optimizer state and reads the accumulators);
a split backward (zero-bubble) gives half to ``B`` and half to ``W`` (the input and weight
gradients of a layer cost about the same).  With ``unit_cost=True`` every forward,
recompute and backward action takes one time unit (``B`` and ``W`` half each), weight
updates take none and nothing else costs time: no host, exchange, sync or copies.

Memory per IPU (``peak_memory_bytes``): weights + accumulators (parameters x
``accumulation_dtype_bytes``; parameters = ``parameter_bytes / variable_dtype_bytes``) +
optimizer state (only during the weight update when offloaded) + the activations of the
micro-batches in flight, each held from its forward until its last backward work (``B``,
or ``W`` when split).  It is sampled as a ``memory`` counter per IPU, and the number of
micro-batches in flight as an ``IN_FLIGHT_COUNTER`` counter.

Pure Python: no TensorFlow import.
"""
from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple, Union

from ipu_emulator.sim import schedule_actions, schedules as sched
from ipu_emulator.sim.cost_model import StageCost
from ipu_emulator.sim.hardware import HostModel, IPUTarget, fifo_seconds, get_target
from ipu_emulator.sim.schedule_actions import (BACKWARD, FORWARD, RECOMPUTE, UPDATE, WEIGHT_GRAD,
                                               Action, Schedule)
from ipu_emulator.sim.timeline import (CLOCK, HOST_LANE, UNIT_CLOCK, Event, Metrics, Timeline,
                                      TimelineBuilder, allreduce_seconds, compute_seconds,
                                      format_bytes, ipu_lane, ipu_link_seconds, ipu_of_lane,
                                      launch_engine_run, prepare_host_batch,
                                      stream_copy_seconds, timeline_metrics)

EVENT_KIND = {FORWARD: "forward", BACKWARD: "backward", WEIGHT_GRAD: "backward",
              RECOMPUTE: "recompute", UPDATE: "weight_update"}
# One "unit" of work for identical stages timed on the hardware model.
UNIT_STAGE_FLOPS = 1e9
# The counter of micro-batches whose activations an IPU holds (forward done, backward not).
IN_FLIGHT_COUNTER = "micro-batches in flight"
# A scalar float32 loss: what a training pipeline's last stage enqueues per micro-batch.
LOSS_BYTES = 4


def unit_stages(num_stages: int, flops: float = UNIT_STAGE_FLOPS) -> List[StageCost]:
    """``num_stages`` identical stages, forward and backward one unit of work each (``flops``
    FLOPs when timed on the hardware model); no weights, activations or data.

    >>> [s.name for s in unit_stages(2)]
    ['stage0', 'stage1']
    """
    return [StageCost(name=f"stage{k}", forward_flops=flops, backward_flops=flops)
            for k in range(num_stages)]


# --- costs of actions -----------------------------------------------------------------


def weight_update_bytes(stage: StageCost, accumulator_bytes: float) -> float:
    """Tile-memory traffic of a weight update: read and write the weights and the optimizer
    state, read the accumulated gradients."""
    return 2 * stage.parameter_bytes + 2 * stage.optimizer_state_bytes + accumulator_bytes


def action_seconds(stage: StageCost, kind: str, target: IPUTarget, split_backward: bool,
                   accumulator_bytes: float = 0.0) -> float:
    """Simulated seconds of one action of ``stage``.

    >>> from ipu_emulator.sim.hardware import IPU2
    >>> s = StageCost("s", forward_flops=1e9, backward_flops=2e9)
    >>> action_seconds(s, "B", IPU2, True) == action_seconds(s, "W", IPU2, True)
    True
    """
    if kind in (FORWARD, RECOMPUTE):
        return compute_seconds(stage.forward_flops, stage.forward_bytes_accessed, target,
                               stage.op_cycles[0], stage.half_flops[0])
    if kind in (BACKWARD, WEIGHT_GRAD):
        full = compute_seconds(stage.backward_flops, stage.backward_bytes_accessed, target,
                               stage.op_cycles[1], stage.half_flops[1])
        return full / 2 if split_backward else full
    if kind == UPDATE:
        return compute_seconds(stage.weight_update_flops,
                               weight_update_bytes(stage, accumulator_bytes), target,
                               stage.op_cycles[2], stage.half_flops[2])
    raise ValueError(f"Unknown action kind {kind!r}")


def unit_action_time(kind: str, split_backward: bool, backward_ratio: float = 1.0) -> float:
    """Unit-cost mode: forward and recompute one unit, backward ``backward_ratio`` units (a
    split backward half each).

    >>> unit_action_time("B", False, 2.0), unit_action_time("W", True, 2.0)
    (2.0, 1.0)
    """
    if kind == UPDATE:
        return 0.0
    if kind in (BACKWARD, WEIGHT_GRAD):
        return backward_ratio / 2 if split_backward else backward_ratio
    return 1.0


def streaming_memory_seconds(nbytes: float, target: IPUTarget, host: HostModel) -> float:
    """One copy between an IPU and its streaming memory (same fixed cost as a stream copy)."""
    return host.stream_copy_latency_s + nbytes / target.streaming_memory_bandwidth


def out_of_memory_message(ipu: int, required: float, available: float) -> str:
    """What the IPU would report when a program does not fit.

    >>> out_of_memory_message(1, 1.2e9, 0.9e9)
    'Out of memory on IPU1: 1.2 GB required, 0.9 GB available'
    """
    return (f"Out of memory on IPU{ipu}: {format_bytes(required, available)} required, "
            f"{format_bytes(available, required)} available")


# --- settings and plan: what was asked for, and what it takes -------------------------


@dataclass(frozen=True)
class _PipelineSimulationSettings:
    """The arguments of one ``simulate_pipeline`` call, with the target and host resolved:
    built once and handed to the internal functions whole."""

    stages: Sequence[StageCost]
    schedule: Union[str, int, Schedule]
    gradient_accumulation_count: Optional[int]
    repeat_count: int
    replicas: int
    target: IPUTarget
    host: HostModel
    batch_size: Optional[int]
    device_mapping: Optional[Sequence[int]]
    training: bool
    recompute: bool
    offload_weights: bool
    offload_activations: bool
    accumulation_dtype_bytes: int
    unit_cost: bool
    title: str
    variable_dtype_bytes: int
    stages_per_ipu: int
    backward_ratio: float
    synthetic_data: bool
    fifos: bool
    outfeed_bytes: Optional[int]


@dataclass
class _Plan:
    """What the simulation derives from its settings before placing anything."""

    settings: _PipelineSimulationSettings
    schedule: Schedule
    stages: List[StageCost]
    accumulator_bytes: List[float]  # per stage
    durations: Dict[Tuple[int, str], float]  # (stage, kind) -> seconds or units
    split_stages: FrozenSet[int]  # stages whose backward is split into B and W
    recomputed: FrozenSet[Tuple[int, int]]  # (stage, micro-batch) with a recompute R
    reads: bool = False  # the stages list their cross-IPU reads (shards)

    @property
    def mapping(self) -> Tuple[int, ...]:
        return self.schedule.device_mapping

    @property
    def num_ipus(self) -> int:
        return self.schedule.num_ipus

    def lanes_of(self, ipu: int) -> List[str]:
        return self.lanes[ipu]

    def __post_init__(self):
        ipus = self.schedule.num_ipus
        self.lanes = [[ipu_lane(r * ipus + ipu) for r in range(self.settings.replicas)]
                      for ipu in range(ipus)]

    def seconds(self, a: Action) -> float:
        return self.durations[(a.stage, a.kind)]

    def output_bytes(self, stage: int) -> int:
        return self.stages[stage].output_bytes

    def kept_bytes(self, stage: int, recomputed: bool) -> int:
        """What one in-flight micro-batch keeps on the stage between forward and backward."""
        cost = self.stages[stage]
        return cost.input_bytes if recomputed else cost.activation_bytes

    def fifo_seconds(self, a: Action) -> float:
        """A pipeline stage keeps each micro-batch's activations in FIFOs from its forward
        to its backward pass.  The SDK's FIFO op runs with the forward pass: it pops the
        oldest micro-batch's activations (for the backward pass to read) and pushes this
        one's, so a forward carries one pop and one push (``hardware.fifo_seconds``) and a
        backward none, as Graphcore's trace shows it.  Shards and unit-cost runs have
        none."""
        settings = self.settings
        if (not settings.fifos or settings.unit_cost or not settings.training
                or a.kind != FORWARD):
            return 0.0
        kept = self.kept_bytes(a.stage, (a.stage, a.micro_batch) in self.recomputed)
        return 2 * fifo_seconds(kept, settings.target)


# What a stage's ``reads`` carry in each phase, as the trace's flow arrows name it.
_READ_LABELS = {"forward": "activations", "backward": "activations and weights",
                "weight_update": "accumulated gradients"}
# A recompute repeats its stage's forward; the W half of a split backward costs as its B.
_SAME_COST_AS = {RECOMPUTE: FORWARD, WEIGHT_GRAD: BACKWARD}


def _plan(settings: _PipelineSimulationSettings) -> _Plan:
    stages = list(settings.stages)
    if not stages or not all(isinstance(s, StageCost) for s in stages):
        raise TypeError("stages must be a sequence of cost_model.StageCost records, one per stage.")
    gac, training, mapping = (settings.gradient_accumulation_count, settings.training,
                              settings.device_mapping)
    if isinstance(settings.schedule, Schedule):
        built = _prebuilt_schedule(settings.schedule, len(stages), gac, training,
                                   settings.recompute)
    else:
        built = sched.build_checked_schedule(settings.schedule, len(stages), gac, mapping,
                                             training, settings.recompute,
                                             settings.stages_per_ipu)
    split, recomputed = set(), set()
    for k, kind, m in built.actions():
        if kind == WEIGHT_GRAD:
            split.add(k)
        elif kind == RECOMPUTE:
            recomputed.add((k, m))
    for what in ("accumulation_dtype_bytes", "variable_dtype_bytes"):
        value = getattr(settings, what)
        if not isinstance(value, int) or value <= 0:
            raise ValueError(f"{what} must be a positive number of bytes, got {value!r}.")
    accumulators = [s.parameter_bytes / settings.variable_dtype_bytes
                    * settings.accumulation_dtype_bytes if training else 0.0 for s in stages]
    durations = {}
    for k, cost in enumerate(stages):
        for kind in schedule_actions.ACTION_KINDS:  # F before R, B before W
            same = (k, _SAME_COST_AS.get(kind))
            durations[(k, kind)] = (
                durations[same] if same in durations
                else unit_action_time(kind, k in split, settings.backward_ratio)
                if settings.unit_cost
                else action_seconds(cost, kind, settings.target, k in split, accumulators[k]))
    return _Plan(settings, built, stages, accumulators, durations, frozenset(split),
                 frozenset(recomputed), reads=any(s.reads for s in stages))


def _prebuilt_schedule(schedule: Schedule, num_stages: int, gac, training: bool,
                       recompute: bool) -> Schedule:
    if schedule.num_stages != num_stages:
        raise ValueError(f"The schedule has {schedule.num_stages} stages but {num_stages} "
                         f"stage costs were given.")
    if gac is not None and gac != schedule.micro_batches:
        raise ValueError(f"The schedule runs {schedule.micro_batches} micro-batches per pass "
                         f"but gradient_accumulation_count is {gac}.")
    if schedule.training != training:
        raise ValueError(f"The schedule is for {'training' if schedule.training else 'inference'}"
                         f" but training={training} was asked for.")
    if recompute and training and not schedule.recompute:
        schedule = sched.with_recomputation(schedule)
    schedule_actions.validate(schedule)
    return schedule


# --- the simulation -------------------------------------------------------------------


class _PlacedAction(NamedTuple):
    """An action placed on an IPU, from ``start`` to ``end``, in pass ``pass_index``; the
    one on replica 0 stands for all (replicas are identical)."""
    ipu: int
    action: Action
    start: float
    end: float
    pass_index: int


class _PipelineRun:
    """Places one engine run's passes on a ``TimelineBuilder`` and remembers, for the
    metrics, when each action and each activation offload copy ran."""

    def __init__(self, plan: _Plan, builder: TimelineBuilder):
        self.plan = plan
        self.settings = plan.settings
        self.builder = builder
        self.placed: List[_PlacedAction] = []
        self.stored: Dict[Tuple[int, int, int], float] = {}  # (pass, stage, mb) -> store end
        self.loaded: Dict[Tuple[int, int, int], float] = {}  # (pass, stage, mb) -> load start
        self.state_copies: List[Tuple[int, float, float]] = []  # (ipu, load start, store end)
        self._state_loaded_at: Dict[int, float] = {}  # ipu -> load start, until stored
        self.all_lanes = [lane for i in range(plan.num_ipus) for lane in plan.lanes_of(i)]
        self.recomputed = plan.recomputed
        self.first_update = {ipu: next((a for a in actions if a.kind == UPDATE), None)
                             for ipu, actions in enumerate(plan.schedule.ipu_actions)}
        self.last_update = {ipu: next((a for a in reversed(actions) if a.kind == UPDATE), None)
                            for ipu, actions in enumerate(plan.schedule.ipu_actions)}
        self.infeed_ready: Dict[Tuple[int, int], float] = {}
        self.pass_index = 0

    # -- small placement helpers ---------------------------------------------------------

    def _place(self, ipu: int, kind: str, name: str, seconds: float, earliest: float,
               a: Optional[Action] = None, args: Optional[dict] = None) -> Tuple[float, float]:
        stage = a.stage if a is not None else None
        micro_batch = a.micro_batch if a is not None else None
        lanes = self.plan.lanes_of(ipu)
        if seconds <= 0 and a is not None and a.kind == UPDATE:
            # Unit-cost weight updates take no time but still mark where they happen.
            start = max(earliest, self.builder.free_at(lanes))
            for lane in lanes:
                self.builder.events.append(Event(lane, kind, name, start, start, ipu_of_lane(lane),
                                                 stage, micro_batch, 0, self.pass_index, {}))
            return start, start
        return self.builder.place(lanes, kind, name, seconds, earliest, stage=stage,
                                  micro_batch=micro_batch, engine_run=0,
                                  iteration=self.pass_index, args=args)

    def _copy(self, ipu: int, name: str, nbytes: float, earliest: float, streaming: bool,
              a: Optional[Action] = None) -> Tuple[float, float]:
        settings = self.settings
        if settings.unit_cost or nbytes <= 0:
            return earliest, earliest
        seconds = (streaming_memory_seconds(nbytes, settings.target, settings.host) if streaming
                   else stream_copy_seconds(nbytes, settings.target, settings.host))
        return self._place(ipu, "stream_copy", name, seconds, earliest, a, {"bytes": nbytes})

    def _host_feed(self, ipu: int, name: str, nbytes: float, earliest: float,
                   a: Action) -> None:
        """A host stream copy on its own (asynchronous schedules): external sync first."""
        settings = self.settings
        if settings.unit_cost or nbytes <= 0:
            return
        # As timeline.host_transfer, but labelled with the micro-batch it carries.
        self._place(ipu, "sync", "Sync (External)", settings.target.external_sync_seconds,
                    earliest, a)
        self._copy(ipu, name, nbytes, earliest, False, a)

    def _flows(self, label: str, src: int, dst: int, from_time: float, to_time: float) -> None:
        for src_lane, dst_lane in zip(self.plan.lanes_of(src), self.plan.lanes_of(dst)):
            self.builder.flow(label, src_lane, from_time, dst_lane, to_time)

    # -- one action with what surrounds it -----------------------------------------------

    def run_action(self, ipu: int, a: Action, earliest: float, synchronous: bool) -> float:
        """Place ``a`` (and its copies) on ``ipu``'s lanes from ``earliest``; returns its end."""
        plan, settings, p = self.plan, self.settings, self.pass_index
        k, kind, m = a
        if settings.unit_cost and kind != UPDATE:
            # Nothing surrounds an action in unit-cost mode: place it and move on.
            start, end = self.builder.place(plan.lanes[ipu], EVENT_KIND[kind], str(a),
                                            plan.durations[(k, kind)], earliest, stage=k,
                                            micro_batch=m, engine_run=0, iteration=p)
            self.placed.append(_PlacedAction(ipu, a, start, end, p))
            return end
        at = earliest
        if kind == FORWARD and k == 0 and not settings.synthetic_data:
            nbytes = plan.stages[0].input_bytes
            at = max(at, self.infeed_ready.get((p, m), at))
            if synchronous:
                at = self._copy(ipu, "StreamCopy infeed (host->IPU)", nbytes, at, False, a)[1]
            else:
                self._host_feed(ipu, "StreamCopy infeed (host->IPU)", nbytes, at, a)
        if settings.offload_activations and settings.training and self._first_backward_work(a):
            start, at = self._copy(ipu, "load activations (streaming memory->IPU)",
                                   plan.kept_bytes(k, (k, m) in self.recomputed), at, True, a)
            self.loaded[(p, k, m)] = start
        if kind == UPDATE and a == self.first_update[ipu]:
            at = self._before_weight_update(ipu, at)
        seconds = plan.seconds(a) + plan.fifo_seconds(a)
        start, end = self._place(ipu, EVENT_KIND[kind], str(a), seconds, at, a)
        self.placed.append(_PlacedAction(ipu, a, start, end, p))
        if (kind == FORWARD and k == plan.schedule.num_stages - 1 and not settings.synthetic_data
                and settings.outfeed_bytes != 0):
            if settings.outfeed_bytes is not None:
                nbytes = settings.outfeed_bytes
            else:
                nbytes = plan.stages[k].output_bytes if not settings.training else max(
                    plan.stages[k].output_bytes, LOSS_BYTES)
            if synchronous:
                self._copy(ipu, "StreamCopy outfeed (IPU->host)", nbytes, end, False, a)
            else:
                self._host_feed(ipu, "StreamCopy outfeed (IPU->host)", nbytes, end, a)
        if kind == FORWARD and settings.training and settings.offload_activations:
            self.stored[(p, k, m)] = self._copy(
                ipu, "store activations (IPU->streaming memory)",
                plan.kept_bytes(k, (k, m) in self.recomputed), end, True, a)[1]
        if kind == UPDATE and a == self.last_update[ipu]:
            self._after_weight_update(ipu, end)
        return end

    def _first_backward_work(self, a: Action) -> bool:
        if a.kind == RECOMPUTE:
            return True
        return a.kind == BACKWARD and (a.stage, a.micro_batch) not in self.recomputed

    def _optimizer_state_bytes(self, ipu: int) -> int:
        return sum(self.plan.stages[k].optimizer_state_bytes
                   for k in self.plan.schedule.stages_on(ipu))

    def _before_weight_update(self, ipu: int, at: float) -> float:
        plan, settings = self.plan, self.settings
        if settings.unit_cost:
            return at
        gradients = sum(plan.accumulator_bytes[k] for k in plan.schedule.stages_on(ipu))
        seconds = allreduce_seconds(gradients, settings.replicas, settings.target)
        if seconds > 0:
            at = self._place(ipu, "exchange", "AllReduce gradients (IPU-Links)", seconds, at,
                             args={"bytes": gradients, "replicas": settings.replicas})[1]
        if settings.offload_weights:
            self._state_loaded_at[ipu], at = self._copy(
                ipu, "load optimizer state (streaming memory->IPU)",
                self._optimizer_state_bytes(ipu), at, True)
        return at

    def _after_weight_update(self, ipu: int, end: float) -> None:
        if self.settings.offload_weights and not self.settings.unit_cost:
            _, stored = self._copy(ipu, "store optimizer state (IPU->streaming memory)",
                                   self._optimizer_state_bytes(ipu), end, True)
            self.state_copies.append((ipu, self._state_loaded_at.pop(ipu), stored))

    # -- data crossing IPUs ----------------------------------------------------------------

    def transfers_from(self, a: Action) -> List[Tuple[int, int, float, str, int]]:
        """``(source IPU, destination IPU, bytes, label, copies)`` that ``a``'s result must
        travel (stages that list their ``reads`` take them instead: ``transfers_into``)."""
        mapping, k = self.plan.mapping, a.stage
        if self.plan.reads:
            return []
        if a.kind == FORWARD and k + 1 < len(mapping) and mapping[k + 1] != mapping[k]:
            nbytes = self.plan.output_bytes(k)
            return [(mapping[k], mapping[k + 1], nbytes, "activations", 1)] if nbytes > 0 else []
        if a.kind == BACKWARD and k > 0 and mapping[k - 1] != mapping[k]:
            nbytes = self.plan.output_bytes(k - 1)
            return [(mapping[k], mapping[k - 1], nbytes, "gradients", 1)] if nbytes > 0 else []
        return []

    def transfers_into(self, a: Action) -> List[Tuple[int, int, float, str, int]]:
        """The tensors ``a`` reads from other IPUs (its stage's ``reads`` of ``a``'s phase):
        copied in the exchange that starts ``a``'s step."""
        mapping, k = self.plan.mapping, a.stage
        phase = {FORWARD: "forward", BACKWARD: "backward", UPDATE: "weight_update"}.get(a.kind)
        if phase == "backward" and not self._first_backward_work(a):
            return []
        return [(mapping[source], mapping[k], nbytes, _READ_LABELS[phase], copies)
                for read_phase, source, nbytes, copies in self.plan.stages[k].reads
                if read_phase == phase and mapping[source] != mapping[k] and nbytes > 0]

    # -- bulk-synchronous passes -----------------------------------------------------------

    def run_synchronous_pass(self, start: float) -> float:
        plan, settings = self.plan, self.settings
        barrier = start
        pending: List[Tuple[int, int, float, str, int]] = []
        mapping = plan.mapping
        for step in plan.schedule.steps:
            if not settings.unit_cost:
                for a in step:
                    pending += self.transfers_into(a)
                if not pending and all(plan.seconds(a) <= 0 for a in step):
                    # A shard with nothing to do in this phase (its gradients run on another
                    # shard): no step at all, but the action still happened, for the metrics.
                    self.placed += [_PlacedAction(mapping[a[0]], a, barrier, barrier,
                                                  self.pass_index) for a in step]
                    continue
            # Every lane is idle by ``barrier``, so only the IPUs this step touches can move
            # it: the barrier never needs a scan of all lanes (Sequential has one per action).
            touched = {mapping[a[0]] for a in step}
            step_start = barrier
            if not settings.unit_cost:
                # Every IPU waits at the step's barrier; the sync is drawn on the IPUs that
                # take part in the step (idle ones simply wait, which shows as a gap).
                for src, dst, *_ in pending:
                    touched.update((src, dst))
                lanes = [lane for i in sorted(touched) for lane in plan.lanes[i]]
                step_start = self.builder.place(
                    lanes, "sync", "Sync (External)", settings.target.external_sync_seconds,
                    barrier, engine_run=0, iteration=self.pass_index)[1]
                if pending:
                    step_start = max(step_start, self._exchange_phase(pending, step_start))
            pending = []
            for a in step:
                self.run_action(mapping[a[0]], a, step_start, synchronous=True)
                if not settings.unit_cost:
                    pending += self.transfers_from(a)
            barrier = max([step_start] + [self.builder.free_at(plan.lanes[i]) for i in touched])
        return barrier

    def _exchange_phase(self, transfers, earliest: float) -> float:
        """One exchange moving all of a step's transfers; it lasts as long as the busiest
        IPU's copies (sent or received), each tensor an inter-IPU copy
        (``timeline.ipu_link_seconds``)."""
        plan, target = self.plan, self.settings.target
        busy: Dict[int, float] = {}
        for src, dst, nbytes, _, copies in transfers:
            seconds = ipu_link_seconds(nbytes, target, copies)
            for ipu in (src, dst):
                busy[ipu] = busy.get(ipu, 0.0) + seconds
        lanes = [lane for i in sorted(busy) for lane in plan.lanes_of(i)]
        start, end = self.builder.place(
            lanes, "exchange", "GlobalExchange (IPU-Links)", max(busy.values()), earliest,
            engine_run=0, iteration=self.pass_index,
            args={"bytes": sum(t[2] for t in transfers),
                  "copies": sum(t[4] for t in transfers)})
        middle = (start + end) / 2
        for src, dst, _, label, _ in transfers:
            self._flows(label, src, dst, middle, middle)
        return end

    # -- asynchronous passes ---------------------------------------------------------------

    def run_asynchronous_pass(self, order: Sequence[Action], start: float) -> float:
        mapping = self.plan.mapping
        ends: Dict[Action, float] = {}
        last = len(mapping) - 1
        unit = self.settings.unit_cost
        for a in order:
            k, kind, m = a
            ipu = mapping[k]
            earliest = start
            source = None
            if kind == FORWARD and k > 0:
                source = (k - 1, FORWARD, m)
            elif kind == BACKWARD and k < last:
                source = (k + 1, BACKWARD, m)
            if source is not None:
                ready = ends[source]
                if not unit and mapping[source[0]] != ipu:
                    ready = self._receive(Action(*source), ipu, ready)
                if ready > earliest:
                    earliest = ready
            ends[a] = self.run_action(ipu, a, earliest, synchronous=False)
        return self.builder.free_at(self.all_lanes)

    def _receive(self, source: Action, ipu: int, ready: float) -> float:
        """The receiving IPU takes in ``source``'s result over IPU-Links; returns arrival."""
        settings = self.settings
        transfers = self.transfers_from(source)
        if settings.unit_cost or not transfers:
            return ready
        src, dst, nbytes, label, copies = transfers[0]
        start, end = self._place(ipu, "exchange", f"GlobalExchange {label} IPU{src}->IPU{dst}",
                                 ipu_link_seconds(nbytes, settings.target, copies), ready, source,
                                 {"bytes": nbytes})
        self._flows(label, src, dst, ready, end)
        return end


# --- metrics --------------------------------------------------------------------------


def _pass_phases(placed: List[_PlacedAction], pass_start: float, pass_end: float,
                 training: bool) -> List[Tuple[str, float, float]]:
    """Ramp-up until every IPU has started, main until the first IPU has no forward or
    backward work left, ramp-down until the last one is done, then the weight update."""
    first: Dict[int, float] = {}
    last: Dict[int, float] = {}
    for ipu, action, start, end, _ in placed:
        if action[1] == UPDATE:
            continue
        if ipu not in first:
            first[ipu] = start  # an IPU's actions are placed in time order
        last[ipu] = end
    if not first:
        return []
    filled = max(first.values())
    draining = max(filled, min(last.values()))
    drained = max(last.values())
    phases = [("ramp-up", pass_start, filled), ("main", filled, draining),
              ("ramp-down", draining, drained)]
    if training:
        phases.append(("weight update", drained, pass_end))
    return [phase for phase in phases if phase[2] > phase[1]]


def _memory_deltas(run: _PipelineRun) -> Dict[int, List[Tuple[float, int, float, int]]]:
    """Per IPU: ``(time, order, bytes change, in-flight change)``; order 0 (releases) sorts
    before 1 (acquisitions) at equal times, so a slot freed as another fills is not counted
    twice."""
    plan = run.plan
    deltas: Dict[int, List[Tuple[float, int, float, int]]] = {i: [] for i in range(plan.num_ipus)}
    releases_on_w = plan.split_stages
    full_bytes = [s.activation_bytes for s in plan.stages]
    training, recomputed = plan.settings.training, plan.recomputed
    stored, loaded = run.stored, run.loaded
    for ipu, action, start, end, pass_index in run.placed:
        k, kind, m = action
        if kind == UPDATE:
            continue
        out = deltas[ipu]
        full = full_bytes[k]
        if kind == FORWARD:
            out.append((start, 1, full, 1))
            if not training:
                out.append((end, 0, -full, -1))
                continue
            if (k, m) in recomputed or stored:
                kept = plan.kept_bytes(k, (k, m) in recomputed)
                if full > kept:
                    out.append((end, 0, -(full - kept), 0))
                if (pass_index, k, m) in stored:
                    out.append((stored[(pass_index, k, m)], 0, -kept, 0))
            continue
        if loaded and (pass_index, k, m) in loaded and run._first_backward_work(action):
            out.append((loaded[(pass_index, k, m)], 1,
                        plan.kept_bytes(k, (k, m) in recomputed), 0))
        if kind == RECOMPUTE:
            out.append((start, 1, full - plan.kept_bytes(k, True), 0))
        elif kind == (WEIGHT_GRAD if k in releases_on_w else BACKWARD):
            out.append((end, 0, -full, -1))
    for ipu, load_start, store_end in run.state_copies:
        state = run._optimizer_state_bytes(ipu)
        deltas[ipu] += [(load_start, 1, state, 0), (store_end, 0, -state, 0)]
    return deltas


def _resident_bytes(plan: _Plan, ipu: int) -> float:
    """Memory held for the whole run: weights, and when training the gradient accumulators
    and the optimizer state (unless it lives in streaming memory)."""
    stages = plan.schedule.stages_on(ipu)
    total = sum(plan.stages[k].parameter_bytes for k in stages)
    if plan.settings.training:
        total += sum(plan.accumulator_bytes[k] for k in stages)
        if not plan.settings.offload_weights:
            total += sum(plan.stages[k].optimizer_state_bytes for k in stages)
    return total


def _memory_and_in_flight(run: _PipelineRun, start: float) -> Tuple[Dict[int, float], Dict[int, int]]:
    """Peak memory and peak in-flight micro-batches per IPU (replica 0); samples the
    ``memory`` counter on every replica's lane."""
    plan = run.plan
    peak_memory: Dict[int, float] = {}
    peak_in_flight: Dict[int, int] = {}
    for ipu, changes in _memory_deltas(run).items():
        changes.sort(key=lambda change: (change[0], change[1]))
        resident = _resident_bytes(plan, ipu)
        samples = [(start, resident, 0)]
        dynamic = 0.0
        held = peak_held = 0
        peak = resident
        for index, (time, _, nbytes, count) in enumerate(changes):
            dynamic += nbytes
            held += count
            if resident + dynamic > peak:
                peak = resident + dynamic
            if held > peak_held:
                peak_held = held
            value = resident + max(dynamic, 0.0)
            # Only the value a time ends with is sampled (a slot freed as another fills).
            if (value, held) != samples[-1][1:] and (index + 1 == len(changes)
                                                     or changes[index + 1][0] != time):
                samples.append((time, value, held))
        for lane in plan.lanes[ipu]:
            for time, value, count in samples:
                run.builder.count(lane, "memory", time, value)
                run.builder.count(lane, IN_FLIGHT_COUNTER, time, count)
        peak_memory[ipu] = peak
        peak_in_flight[ipu] = peak_held
    return peak_memory, peak_in_flight


def _metrics(run: _PipelineRun, lanes: List[str], start: float) -> Metrics:
    plan, settings = run.plan, run.settings
    peak_memory, peak_in_flight = _memory_and_in_flight(run, start)
    sram = settings.target.sram_bytes_per_chip
    memory_by_lane: Dict[int, int] = {}
    in_flight_by_lane: Dict[int, int] = {}
    for ipu in range(plan.num_ipus):
        for lane in plan.lanes_of(ipu):
            memory_by_lane[ipu_of_lane(lane)] = int(round(peak_memory[ipu]))
            in_flight_by_lane[ipu_of_lane(lane)] = peak_in_flight[ipu]
    micro_batches = plan.schedule.micro_batches
    samples = effective = None
    if settings.batch_size is not None:
        effective = settings.replicas * settings.batch_size * micro_batches
        samples = effective * settings.repeat_count
    return timeline_metrics(
        run.builder.events, [ipu_of_lane(lane) for lane in lanes if lane != HOST_LANE],
        engine_runs=1, iterations=micro_batches * settings.repeat_count, samples=samples,
        peak_memory_bytes=memory_by_lane, sram_bytes_per_chip=sram,
        peak_in_flight=in_flight_by_lane, clock=UNIT_CLOCK if settings.unit_cost else CLOCK,
        effective_batch_size=effective,
        out_of_memory_messages=[out_of_memory_message(ipu, b, sram)
                                for ipu, b in sorted(memory_by_lane.items()) if b > sram])


# --- the public entry point -----------------------------------------------------------


def simulate_pipeline(
    stages: Sequence[StageCost],
    schedule: Union[str, int, Schedule] = "grouped",
    gradient_accumulation_count: Optional[int] = None,
    repeat_count: int = 1,
    replicas: int = 1,
    target: Union[str, IPUTarget] = "ipu2",
    host: Optional[HostModel] = None,
    batch_size: Optional[int] = None,
    device_mapping: Optional[Sequence[int]] = None,
    training: bool = True,
    recompute: bool = False,
    offload_weights: bool = False,
    offload_activations: bool = False,
    accumulation_dtype_bytes: int = 4,
    unit_cost: bool = False,
    title: str = "",
    *,
    variable_dtype_bytes: int = 4,
    stages_per_ipu: int = 2,
    backward_ratio: float = 1.0,
    synthetic_data: bool = False,
    fifos: bool = True,
    outfeed_bytes: Optional[int] = None,
) -> Timeline:
    """Simulate one engine run of a pipelined program: ``repeat_count`` passes of
    ``gradient_accumulation_count`` micro-batches through ``stages``.

    ``schedule`` is a name from ``schedule_rules.SCHEDULE_NAMES``, a ``PipelineSchedule`` member
    or value, or a ``Schedule`` (then ``gradient_accumulation_count`` may be omitted and the
    SDK's count rules are not applied).  ``batch_size`` is the micro-batch size (per replica);
    with it the metrics give samples per second and the effective batch size
    ``replicas x batch_size x gradient_accumulation_count``.  ``stages_per_ipu`` is the
    number of virtual stages per IPU of ``interleaved-1f1b``.  ``backward_ratio`` is the
    length of a backward action in forward actions, in unit-cost mode only (real costs come
    from the stages).  ``synthetic_data`` leaves out every host transfer of data (infeed and
    outfeed copies and the host's preparation of the data), as
    ``TF_POPLAR_FLAGS=--use_synthetic_data`` does on the SDK.  ``fifos``: the stages keep
    activations in FIFOs between forward and backward, as a pipeline does (not shards run
    in turn).  ``outfeed_bytes``: what the last stage's forward copies to the host per
    micro-batch (0: the program has no outfeed, and no copy is drawn); ``None``, as a
    pipeline's outfeed does: its last stage's outputs, or the loss when training.

    Misconfigurations the SDK rejects raise ``schedule_rules.PipelineConfigurationError`` with
    its message; impossible hand-written schedules raise
    ``schedule_actions.InvalidScheduleError``.

    >>> t = simulate_pipeline(unit_stages(4), "gpipe", 8, unit_cost=True)
    >>> t.metrics.makespan, t.metrics.bubble_fraction == 3 / 11
    (22.0, True)
    """
    for value, what in ((repeat_count, "repeat_count"), (replicas, "replicas")):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{what} must be a positive integer, got {value!r}.")
    if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}.")
    if isinstance(backward_ratio, bool) or not isinstance(backward_ratio, (int, float)) \
            or not 0 < backward_ratio < float("inf"):
        raise ValueError(f"backward_ratio must be a positive number, got {backward_ratio!r}.")
    if backward_ratio != 1 and not unit_cost:
        raise ValueError("backward_ratio applies in unit-cost mode only: with real costs the "
                         "stages' FLOPs and ops set how long a backward pass takes.")
    settings = _PipelineSimulationSettings(
        stages=stages, schedule=schedule, gradient_accumulation_count=gradient_accumulation_count,
        repeat_count=repeat_count, replicas=replicas, target=get_target(target),
        host=host if host is not None else HostModel(), batch_size=batch_size,
        device_mapping=device_mapping, training=training, recompute=recompute,
        offload_weights=offload_weights, offload_activations=offload_activations,
        accumulation_dtype_bytes=accumulation_dtype_bytes, unit_cost=unit_cost, title=title,
        variable_dtype_bytes=variable_dtype_bytes, stages_per_ipu=stages_per_ipu,
        backward_ratio=float(backward_ratio), synthetic_data=synthetic_data, fifos=fifos,
        outfeed_bytes=outfeed_bytes)
    with _cyclic_gc_paused():
        return _simulate(settings)


@contextlib.contextmanager
def _cyclic_gc_paused():
    """Pause the cyclic garbage collector: a big simulation allocates hundreds of thousands
    of small acyclic objects (events, tuples), which would trigger repeated full collections
    that find nothing yet cost up to half the run time."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _simulate(settings: _PipelineSimulationSettings) -> Timeline:
    plan = _plan(settings)
    unit_cost, host, repeat_count = settings.unit_cost, settings.host, settings.repeat_count
    micro_batches = plan.schedule.micro_batches
    ipu_lanes = [ipu_lane(i) for i in range(plan.num_ipus * settings.replicas)]
    lanes = ipu_lanes if unit_cost else [HOST_LANE] + ipu_lanes
    builder = TimelineBuilder(lanes)
    run = _PipelineRun(plan, builder)

    start = 0.0 if unit_cost else launch_engine_run(builder, host, 0, 0.0)
    if (not unit_cost and not settings.synthetic_data and host.host_seconds_per_batch > 0
            and plan.stages[0].input_bytes > 0):
        # The host prepares infeed elements one after another from the start of the run
        # (prefetching is not limited here).
        for p in range(repeat_count):
            for m in range(micro_batches):
                run.infeed_ready[(p, m)] = prepare_host_batch(
                    builder, host, "prepare infeed element", start, 0, p)

    order = None if plan.schedule.synchronous else schedule_actions.execution_order(plan.schedule)
    phases: List[Tuple[str, float, float]] = []
    pass_start = start
    for p in range(repeat_count):
        run.pass_index = p
        first_placed = len(run.placed)
        if plan.schedule.synchronous:
            pass_end = run.run_synchronous_pass(pass_start)
        else:
            pass_end = run.run_asynchronous_pass(order, pass_start)
        phases += _pass_phases(run.placed[first_placed:], pass_start, pass_end,
                               settings.training)
        pass_start = pass_end

    metrics = _metrics(run, lanes, start)
    name = settings.title or (
        f"{plan.schedule.name} pipeline: {plan.schedule.num_stages} stages, "
        f"{micro_batches} micro-batches" + (f" x {repeat_count} passes" if repeat_count > 1
                                            else "")
        + (", synthetic data" if settings.synthetic_data and not unit_cost else ""))
    return Timeline(events=builder.events, lanes=lanes, metrics=metrics, title=name,
                    clock=metrics.clock, engine_run_spans=[(0.0, metrics.makespan)],
                    counters=builder.counters, flows=builder.flows, phases=phases)


__all__ = [
    "simulate_pipeline", "unit_stages", "action_seconds", "unit_action_time",
    "streaming_memory_seconds", "weight_update_bytes", "out_of_memory_message",
    "UNIT_STAGE_FLOPS", "IN_FLIGHT_COUNTER",
]
