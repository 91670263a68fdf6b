"""The program record: what an emulated IPU program did, in plain data.

The API front (which imports TensorFlow) fills these records while the real numerics run on
the CPU; the simulator (which never imports TensorFlow) turns them into a simulated IPU
timeline.  Everything here is plain Python so widgets and tests can build records by hand.

Costs come from the program itself (the TensorFlow graph that ran), never from constants.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import List, Optional, Tuple


@dataclass(frozen=True)
class ComputeCost:
    """Work done by one iteration of a program body (one training or inference step).

    FLOPs are split by phase so a trace can show forward, backward and weight update apart.
    ``bytes_accessed`` is the tensor traffic of the ops (inputs read plus outputs written),
    which bounds memory-limited ops; ``parameter_bytes`` is the size of the variables the
    body reads, ``activation_bytes`` the size of the forward results kept for the backward pass.
    """

    forward_flops: float = 0.0
    backward_flops: float = 0.0
    weight_update_flops: float = 0.0
    bytes_accessed: float = 0.0
    parameter_bytes: int = 0
    activation_bytes: int = 0
    # (forward, backward, weight update) shares of ``bytes_accessed`` when the source knows
    # them; an optimizer update moves many bytes for few FLOPs, so FLOP shares would hide it.
    phase_bytes: Optional[Tuple[float, float, float]] = None
    # Bytes of the gradients a training step holds: one per trained weight, not per
    # optimizer slot or accumulator.  None when the source cannot tell them apart, and then
    # every parameter byte is taken to have a gradient.
    gradient_bytes: Optional[int] = None
    # (forward, backward, weight update) fixed cycles of the ops that do work: on an IPU every
    # op costs cycles however small it is (``sim/hardware.OP_CYCLES``).  None when the source
    # has no op-level view (a cost written by hand): then only FLOPs and bytes are timed.
    phase_op_cycles: Optional[Tuple[float, float, float]] = None
    # (forward, backward, weight update) FLOPs done by float16 matrix products (matmuls and
    # convolutions), part of each phase's FLOPs: the IPU does them at its float16 rate.
    phase_half_flops: Optional[Tuple[float, float, float]] = None

    @property
    def total_flops(self) -> float:
        return self.forward_flops + self.backward_flops + self.weight_update_flops

    def scaled(self, factor: float) -> "ComputeCost":
        """The same work done ``factor`` times (parameters are not duplicated)."""
        return replace(
            self,
            forward_flops=self.forward_flops * factor,
            backward_flops=self.backward_flops * factor,
            weight_update_flops=self.weight_update_flops * factor,
            bytes_accessed=self.bytes_accessed * factor,
            activation_bytes=int(self.activation_bytes * factor),
            phase_bytes=(tuple(b * factor for b in self.phase_bytes)
                         if self.phase_bytes is not None else None),
            phase_op_cycles=(tuple(c * factor for c in self.phase_op_cycles)
                             if self.phase_op_cycles is not None else None),
            phase_half_flops=(tuple(f * factor for f in self.phase_half_flops)
                              if self.phase_half_flops is not None else None),
        )

    def __add__(self, other: "ComputeCost") -> "ComputeCost":
        return ComputeCost(
            forward_flops=self.forward_flops + other.forward_flops,
            backward_flops=self.backward_flops + other.backward_flops,
            weight_update_flops=self.weight_update_flops + other.weight_update_flops,
            bytes_accessed=self.bytes_accessed + other.bytes_accessed,
            parameter_bytes=self.parameter_bytes + other.parameter_bytes,
            activation_bytes=self.activation_bytes + other.activation_bytes,
            phase_bytes=_add_phase_bytes(self, other),
            gradient_bytes=(None if self.gradient_bytes is None and other.gradient_bytes is None
                            else self.gradients_held() + other.gradients_held()),
            phase_op_cycles=_added_phases(self.phase_op_cycles, other.phase_op_cycles),
            phase_half_flops=_added_phases(self.phase_half_flops, other.phase_half_flops),
        )

    def gradients_held(self) -> int:
        """Gradient bytes a step holds (``gradient_bytes``, or every parameter's if unknown);
        zero for a step without a backward pass."""
        if self.backward_flops <= 0:
            return 0
        return self.parameter_bytes if self.gradient_bytes is None else self.gradient_bytes


def _added_phases(a, b):
    if a is None and b is None:
        return None
    return tuple(x + y for x, y in zip(a or (0.0, 0.0, 0.0), b or (0.0, 0.0, 0.0)))


def _add_phase_bytes(a: ComputeCost, b: ComputeCost):
    if a.phase_bytes is None and b.phase_bytes is None:
        return None
    return tuple(x + y for x, y in zip(phase_bytes_or_flop_shares(a), phase_bytes_or_flop_shares(b)))


def phase_bytes_or_flop_shares(cost: ComputeCost) -> Tuple[float, float, float]:
    """Per-phase bytes, estimated from FLOP shares when the source did not give them."""
    if cost.phase_bytes is not None:
        return cost.phase_bytes
    flops = (cost.forward_flops, cost.backward_flops, cost.weight_update_flops)
    total = sum(flops)
    if total <= 0:
        return (cost.bytes_accessed, 0.0, 0.0)
    return tuple(cost.bytes_accessed * f / total for f in flops)


@dataclass(frozen=True)
class PipelineSettings:
    """How a pipelined program ran its stages (``pipelining_ops.pipeline`` arguments).

    ``schedule`` is a name from ``schedule_rules.SCHEDULE_NAMES`` ("grouped", "interleaved",
    "sequential"); each engine run makes ``repeat_count`` passes of
    ``gradient_accumulation_count`` micro-batches; ``device_mapping[k]`` is stage ``k``'s IPU.
    """

    schedule: str
    gradient_accumulation_count: int
    repeat_count: int
    device_mapping: Tuple[int, ...]
    training: bool = True
    recompute: bool = False
    offload_weights: bool = False
    offload_activations: bool = False
    accumulation_dtype_bytes: int = 4
    # Memory options the program switched on that the simulator does not price (their
    # SDK names, e.g. "offload_weights"): a check or a view can say so.
    unmodelled_options: Tuple[str, ...] = ()
    # The ``RecomputationMode`` the pipeline was given (its name); it recomputes only when the
    # system allows it (``recompute``).
    recomputation_mode: str = "Auto"
    reduction_method: str = "SUM"   # the accumulated gradients' (its SDK enum's name)


@dataclass(frozen=True)
class EngineRun:
    """One execution of a compiled program: one ``sess.run`` (one Poplar ``Engine::run``).

    ``iterations`` is the on-device loop's real trip count in this run (1 when the program
    has no loop).  Per-iteration work is ``step_cost``; each iteration dequeues
    ``infeed_bytes_per_iteration`` from the infeed and enqueues
    ``outfeed_bytes_per_iteration`` to outfeeds.  ``input_bytes`` are the program's ordinary
    inputs (copied host -> IPU once per run, e.g. a batch fed from a host iterator), and
    ``output_bytes`` its ordinary outputs (copied IPU -> host once per run).
    ``host_seconds`` is the wall time this machine really took (the host clock; never mixed
    with simulated IPU time).
    """

    program: str
    iterations: int
    step_cost: ComputeCost
    infeed_bytes_per_iteration: int = 0
    outfeed_bytes_per_iteration: int = 0
    input_bytes: int = 0
    output_bytes: int = 0
    num_ipus: int = 1
    replicas: int = 1
    host_seconds: Optional[float] = None
    first_run: bool = False  # the run that compiled the program (compile time not simulated)
    # Model parallelism: the measured cost of each shard or pipeline stage (a
    # ``cost_model.StageCost`` each; empty for a single-IPU program) and, for a pipeline, how its
    # stages were scheduled.  A sharded program without a pipeline runs its shards in turn.
    stages: tuple = ()
    pipeline: Optional[PipelineSettings] = None
    # Replication: bytes each replica all-reduces with the others per weight update (the
    # gradients of a CrossReplicaOptimizer), and how many iterations share one weight
    # update (a gradient accumulation optimizer's mini-batches).
    all_reduce_bytes: int = 0
    gradient_accumulation_count: int = 1
    # How the accumulated gradients are reduced (the SDK's ``GradientAccumulationReductionMethod``
    # name: "SUM", "MEAN", "RUNNING_MEAN"); a pipeline's is in ``pipeline``.
    gradient_accumulation_reduction: str = "SUM"
    # ``TF_POPLAR_FLAGS=--use_synthetic_data`` was set: the simulator leaves the data's host
    # transfers out (the bytes above stay what the program really moves).
    synthetic_data: bool = False
    # Elements this run enqueued to its busiest outfeed, where the emulator counts them (a TF2
    # function run by ``IPUStrategy``; None elsewhere).  ``iterations`` when every step sends
    # its result; fewer when the program sends once per run, after its loop.
    outfeed_enqueues: Optional[int] = None

    @property
    def weight_updates(self) -> int:
        """How many times this run changed the weights: a training pipeline once per pass;
        any other step with weight-update work (an optimizer's apply ops) once per
        ``gradient_accumulation_count`` iterations, as the simulator draws it; 0 when the
        step changes no weights (inference, or gradients only added up)."""
        if self.pipeline is not None:
            return self.pipeline.repeat_count if self.pipeline.training else 0
        work = (self.step_cost,) + tuple(self.stages)  # a sharded step: its shards' costs
        if not any(getattr(cost, "weight_update_flops", 0.0) > 0 for cost in work):
            return 0
        return self.iterations // max(1, self.gradient_accumulation_count)


@dataclass
class ProgramRecord:
    """All engine runs recorded while a recording was active, in execution order."""

    runs: List[EngineRun] = field(default_factory=list)

    def add(self, run: EngineRun) -> None:
        self.runs.append(run)

    @property
    def engine_runs(self) -> int:
        return len(self.runs)

    @property
    def iterations(self) -> int:
        return sum(run.iterations for run in self.runs)

    @property
    def host_seconds(self) -> float:
        return sum(run.host_seconds or 0.0 for run in self.runs)

    def simulate(self, target="ipu2", host=None, batch_size=None, title="",
                 synthetic_data=None):
        """The simulated IPU timeline of these runs: a convenience for
        ``ipu_emulator.sim.recorded_runs.simulate_record(self, ...)`` (which says what
        ``synthetic_data`` does).

        This module is data only and imports no simulator; the simulator registers itself
        here when it is imported (``import ipu_emulator`` does that).
        """
        if _simulator is None:
            raise RuntimeError("No simulator is loaded: import ipu_emulator.sim.recorded_runs.")
        return _simulator(self, target=target, host=host, batch_size=batch_size, title=title,
                          synthetic_data=synthetic_data)


# The function ``ProgramRecord.simulate`` calls (``recorded_runs.simulate_record``).
_simulator = None


def use_simulator(simulate_record) -> None:
    """Called by the simulator when it is imported (see ``ProgramRecord.simulate``)."""
    global _simulator
    _simulator = simulate_record


# --- collecting runs ------------------------------------------------------------------
#
# Every engine run is appended to a bounded history (so "the last run" is always at hand)
# and to every capture that is open, so a notebook can isolate the runs of one cell:
#
#     from ipu_emulator import record, views
#     with record.capture() as runs:
#         sess.run(train_one_epoch)
#     views.plot_timeline(runs.simulate())

import collections as _collections
import contextlib as _contextlib

HISTORY_LIMIT = 100_000
history: "_collections.deque[EngineRun]" = _collections.deque(maxlen=HISTORY_LIMIT)
_open_captures: List[ProgramRecord] = []


_listeners: list = []


def on_engine_run(listener) -> None:
    """Call ``listener(run)`` for every engine run from now on (the event trace's queue)."""
    _listeners.append(listener)


def add_engine_run(run: EngineRun) -> None:
    history.append(run)
    for capture_record in _open_captures:
        capture_record.add(run)
    for listener in _listeners:
        listener(run)


@_contextlib.contextmanager
def capture():
    """Collect the engine runs made inside the ``with`` block into a ``ProgramRecord``."""
    collected = ProgramRecord()
    _open_captures.append(collected)
    try:
        yield collected
    finally:
        _open_captures.remove(collected)


def last_runs(count: int = 1) -> ProgramRecord:
    """The most recent ``count`` engine runs, oldest first."""
    runs = list(history)[-count:] if count > 0 else []
    return ProgramRecord(runs=runs)
