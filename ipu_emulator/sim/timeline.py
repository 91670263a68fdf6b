"""Simulated IPU timelines: events per lane, the metrics derived from them, and the BSP model
that turns recorded engine runs into a timeline.

All times here are on one clock, *simulated IPU time*, in seconds from the start of the
first engine run.  Host wall time measured on this machine (``EngineRun.host_seconds``) is
never mixed in.

    >>> from ipu_emulator.record import ComputeCost, EngineRun
    >>> step = ComputeCost(forward_flops=2e9, backward_flops=4e9, weight_update_flops=1e7)
    >>> looped = simulate_engine_runs(
    ...     [EngineRun("train", iterations=100, step_cost=step, infeed_bytes_per_iteration=4096)])
    >>> per_step = simulate_engine_runs(
    ...     [EngineRun("train", iterations=1, step_cost=step, input_bytes=4096)] * 100)
    >>> per_step.metrics.makespan > looped.metrics.makespan
    True

The model (BSP, as Graphcore's IPU Programmer's Guide describes it), per engine run:

* host lane: ``Engine::run`` for ``HostModel.engine_run_overhead_s``; the IPUs start after it;
* ``input_bytes``: an external ``sync`` then a ``stream_copy`` host -> IPU taking
  ``stream_copy_latency_s + bytes / host_link_bandwidth``;
* each loop iteration: the infeed element (sync + stream copy) if ``infeed_bytes > 0``;
  compute split into ``forward``, ``backward``, ``weight_update`` events, each lasting
  ``max(flops / (peak_fp32 * compute_efficiency), bytes / sram_bandwidth)`` where the step's
  ``bytes_accessed`` is shared between phases in proportion to their FLOPs (phases with no
  FLOPs emit no event); the outfeed element (sync + stream copy) if ``outfeed_bytes > 0``;
* ``output_bytes``: sync + stream copy IPU -> host.

Engine runs are blocking (``sess.run`` returns when the IPU is done), so run ``k+1`` starts when
every lane of run ``k`` is idle.  The pieces are small pure functions and a
``TimelineBuilder`` so the pipeline simulator can reuse them; ``timeline_metrics`` gives the
metrics of every timeline, whichever simulator placed its events.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ipu_emulator.sim.hardware import HostModel, IPUTarget, get_target
from ipu_emulator.record import ComputeCost, EngineRun, phase_bytes_or_flop_shares

CLOCK = "simulated IPU time"
# The clock of unit-cost pipeline timelines: every forward and backward stage action takes
# one time unit and nothing else costs time (the textbook pipeline diagrams).
UNIT_CLOCK = "unit time steps"
HOST_LANE = "host"

# The event kinds a timeline may hold, in legend order.
KINDS = (
    "forward",
    "backward",
    "weight_update",
    "recompute",
    "exchange",
    "sync",
    "stream_copy",
    "host",
)
COMPUTE_KINDS = frozenset({"forward", "backward", "weight_update", "recompute"})
_KIND_SET = frozenset(KINDS)


def ipu_lane(ipu: int) -> str:
    """Lane name of IPU ``ipu``: ``ipu_lane(0) == "IPU0"``."""
    return f"IPU{ipu}"


def ipu_of_lane(lane: str) -> Optional[int]:
    """The IPU a lane stands for: ``ipu_of_lane("IPU3") == 3``; None for the host lane."""
    if lane.startswith("IPU") and lane[3:].isdigit():
        return int(lane[3:])
    return None


def format_bytes(n: float, reference: float = 0.0) -> str:
    """``format_bytes(1.2e9) == '1.2 GB'``; ``reference`` picks the unit of a comparison.

    >>> format_bytes(1.2e9), format_bytes(0.9e9, 1.2e9), format_bytes(512)
    ('1.2 GB', '0.9 GB', '512 B')
    """
    size = max(n, reference)
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{int(n)} B"


@dataclass(frozen=True, slots=True)
class Event:
    """One slice of a lane: something the host or an IPU did from ``start`` to ``end``.

    Times are simulated IPU time in seconds.  ``ipu`` is None on the host lane; ``stage`` is
    the shard/pipeline stage, ``micro_batch`` the pipelined micro-batch, ``engine_run`` and
    ``iteration`` (counted over the whole timeline) say which run and loop step it belongs to.

    >>> Event("IPU0", "forward", "forward", 0.0, 2e-6, ipu=0).duration
    2e-06
    """

    lane: str
    kind: str
    name: str
    start: float
    end: float
    ipu: Optional[int] = None
    stage: Optional[int] = None
    micro_batch: Optional[int] = None
    engine_run: Optional[int] = None
    iteration: Optional[int] = None
    args: dict = field(default_factory=dict)

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class CounterSample:
    """A value that holds from ``time`` until the next sample of the same counter on the lane
    (e.g. ``name="memory"``, ``value`` in bytes)."""

    lane: str
    name: str
    time: float
    value: float


@dataclass(frozen=True, slots=True)
class Flow:
    """A transfer between lanes (drawn as an arrow), e.g. activations IPU0 -> IPU1."""

    name: str
    from_lane: str
    from_time: float
    to_lane: str
    to_time: float


@dataclass
class Metrics:
    """Figures of merit of a timeline.  Times are simulated IPU time in seconds.

    ``utilisation[ipu]`` is compute busy time (forward, backward, weight update, recompute)
    over the makespan; ``bubble_fraction`` is ``1 - mean utilisation``;
    ``busy_time_by_kind[ipu][kind]`` is the time the IPU spent on each kind;
    ``stream_copy_time`` is the stream-copy time of the busiest IPU; ``samples_per_second`` is
    known when the batch size is.  ``peak_memory_bytes`` estimates resident memory per IPU
    (weights + gradients + activations kept for the backward pass) and ``out_of_memory``
    flags IPUs whose estimate exceeds the chip's SRAM.
    """

    makespan: float = 0.0
    engine_runs: int = 0
    iterations: int = 0
    utilisation: Dict[int, float] = field(default_factory=dict)
    busy_time_by_kind: Dict[int, Dict[str, float]] = field(default_factory=dict)
    host_overhead_time: float = 0.0
    stream_copy_time: float = 0.0
    samples: Optional[int] = None
    samples_per_second: Optional[float] = None
    bubble_fraction: float = 0.0
    peak_in_flight: Dict[int, int] = field(default_factory=dict)
    peak_memory_bytes: Dict[int, int] = field(default_factory=dict)
    out_of_memory: Dict[int, bool] = field(default_factory=dict)
    clock: str = CLOCK
    # Pipelines: replicas x micro-batch size x gradient accumulation count (samples per
    # weight update), and the out-of-memory messages the IPU would report.
    effective_batch_size: Optional[int] = None
    out_of_memory_messages: List[str] = field(default_factory=list)

    @property
    def host_overhead_fraction(self) -> float:
        return self.host_overhead_time / self.makespan if self.makespan > 0 else 0.0

    @property
    def mean_utilisation(self) -> float:
        if not self.utilisation:
            return 0.0
        return sum(self.utilisation.values()) / len(self.utilisation)


@dataclass
class Timeline:
    """Events on lanes (``lanes`` in display order, host first), on the ``clock`` named.

    ``engine_run_spans`` holds ``(start, end)`` of each engine run, ``counters`` time series
    such as memory per IPU, ``flows`` inter-IPU transfers, ``phases`` named spans such as a
    pipeline's ``("ramp-up", start, end)``, ``"main"``, ``"ramp-down"``, ``"weight update"``.
    """

    events: List[Event]
    lanes: List[str]
    metrics: Metrics = field(default_factory=Metrics)
    title: str = ""
    clock: str = CLOCK
    engine_run_spans: List[Tuple[float, float]] = field(default_factory=list)
    counters: List[CounterSample] = field(default_factory=list)
    flows: List[Flow] = field(default_factory=list)
    phases: List[Tuple[str, float, float]] = field(default_factory=list)

    def events_on(self, lane: str) -> List[Event]:
        return [e for e in self.events if e.lane == lane]

    @property
    def ipu_lanes(self) -> List[str]:
        return [lane for lane in self.lanes if lane != HOST_LANE]

    def kinds_present(self) -> List[str]:
        present = {e.kind for e in self.events}
        return [k for k in KINDS if k in present] + sorted(present - _KIND_SET)


def find_overlaps(events: Iterable[Event]) -> List[Tuple[Event, Event]]:
    """Pairs of events on the same lane whose time ranges overlap (touching is fine)."""
    by_lane: Dict[str, List[Event]] = {}
    for event in events:
        by_lane.setdefault(event.lane, []).append(event)
    overlaps = []
    for lane_events in by_lane.values():
        lane_events.sort(key=lambda e: (e.start, e.end))
        latest = None
        for event in lane_events:
            if latest is not None and event.start < latest.end:
                overlaps.append((latest, event))
            if latest is None or event.end > latest.end:
                latest = event
    return overlaps


def check_no_overlaps(events: Iterable[Event]) -> None:
    """Raise ValueError naming the first overlap if two events on one lane overlap."""
    overlaps = find_overlaps(events)
    if overlaps:
        a, b = overlaps[0]
        raise ValueError(
            f"{len(overlaps)} overlapping event(s) on a lane; first on {a.lane}: "
            f"{a.name!r} [{a.start!r}, {a.end!r}] and {b.name!r} [{b.start!r}, {b.end!r}] "
            f"({CLOCK}, s)"
        )


# --- cost model: small pure functions -----------------------------------------------------


def compute_seconds(flops: float, bytes_accessed: float, target: IPUTarget,
                    op_cycles: float = 0.0, half_flops: float = 0.0) -> float:
    """Time of one compute phase: the fixed cycles of its ops (``hardware.OP_CYCLES``) plus
    its work, bound by arithmetic or by tile-memory traffic.  ``half_flops``, part of
    ``flops``, are float16 matrix products, done at the float16 rate.

    >>> from ipu_emulator.sim.hardware import IPU2
    >>> round(compute_seconds(1e9, 0, IPU2) / compute_seconds(1e9, 0, IPU2, half_flops=1e9))
    4
    """
    return op_cycles / target.clock_hz + max(
        (flops - half_flops) / target.achievable_fp32_flops
        + half_flops / target.achievable_fp16_flops,
        bytes_accessed / target.sram_bandwidth_bytes_per_s,
    )


def phase_durations(cost: ComputeCost, target: IPUTarget) -> List[Tuple[str, float]]:
    """``[(kind, seconds)]`` for the forward, backward and weight-update phases of one step.

    Each phase's traffic is ``cost.phase_bytes`` when the record has it (the graph does);
    otherwise ``bytes_accessed`` is shared in proportion to FLOPs, because the heavy ops of
    each phase are the ones doing the FLOPs.  A step with traffic but no FLOPs is charged as
    forward work (moving data still takes time).

    >>> from ipu_emulator.sim.hardware import IPU2
    >>> [kind for kind, _ in phase_durations(ComputeCost(forward_flops=1e6), IPU2)]
    ['forward']
    """
    phase_bytes = phase_bytes_or_flop_shares(cost)
    phases = []
    for kind, flops, nbytes, cycles, half in zip(
            ("forward", "backward", "weight_update"),
            (cost.forward_flops, cost.backward_flops, cost.weight_update_flops), phase_bytes,
            cost.phase_op_cycles or (0.0, 0.0, 0.0), cost.phase_half_flops or (0.0, 0.0, 0.0)):
        if flops > 0 or nbytes > 0 or cycles > 0:
            phases.append((kind, compute_seconds(flops, nbytes, target, cycles, half)))
    return phases


def stream_copy_seconds(nbytes: float, target: IPUTarget, host: HostModel) -> float:
    """One host <-> IPU stream copy: fixed latency plus bytes over the host link."""
    return host.stream_copy_latency_s + nbytes / target.host_link_bandwidth_bytes_per_s


def ipu_link_seconds(nbytes: float, target: IPUTarget, copies: int = 1) -> float:
    """``copies`` chip-to-chip copies over IPU-Links moving ``nbytes`` in all: a fixed cost
    per copy (``ipu_link_latency_s``) plus the bytes at what a copy between two IPUs
    achieves (``inter_ipu_copy_bandwidth_bytes_per_s``)."""
    return (copies * target.ipu_link_latency_s
            + nbytes / target.inter_ipu_copy_bandwidth_bytes_per_s)


def allreduce_seconds(nbytes: float, replicas: int, target: IPUTarget) -> float:
    """Ring all-reduce of ``nbytes`` over ``replicas`` IPUs: ``2(R-1)`` link transfers of
    ``nbytes / R`` each (reduce-scatter then all-gather)."""
    if replicas <= 1 or nbytes <= 0:
        return 0.0
    return 2 * (replicas - 1) * ipu_link_seconds(nbytes / replicas, target)


def resident_bytes(cost: ComputeCost) -> int:
    """Memory a step keeps resident: its variables (weights, optimizer slots, gradient
    accumulators), one gradient per trained weight when training, and the activations kept
    for the backward pass."""
    return int(cost.parameter_bytes + cost.gradients_held() + cost.activation_bytes)


# --- building timelines -------------------------------------------------------------------

Lanes = Sequence[str]


class TimelineBuilder:
    """Places events on lanes so that no lane ever holds two events at once.

    Each lane has a cursor (when it is next free); ``place`` starts an event on several
    lanes at ``max(earliest, cursors of those lanes)``, which is what a BSP superstep or a
    dependency-driven schedule needs.

    >>> b = TimelineBuilder(["host", "IPU0"])
    >>> b.place(["host"], "host", "Engine::run", 1e-3)
    (0.0, 0.001)
    >>> b.place(["IPU0"], "forward", "forward", 2e-6, earliest=1e-3)
    (0.001, 0.001002)
    """

    def __init__(self, lanes: Lanes):
        self.lanes = list(lanes)
        self._free: Dict[str, float] = {lane: 0.0 for lane in self.lanes}
        self._ipu_of = {lane: ipu_of_lane(lane) for lane in self.lanes}
        self.events: List[Event] = []
        self.counters: List[CounterSample] = []
        self.flows: List[Flow] = []
        self._counter_values: Dict[Tuple[str, str], float] = {}

    def free_at(self, lanes: Lanes) -> float:
        return max(self._free[lane] for lane in lanes)

    def horizon(self) -> float:
        """When every lane is idle."""
        return max(self._free.values(), default=0.0)

    def place(
        self,
        lanes: Lanes,
        kind: str,
        name: str,
        duration: float,
        earliest: float = 0.0,
        *,
        stage: Optional[int] = None,
        micro_batch: Optional[int] = None,
        engine_run: Optional[int] = None,
        iteration: Optional[int] = None,
        args: Optional[dict] = None,
    ) -> Tuple[float, float]:
        """Put one event of ``duration`` on every lane in ``lanes``; returns ``(start, end)``.

        A non-positive duration places nothing and returns ``(start, start)``.
        """
        if kind not in _KIND_SET:
            raise ValueError(f"Unknown event kind {kind!r}; valid kinds are {', '.join(KINDS)}.")
        free = self._free
        start = earliest
        for lane in lanes:
            if free[lane] > start:
                start = free[lane]
        if duration <= 0:
            return start, start
        end = start + duration
        extra = args if args is not None else {}
        for lane in lanes:
            self.events.append(
                Event(lane, kind, name, start, end, self._ipu_of[lane], stage, micro_batch,
                      engine_run, iteration, extra)
            )
            free[lane] = end
        return start, end

    def count(self, lane: str, name: str, time: float, value: float) -> None:
        """Record a counter value from ``time`` on; repeating the current value is a no-op."""
        if self._counter_values.get((lane, name)) != value:
            self._counter_values[(lane, name)] = value
            self.counters.append(CounterSample(lane, name, time, value))

    def flow(self, name: str, from_lane: str, from_time: float, to_lane: str, to_time: float):
        self.flows.append(Flow(name, from_lane, from_time, to_lane, to_time))


# --- host and stream-copy pieces (shared with the pipeline simulator) ---------------------


def launch_engine_run(
    builder: TimelineBuilder, host: HostModel, engine_run: int, earliest: float
) -> float:
    """The host's ``Engine::run`` call; returns when the IPUs may start."""
    _, end = builder.place(
        [HOST_LANE], "host", "Engine::run", host.engine_run_overhead_s, earliest,
        engine_run=engine_run,
    )
    return end


