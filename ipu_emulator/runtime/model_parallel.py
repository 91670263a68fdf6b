"""Sharded and pipelined programs at run time: what each run records.

Every run is recorded with the cost of each shard or pipeline stage, measured from the ops
that belong to it (``run_fields``), so the simulator can draw the run's trace.  (The
compiler's checks on shards and pipeline counts are in ``first_run``.)
"""
from __future__ import annotations

import logging
import os
import tensorflow as tf

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
    """``TF_POPLAR_FLAGS=--use_synthetic_data``: the run is recorded with this flag, and the
    simulator leaves the data's host transfers out (``recorded_runs``)."""
    return "--use_synthetic_data" in os.environ.get("TF_POPLAR_FLAGS", "")


def run_fields(program) -> dict:
    """What an engine run of ``program`` records besides its single-IPU cost: the cost of
    each shard or pipeline stage (measured once per program), the pipeline's settings and
    the IPUs it occupies; and whether its data was synthetic."""
    fields = {"synthetic_data": synthetic_data()}
    builds = pipelines_of(program)
    if not builds and not shards.program_shard_indices(program):
        return fields
    stages = getattr(program, "_ipu_emulator_stages", None)
    if stages is None:
        stages = (_pipeline_stages(program, builds[0]) if builds
                  else _shard_stages(program, shards.num_shards(program)))
        program._ipu_emulator_stages = stages  # pylint: disable=protected-access
    fields.update(stages=stages, pipeline=builds[0].settings if builds else None,
                  num_ipus=shards.num_shards(program) * max(1, program.replication_factor))
    return fields


def _stage_cost(name, work, input_bytes, output_bytes, **fields) -> StageCost:
    """A ``StageCost`` from one unit's ``graph_costs.UnitWork``."""
    return StageCost(
        name=name, forward_flops=work.flops[0], backward_flops=work.flops[1],
        weight_update_flops=work.flops[2], forward_bytes_accessed=work.traffic[0],
        backward_bytes_accessed=work.traffic[1], activation_bytes=work.kept_bytes,
        input_bytes=int(input_bytes), output_bytes=int(output_bytes),
        op_cycles=tuple(work.cycles), half_flops=tuple(work.half_flops), **fields)


def _infeed_bytes(program) -> int:
    return sum(f.element_bytes() for f in program.infeeds)


def _one_replica_ops(program):
    other_replicas = program.other_replica_ops  # the stages' cost is one replica's
    return [op for op in program.new_ops if op not in other_replicas]


def _shard_stages(program, num_shards):
    """One StageCost per shard, with the tensors each reads from the other shards: the
    forward activations, and wherever the backward ops of a shard's layers run on another
    shard (the SDK places ops in the shard of the scope they are built in), the activations
    and weights they read and the gradients they hand back."""
    groups = shards.shard_ops(program)
    shard_of_op = {op.name: shard for shard, ops in groups.items() for op in ops}
    ops = _one_replica_ops(program)
    units = graph_costs.walk(graph_costs.loop_step_ops(ops),
                             unit_of=lambda op: shard_of_op.get(op.name, 0),
                             outputs=program.output_tensors)
    empty = graph_costs.UnitWork()
    forward_in = [sum(nbytes for (phase, _), (nbytes, _) in units.get(k, empty).reads.items()
                      if phase == "forward") for k in range(num_shards)]
    stages = []
    for shard in range(num_shards):
        work = units.get(shard, empty)
        sent = sum(nbytes for k in range(num_shards) if k != shard
                   for (phase, source), (nbytes, _) in units.get(k, empty).reads.items()
                   if phase == "forward" and source == shard)
        reads = tuple(sorted((phase, source, int(nbytes), count)
                             for (phase, source), (nbytes, count) in work.reads.items()))
        input_bytes = _infeed_bytes(program) + forward_in[0] if shard == 0 else forward_in[shard]
        stages.append(_stage_cost(
            "shard%d" % shard, work, input_bytes, sent, reads=reads,
            parameter_bytes=graph_costs.parameter_bytes(groups.get(shard, []))))
    return tuple(stages)


def _pipeline_stages(program, build: PipelineBuild):
    count = len(build.settings.device_mapping)
    ops = _one_replica_ops(program)
    units = graph_costs.walk(graph_costs.loop_step_ops(ops),
                             unit_of=lambda op: build.stage_of_op.get(op.name, 0),
                             outputs=program.output_tensors)
    stages = []
    for k in range(count):
        input_bytes = build.stage_input_bytes[k] + (_infeed_bytes(program) if k == 0 else 0)
        group = [op for op in ops if build.stage_of_op.get(op.name, 0) == k]
        # Weights and optimizer state apart, so offloading the state shows in the trace.
        weights, state = graph_costs.variable_bytes_by_role(group, build.buffer_handles)
        stages.append(_stage_cost("stage%d" % k, units.get(k, graph_costs.UnitWork()),
                                  input_bytes, build.stage_output_bytes[k],
                                  parameter_bytes=weights, optimizer_state_bytes=state))
    return tuple(stages)


__all__ = ["check_session", "run_fields", "synthetic_data"]
