"""Sharded and pipelined programs at run time: what each run records.

Every run is recorded with the cost of each shard or pipeline stage, measured from the ops
that belong to it (``complete_run``), so the simulator can draw the run's trace.  (The
compiler's checks on shards and pipeline counts are in ``first_run``.)
"""
from __future__ import annotations

import logging
import os
from dataclasses import replace

import tensorflow as tf

from ipu_emulator import record
from ipu_emulator.sim.cost_model import StageCost
from . import graph_costs, shards
from .programs import PipelineBuild, pipelines_of

_logger = logging.getLogger("ipu_emulator")

def check_session(session, programs) -> None:
    """A session made before the IPU system was configured has too few CPU devices for the
    program's IPUs; say so plainly instead of TensorFlow's placement error."""
    for program in programs:
        used = shards.program_shard_indices(program)
        if not used:
            continue
        needed = shards.cpu_offset(program.device_ordinal) + max(used) + 1
        available = shards.session_cpu_devices(session)
        if available < needed:
            raise tf.errors.FailedPreconditionError(
                None, None,
                "This session has %d CPU device(s), but the program runs on %d IPUs, each "
                "emulated by its own CPU device. Create the tf.Session after configuring the "
                "IPU system (ipu.config.IPUConfig().configure_ipu_system()), so that it gets "
                "one CPU device per IPU." % (available, needed))


# --- what a run records ----------------------------------------------------------------


def synthetic_data() -> bool:
    """``TF_POPLAR_FLAGS=--use_synthetic_data``: no data crosses the host link."""
    return "--use_synthetic_data" in os.environ.get("TF_POPLAR_FLAGS", "")


def complete_run(program, run: record.EngineRun) -> record.EngineRun:
    """Add the shard/stage costs (and pipeline settings) of ``program`` to ``run``."""
    if synthetic_data():
        run = replace(run, infeed_bytes_per_iteration=0, outfeed_bytes_per_iteration=0)
    builds = pipelines_of(program)
    used = shards.program_shard_indices(program)
    if not builds and not used:
        return run
    cached = getattr(program, "_ipu_emulator_stages", None)
    if cached is None:
        cached = (_pipeline_stages(program, builds[0]) if builds
                  else _shard_stages(program, shards.num_shards(program)))
        program._ipu_emulator_stages = cached  # pylint: disable=protected-access
    stages = cached
    if synthetic_data():
        stages = (replace(stages[0], input_bytes=0),) + tuple(stages[1:])
    num_shards = shards.num_shards(program)
    return replace(run, stages=stages, pipeline=builds[0].settings if builds else None,
                   num_ipus=num_shards * max(1, run.replicas))


def _stage_cost(name, ops, input_bytes, output_bytes) -> StageCost:
    cost = graph_costs.program_cost(ops) if ops else record.ComputeCost()
    phase_bytes = cost.phase_bytes or (cost.bytes_accessed, 0.0, 0.0)
    return StageCost(
        name=name, forward_flops=cost.forward_flops, backward_flops=cost.backward_flops,
        weight_update_flops=cost.weight_update_flops, forward_bytes_accessed=phase_bytes[0],
        backward_bytes_accessed=phase_bytes[1], parameter_bytes=cost.parameter_bytes,
        activation_bytes=cost.activation_bytes, input_bytes=int(input_bytes),
        output_bytes=int(output_bytes), op_cycles=cost.phase_op_cycles or (0.0, 0.0, 0.0))


def _infeed_bytes(program) -> int:
    return sum(f.element_bytes() for f in program.infeeds)


def _shard_stages(program, num_shards):
    """One StageCost per shard; tensors crossing from a shard to a later one are its output."""
    groups = shards.shard_ops(program)
    shard_of_op = {op.name: shard for shard, ops in groups.items() for op in ops}
    crossing = [0] * num_shards
    for shard, ops in groups.items():
        for op in ops:
            if graph_costs.phase_of(op) != "forward":
                continue
            for tensor in op.inputs:
                source = shard_of_op.get(tensor.op.name)
                if source is not None and source < shard and source < num_shards:
                    crossing[source] += graph_costs.tensor_bytes(tensor)
    stages = []
    for shard in range(num_shards):
        input_bytes = _infeed_bytes(program) if shard == 0 else crossing[shard - 1]
        stages.append(_stage_cost("shard%d" % shard, groups.get(shard, []), input_bytes,
                                  crossing[shard]))
    return tuple(stages)


def _pipeline_stages(program, build: PipelineBuild):
    count = len(build.settings.device_mapping)
    groups = {k: [] for k in range(count)}
    other_replicas = program.other_replica_ops  # the stages' cost is one replica's
    for op in program.new_ops:
        if op not in other_replicas:
            groups[build.stage_of_op.get(op.name, 0)].append(op)
    stages = []
    for k in range(count):
        input_bytes = build.stage_input_bytes[k] + (_infeed_bytes(program) if k == 0 else 0)
        stage = _stage_cost("stage%d" % k, groups[k], input_bytes, build.stage_output_bytes[k])
        # Weights and optimizer state apart, so offloading the state shows in the trace.
        weights, state = graph_costs.variable_bytes_by_role(groups[k], build.buffer_handles)
        stages.append(replace(stage, parameter_bytes=weights, optimizer_state_bytes=state))
    return tuple(stages)


__all__ = ["check_session", "complete_run", "synthetic_data"]