def prepare_host_batch(
    builder: TimelineBuilder, host: HostModel, name: str, earliest: float,
    engine_run: Optional[int] = None, iteration: Optional[int] = None,
) -> float:
    """Host work producing one batch (``host_seconds_per_batch``); returns when it is ready."""
    _, end = builder.place(
        [HOST_LANE], "host", name, host.host_seconds_per_batch, earliest,
        engine_run=engine_run, iteration=iteration,
    )
    return end


def host_transfer(
    builder: TimelineBuilder,
    sync_lanes: Lanes,
    copy_lanes: Lanes,
    nbytes: float,
    name: str,
    target: IPUTarget,
    host: HostModel,
    earliest: float,
    engine_run: Optional[int] = None,
    iteration: Optional[int] = None,
) -> Tuple[float, float]:
    """An external sync on ``sync_lanes`` then a stream copy on ``copy_lanes``.

    Returns ``(copy_start, copy_end)``.  A host transfer needs the IPUs to sync with the host
    first (BSP: stream copies happen after an external sync).
    """
    builder.place(
        sync_lanes, "sync", "Sync (External)", target.external_sync_seconds, earliest,
        engine_run=engine_run, iteration=iteration,
    )
    return builder.place(
        copy_lanes, "stream_copy", name, stream_copy_seconds(nbytes, target, host), earliest,
        engine_run=engine_run, iteration=iteration, args={"bytes": nbytes},
    )


