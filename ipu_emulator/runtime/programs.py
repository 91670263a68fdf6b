"""Compiled programs and the registry that lets ``Session.run`` recognise them.

``ipu_compiler.compile`` builds the computation into the ordinary TensorFlow graph (so the
numerics are real) and registers a ``CompiledProgram``: the tensors/op it returned, the
outermost on-device loops (whose trip counters are fetched alongside the results), the
infeed it dequeues and the outfeeds it enqueues.  The session hook looks fetches up in the
per-graph ``GraphRegistry`` and treats each run of a program as one engine run.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import tensorflow as tf


@dataclass
class CompiledProgram:
    name: str
    graph: tf.Graph
    device_ordinal: int
    new_ops: List[tf.Operation] = field(default_factory=list)
    input_tensors: List[tf.Tensor] = field(default_factory=list)
    output_tensors: List[tf.Tensor] = field(default_factory=list)
    trip_counters: List[tf.Tensor] = field(default_factory=list)
    infeeds: list = field(default_factory=list)
    outfeeds: list = field(default_factory=list)
    outfeeds_in_loop: set = field(default_factory=set)
    loop_depth: int = 0
    _cost: object = None
    runs_by_session: Dict[int, int] = field(default_factory=dict)
    # Replication (runtime/replication.py): IPUs of the device the program was built for,
    # how many copies it runs as, and the ops of the copies other than replica 0 (not part
    # of the per-replica cost).  ``all_reduce_bytes``: what one replica all-reduces per step.
    num_ipus: int = 1
    replication_factor: int = 1
    other_replica_ops: set = field(default_factory=set)
    all_reduce_bytes: int = 0
    replication_errors: list = field(default_factory=list)
    # Built before the system was configured, with the replicas its feeds declared (SDK
    # 2.0 and earlier): checked against the device at the first run, never rebuilt.
    replicas_from_feeds: bool = False
    # Compiling at the first run (late_compile.py): ``rebuild`` builds the same computation
    # again for the device as configured now and returns (program, {old fetch name: new
    # fetch}); ``replaced_by`` is that program.  A late build's replica copies, and any
    # variable it made anew, are initialised once per session by ``late_initializers``.
    rebuild: object = None
    cpu_offset: int = 0  # first CPU device its IPUs were placed on (shards.cpu_offset)
    replaced_by: object = None
    late_copies: list = field(default_factory=list)
    late_initializers: list = field(default_factory=list)
    # Gradient accumulation optimizers: mini-batches per weight update, and for the
    # compile-time check (num_mini_batches, inside a loop?, loop's static iteration count).
    gradient_accumulation_count: int = 1
    gradient_accumulation_reduction: str = "SUM"   # their reduction method's name
    gradient_accumulation_checks: list = field(default_factory=list)
    loop_iterations: list = field(default_factory=list)

    def cost(self):
        """Per-iteration compute cost of one replica, measured once from the graph and cached."""
        if self._cost is None:
            from . import graph_costs
            ops = [op for op in self.new_ops if op not in self.other_replica_ops]
            self._cost = graph_costs.program_cost(ops, outputs=self.output_tensors)
        return self._cost


class GraphRegistry:
    """Per-graph lookup tables from TensorFlow names to emulator objects."""

    def __init__(self):
        self.program_by_fetch: Dict[str, CompiledProgram] = {}
        self.infeed_by_initializer: Dict[str, object] = {}
        self.outfeed_by_dequeue: Dict[str, object] = {}
        self.infeed_by_deleter: Dict[str, object] = {}
        # Fetches of programs compiled again at their first run -> what replaced them.
        self.replaced_fetches: Dict[str, object] = {}

    def is_empty(self) -> bool:
        return not (self.program_by_fetch or self.infeed_by_initializer
                    or self.outfeed_by_dequeue or self.infeed_by_deleter)


# --- pipelines built into programs -------------------------------------------------------

# Pipelines built into each program (by program name): ``pipelining_ops`` registers them.
_pipelines: Dict[str, List["PipelineBuild"]] = {}


class PipelineBuild:
    """What ``pipelining_ops.pipeline`` built: its settings and which ops form each stage."""

    def __init__(self, settings, stage_of_op, stage_output_bytes, stage_input_bytes,
                 gac_is_static, buffer_handles=()):
        self.settings = settings  # record.PipelineSettings
        self.stage_of_op = stage_of_op  # op name -> stage index
        self.stage_output_bytes = stage_output_bytes
        self.stage_input_bytes = stage_input_bytes
        self.gac_is_static = gac_is_static
        # VarHandleOp names of the pipeline's own buffers (gradient and outfeed
        # accumulators): the simulator sizes the accumulators from the settings instead.
        self.buffer_handles = frozenset(buffer_handles)


def register_pipeline(program, build: PipelineBuild) -> None:
    _pipelines.setdefault(program.name, []).append(build)


def pipelines_of(program) -> List[PipelineBuild]:
    return _pipelines.get(program.name, [])


_REGISTRY_ATTR = "_ipu_emulator_registry"


def registry(graph: tf.Graph) -> GraphRegistry:
    reg = getattr(graph, _REGISTRY_ATTR, None)
    if reg is None:
        reg = GraphRegistry()
        setattr(graph, _REGISTRY_ATTR, reg)
    return reg


def existing_registry(graph) -> Optional[GraphRegistry]:
    return getattr(graph, _REGISTRY_ATTR, None)


# The program being built right now (compile() may not nest, but be tidy about threads).
_building = threading.local()


def current_program() -> Optional[CompiledProgram]:
    return getattr(_building, "program", None)


@contextlib.contextmanager
def building(program: CompiledProgram):
    previous = current_program()
    _building.program = program
    try:
        yield program
    finally:
        _building.program = previous


@contextlib.contextmanager
def loop_body(iterations=None):
    """Marks that we are inside an on-device loop body of the program being built;
    ``iterations`` is the loop's trip count when it is known statically."""
    program = current_program()
    if program is not None:
        program.loop_depth += 1
        program.loop_iterations.append(iterations)
    try:
        yield
    finally:
        if program is not None:
            program.loop_depth -= 1
            program.loop_iterations.pop()


def current_loop_iterations():
    """Static trip count of the innermost loop being built (None: unknown or no loop)."""
    program = current_program()
    if program is None or not program.loop_iterations:
        return None
    return program.loop_iterations[-1]


def inside_loop() -> bool:
    program = current_program()
    return program is not None and program.loop_depth > 0


_program_count = [0]


def new_program_name() -> str:
    _program_count[0] += 1
    return "program_%d" % _program_count[0]