# --- engine runs --------------------------------------------------------------------------


@dataclass(frozen=True)
class IPULayout:
    """Which IPU lanes a program uses: ``replicas`` copies of ``shards`` IPUs each.

    Replica ``r``'s shard ``s`` runs on IPU ``r * shards + s`` (Graphcore's numbering).
    """

    shards: int = 1
    replicas: int = 1

    @classmethod
    def of(cls, run: EngineRun) -> "IPULayout":
        replicas = max(1, run.replicas)
        # EngineRun.num_ipus is the size of the device the program runs on, all replicas
        # included; shards = IPUs per replica.
        return cls(shards=max(1, run.num_ipus // replicas), replicas=replicas)

    @property
    def num_ipus(self) -> int:
        return self.shards * self.replicas

    def shard_lanes(self, shard: int) -> List[str]:
        return [ipu_lane(r * self.shards + shard) for r in range(self.replicas)]

    def all_lanes(self) -> List[str]:
        return [ipu_lane(i) for i in range(self.num_ipus)]


def _step_compute(
    builder: TimelineBuilder,
    layout: IPULayout,
    cost: ComputeCost,
    target: IPUTarget,
    earliest: float,
    engine_run: int,
    iteration: int,
    all_reduce_bytes: float = 0.0,
    weight_update: bool = True,
) -> None:
    """One training/inference step's compute on the layout's IPUs.

    Replicas run side by side on their own lanes; before a weight update they all-reduce
    ``all_reduce_bytes`` (their gradients) over the IPU-Links.  ``weight_update=False`` is an
    accumulation step of a gradient accumulation optimizer: no update, no all-reduce.
    """
    phases = phase_durations(cost, target)
    if not weight_update:
        phases = [(kind, seconds) for kind, seconds in phases if kind != "weight_update"]
    if layout.shards == 1:
        lanes = layout.shard_lanes(0)
        for kind, seconds in phases:
            if kind == "weight_update" and layout.replicas > 1 and all_reduce_bytes > 0:
                builder.place(lanes, "exchange", "AllReduce gradients (IPU-Links)",
                              allreduce_seconds(all_reduce_bytes, layout.replicas, target),
                              earliest, engine_run=engine_run, iteration=iteration,
                              args={"bytes": all_reduce_bytes, "replicas": layout.replicas})
            builder.place(lanes, kind, kind, seconds, earliest,
                          engine_run=engine_run, iteration=iteration)
        return
    _sharded_step(builder, layout, cost, phases, target, earliest, engine_run, iteration)


def _sharded_step(builder, layout, cost, phases, target, earliest, engine_run, iteration):
    """Sharding: shards run one after another (forward 0..n-1, backward n-1..0), passing
    activations (and gradients back) over IPU-Links; weight updates run on all shards.

    The record has one cost per step, so each shard gets an equal share, and the tensor
    crossing a shard boundary is estimated as one shard's share of the activations.
    """
    n = layout.shards
    seconds = dict(phases)
    boundary_bytes = cost.activation_bytes / n
    labels = dict(engine_run=engine_run, iteration=iteration)

    def run_on(shard, kind, at):
        return builder.place(layout.shard_lanes(shard), kind, f"{kind} (shard {shard})",
                             seconds[kind] / n, at, stage=shard, **labels)[1]

    def exchange(src, dst, at):
        src_lanes, dst_lanes = layout.shard_lanes(src), layout.shard_lanes(dst)
        both = src_lanes + dst_lanes
        builder.place(both, "sync", "Sync (External)", target.external_sync_seconds, at, **labels)
        start, end = builder.place(
            both, "exchange", f"GlobalExchange IPU-shard {src}->{dst}",
            ipu_link_seconds(boundary_bytes, target), at, args={"bytes": boundary_bytes}, **labels,
        )
        middle = (start + end) / 2
        for a, b in zip(src_lanes, dst_lanes):
            builder.flow("activations" if dst > src else "gradients", a, middle, b, middle)
        return end

    at = earliest
    if "forward" in seconds:
        for shard in range(n):
            at = run_on(shard, "forward", at)
            if shard < n - 1:
                at = exchange(shard, shard + 1, at)
    if "backward" in seconds:
        for shard in reversed(range(n)):
            at = run_on(shard, "backward", at)
            if shard > 0:
                at = exchange(shard, shard - 1, at)
    if "weight_update" in seconds:
        for shard in range(n):
            run_on(shard, "weight_update", at)


def simulate_engine_run(
    builder: TimelineBuilder,
    run: EngineRun,
    engine_run: int,
    first_iteration: int,
    target: IPUTarget,
    host: HostModel,
) -> Tuple[float, float]:
    """Append one engine run to ``builder`` after everything already there.

    Returns ``(start, end)`` of the run in simulated seconds.
    """
    layout = IPULayout.of(run)
    all_lanes = layout.all_lanes()
    in_lanes = layout.shard_lanes(0)
    out_lanes = layout.shard_lanes(layout.shards - 1)
    run_start = builder.horizon()

    feeds_per_run = run.infeed_bytes_per_iteration == 0 and run.input_bytes > 0
    if feeds_per_run and host.host_seconds_per_batch > 0:
        prepare_host_batch(builder, host, "prepare inputs", run_start, engine_run)
    ipus_start = launch_engine_run(builder, host, engine_run, run_start)

    # A run loads its program; IPUs the program does not use hold nothing of it.
    memory = resident_bytes(run.step_cost) // layout.shards
    used = set(all_lanes)
    for lane in builder.lanes:
        if lane != HOST_LANE:
            builder.count(lane, "memory", ipus_start, memory if lane in used else 0)

    if run.input_bytes > 0:
        host_transfer(builder, all_lanes, in_lanes, run.input_bytes, "StreamCopy inputs (host->IPU)",
                      target, host, ipus_start, engine_run)

    prepare_infeed = run.infeed_bytes_per_iteration > 0 and host.host_seconds_per_batch > 0
    depth = max(1, host.infeed_prefetch_depth)
    copy_starts: List[float] = []
    for k in range(run.iterations):
        iteration = first_iteration + k
        ready = ipus_start
        if run.infeed_bytes_per_iteration > 0:
            if prepare_infeed:
                # The infeed buffer holds `depth` elements: element k is prepared once the
                # IPU has begun copying element k - depth out of it.
                slot_free = copy_starts[k - depth] if k >= depth else ipus_start
                ready = prepare_host_batch(builder, host, "prepare infeed element", slot_free,
                                           engine_run, iteration)
            copy_start, _ = host_transfer(
                builder, all_lanes, in_lanes, run.infeed_bytes_per_iteration,
                "StreamCopy infeed (host->IPU)", target, host, max(ready, ipus_start),
                engine_run, iteration,
            )
            copy_starts.append(copy_start)
        _step_compute(builder, layout, run.step_cost, target, ipus_start, engine_run, iteration,
                      all_reduce_bytes=run.all_reduce_bytes,
                      weight_update=(k + 1) % max(1, run.gradient_accumulation_count) == 0)
        if run.outfeed_bytes_per_iteration > 0:
            host_transfer(builder, all_lanes, out_lanes, run.outfeed_bytes_per_iteration,
                          "StreamCopy outfeed (IPU->host)", target, host, ipus_start,
                          engine_run, iteration)

    if run.output_bytes > 0:
        host_transfer(builder, all_lanes, out_lanes, run.output_bytes,
                      "StreamCopy outputs (IPU->host)", target, host, ipus_start, engine_run)
    return run_start, builder.horizon()


def simulate_engine_runs(
    runs: Sequence[EngineRun],
    target: Union[str, IPUTarget] = "ipu2",
    host: Optional[HostModel] = None,
    batch_size: Optional[int] = None,
    title: str = "",
) -> Timeline:
    """The simulated IPU timeline of ``runs`` executed one after another.

    ``batch_size`` is the per-replica batch of one loop iteration; with it the metrics give
    samples per second (of simulated IPU time).

    >>> from ipu_emulator.record import ComputeCost, EngineRun
    >>> run = EngineRun("train", iterations=2, step_cost=ComputeCost(forward_flops=1e9))
    >>> timeline = simulate_engine_runs([run], batch_size=32)
    >>> [e.kind for e in timeline.events]
    ['host', 'forward', 'forward']
    >>> timeline.lanes
    ['host', 'IPU0']
    """
    target = get_target(target)
    host = host if host is not None else HostModel()
    num_ipus = max((IPULayout.of(run).num_ipus for run in runs), default=1)
    lanes = [HOST_LANE] + [ipu_lane(i) for i in range(num_ipus)]
    builder = TimelineBuilder(lanes)

    spans = []
    iteration = 0
    for index, run in enumerate(runs):
        spans.append(simulate_engine_run(builder, run, index, iteration, target, host))
        iteration += run.iterations

    samples = (None if batch_size is None
               else sum(batch_size * run.iterations * max(1, run.replicas) for run in runs))
    metrics = timeline_metrics(
        builder.events, range(num_ipus), engine_runs=len(runs),
        iterations=sum(run.iterations for run in runs), samples=samples,
        peak_memory_bytes=_peak_resident_bytes(runs, num_ipus),
        sram_bytes_per_chip=target.sram_bytes_per_chip)
    return Timeline(
        events=builder.events,
        lanes=lanes,
        metrics=metrics,
        title=title,
        engine_run_spans=spans,
        counters=builder.counters,
        flows=builder.flows,
    )


def _peak_resident_bytes(runs: Sequence[EngineRun], num_ipus: int) -> Dict[int, int]:
    """Per IPU, the most any run's program keeps resident on it (shards split a step)."""
    peak = {i: 0 for i in range(num_ipus)}
    for run in runs:
        layout = IPULayout.of(run)
        per_ipu = resident_bytes(run.step_cost) // layout.shards
        for i in range(layout.num_ipus):
            peak[i] = max(peak[i], per_ipu)
    return peak


# --- metrics ------------------------------------------------------------------------------


def timeline_metrics(
    events: Sequence[Event],
    ipus: Iterable[int],
    *,
    engine_runs: int,
    iterations: int,
    makespan: Optional[float] = None,
    samples: Optional[int] = None,
    peak_memory_bytes: Optional[Dict[int, int]] = None,
    sram_bytes_per_chip: Optional[float] = None,
    out_of_memory: Optional[Dict[int, bool]] = None,
    peak_in_flight: Optional[Dict[int, int]] = None,
    clock: str = CLOCK,
    effective_batch_size: Optional[int] = None,
    out_of_memory_messages: Sequence[str] = (),
) -> Metrics:
    """The metrics of a timeline: what its ``events`` say, plus the facts only the simulator
    that placed them knows (memory peaks, micro-batches in flight, counts of runs, iterations
    and samples).

    ``ipus`` are the IPUs reported on, in order; ``makespan`` defaults to the last event's
    end.  ``out_of_memory`` defaults to each IPU's peak memory over ``sram_bytes_per_chip``;
    ``peak_in_flight`` to one step on each IPU that computes (a timeline without a pipeline
    holds one step at a time).

    >>> events = [Event("host", "host", "Engine::run", 0.0, 1.0),
    ...           Event("IPU0", "forward", "forward", 1.0, 4.0, ipu=0)]
    >>> m = timeline_metrics(events, [0, 1], engine_runs=1, iterations=1, samples=8)
    >>> m.makespan, m.utilisation, m.bubble_fraction, m.samples_per_second, m.peak_in_flight
    (4.0, {0: 0.75, 1: 0.0}, 0.625, 2.0, {0: 1, 1: 0})
    """
    if makespan is None:
        makespan = max((e.end for e in events), default=0.0)
    busy: Dict[int, Dict[str, float]] = {ipu: {} for ipu in ipus}
    host_time = 0.0
    for e in events:
        if e.ipu is None:
            host_time += e.end - e.start
        else:
            by_kind = busy[e.ipu]
            by_kind[e.kind] = by_kind.get(e.kind, 0.0) + (e.end - e.start)
    compute = {ipu: sum(t for kind, t in kinds.items() if kind in COMPUTE_KINDS)
               for ipu, kinds in busy.items()}
    # Idle over total from exact sums, not 1 - mean utilisation: with unit costs this is the
    # textbook fraction exactly.  No time at all is all bubble (every utilisation is 0).
    capacity = makespan * len(compute)
    if capacity > 0:
        bubble = (capacity - sum(compute.values())) / capacity
    else:
        bubble = 1.0 if compute else 0.0
    memory = peak_memory_bytes if peak_memory_bytes is not None else {}
    if out_of_memory is None:
        out_of_memory = ({ipu: b > sram_bytes_per_chip for ipu, b in memory.items()}
                         if sram_bytes_per_chip is not None else {})
    if peak_in_flight is None:
        peak_in_flight = {ipu: int(any(k in COMPUTE_KINDS for k in kinds))
                          for ipu, kinds in busy.items()}
    return Metrics(
        makespan=makespan,
        engine_runs=engine_runs,
        iterations=iterations,
        utilisation={ipu: (t / makespan if makespan > 0 else 0.0) for ipu, t in compute.items()},
        busy_time_by_kind=busy,
        host_overhead_time=host_time,
        stream_copy_time=max((k.get("stream_copy", 0.0) for k in busy.values()), default=0.0),
        samples=samples,
        samples_per_second=(None if samples is None
                            else samples / makespan if makespan > 0 else 0.0),
        bubble_fraction=bubble,
        peak_in_flight=peak_in_flight,
        peak_memory_bytes=memory,
        out_of_memory=out_of_memory,
        clock=clock,
        effective_batch_size=effective_batch_size,
        out_of_memory_messages=list(out_of_memory_messages),
    )
