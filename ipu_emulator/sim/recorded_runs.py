"""Simulated traces of recorded runs of sharded and pipelined programs.

A recorded ``EngineRun`` of a multi-IPU program carries one ``cost_model.StageCost`` per shard or
pipeline stage, measured from the TensorFlow graph that really ran.  This module feeds them
to the pipeline simulator, so the trace of a run is the trace of *that* program:

* a sharded program (``ipu_shard``, no pipeline) runs its shards in turn: Graphcore's
  ``Sequential`` schedule with one micro-batch per loop iteration and a weight update after
  each (one IPU busy at a time);
* a pipelined program runs the schedule it asked for (``PipelineSchedule``), with its
  gradient accumulation count, repeat count and device mapping.

Several engine runs are simulated one after another and joined on one clock.  Single-IPU
runs go through ``timeline.simulate_engine_runs`` as before.

    with record.capture() as runs:
        sess.run(pipelined_training)
    timeline = runs.simulate()                      # or record.last_runs(1).simulate()
    views.plot_timeline(timeline)
    views.save_chrome_trace(timeline, "pipeline.json")   # open in ui.perfetto.dev

Pure Python: no TensorFlow import.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Optional, Sequence, Union

from ipu_emulator import record
from ipu_emulator.sim import pipeline_simulator
from ipu_emulator.sim.hardware import HostModel, IPUTarget, get_target
from ipu_emulator.record import EngineRun
from ipu_emulator.sim.timeline import (HOST_LANE, Metrics, Timeline, ipu_lane, simulate_engine_runs,
                                      timeline_metrics)


def synthetic_by_default(run: EngineRun) -> bool:
    """Pipelined and replicated runs are shown with synthetic data unless asked otherwise,
    as Graphcore profiled them (``TF_POPLAR_FLAGS=--use_synthetic_data``): their lesson is
    the IPUs' work and exchanges, which the data feed's copies would bury."""
    return run.pipeline is not None or run.replicas > 1


def uses_synthetic_data(run: EngineRun, asked: Optional[bool] = None) -> bool:
    """Whether ``run`` is simulated without its data's host transfers: as ``asked``; else
    when it ran with ``TF_POPLAR_FLAGS=--use_synthetic_data`` (``run.synthetic_data``) or
    is pipelined or replicated (``synthetic_by_default``).  The one place this is decided:
    the record keeps the bytes the program really moves."""
    if asked is not None:
        return asked
    return run.synthetic_data or synthetic_by_default(run)


def simulate_run(run: EngineRun, target: Union[str, IPUTarget] = "ipu2",
                 host: Optional[HostModel] = None,
                 batch_size: Optional[int] = None,
                 synthetic_data: Optional[bool] = None) -> Timeline:
    """The simulated timeline of one engine run (sharded, pipelined or single-IPU).

    ``synthetic_data`` leaves out the data's host transfers (``None``: as
    ``uses_synthetic_data`` decides)."""
    synthetic_data = uses_synthetic_data(run, synthetic_data)
    if synthetic_data:
        run = _without_data(run)
    if not run.stages or run.iterations == 0:
        return simulate_engine_runs([replace(run, stages=(), pipeline=None)], target=target,
                                    host=host, batch_size=batch_size)
    stages = list(run.stages)
    settings = run.pipeline
    if settings is None:
        # Sharding: every loop iteration passes one batch through the shards in turn.
        training = any(s.backward_flops > 0 or s.weight_update_flops > 0 for s in stages)
        if run.infeed_bytes_per_iteration == 0 and run.input_bytes > 0 and run.iterations == 1:
            stages[0] = replace(stages[0], input_bytes=stages[0].input_bytes + run.input_bytes)
        # A gradient accumulation optimizer defers the weight update to every k-th step:
        # k micro-batches per pass of the Sequential schedule (the loop check guarantees
        # that k divides the iterations; otherwise the run never reached the device).
        accumulated = max(1, run.gradient_accumulation_count)
        if run.iterations % accumulated:
            accumulated = 1
        return pipeline_simulator.simulate_pipeline(
            stages, "sequential", gradient_accumulation_count=accumulated,
            repeat_count=run.iterations // accumulated, replicas=max(1, run.replicas),
            target=target,
            host=host, batch_size=batch_size, training=training, synthetic_data=synthetic_data,
            # Only the copies the program makes: its outfeed's enqueued bytes, none without one.
            fifos=False, outfeed_bytes=run.outfeed_bytes_per_iteration,
            title=f"sharded over {len(stages)} IPUs: {run.iterations} step"
                  f"{'s' if run.iterations != 1 else ''}"
                  f"{', synthetic data' if synthetic_data else ''}")
    gac = settings.gradient_accumulation_count
    repeat_count = settings.repeat_count
    if gac * repeat_count != run.iterations and repeat_count > 0:
        # A count given as a tensor is only known from the run: micro-batches / passes.
        gac = max(1, run.iterations // repeat_count)
    return pipeline_simulator.simulate_pipeline(
        stages, settings.schedule, gradient_accumulation_count=gac,
        repeat_count=max(1, repeat_count), replicas=max(1, run.replicas), target=target,
        host=host, batch_size=batch_size, device_mapping=list(settings.device_mapping),
        training=settings.training, recompute=settings.recompute,
        offload_weights=settings.offload_weights,
        offload_activations=settings.offload_activations,
        accumulation_dtype_bytes=settings.accumulation_dtype_bytes, synthetic_data=synthetic_data)


def simulate_runs(runs: Sequence[EngineRun], target: Union[str, IPUTarget] = "ipu2",
                  host: Optional[HostModel] = None, batch_size: Optional[int] = None,
                  title: str = "", synthetic_data: Optional[bool] = None) -> Timeline:
    """The simulated timeline of ``runs`` executed one after another."""
    target = get_target(target)
    timelines = [simulate_run(run, target, host, batch_size, synthetic_data) for run in runs]
    if len(timelines) == 1:
        only = timelines[0]
        return replace(only, title=title or only.title,
                       engine_run_spans=[(0.0, only.metrics.makespan)])
    return join_timelines(timelines, title=title or f"{len(runs)} engine runs")


def simulate_record(program_record: record.ProgramRecord, target: Union[str, IPUTarget] = "ipu2",
                    host: Optional[HostModel] = None, batch_size: Optional[int] = None,
                    title: str = "", synthetic_data: Optional[bool] = None) -> Timeline:
    """The simulated IPU timeline of a recording (``ProgramRecord.simulate`` calls this).

    Runs of sharded or pipelined programs are simulated stage by stage with their measured
    stage costs: shards take turns, pipeline stages follow the program's schedule.  Runs of
    one-IPU programs go to ``timeline.simulate_engine_runs``.  ``synthetic_data``: leave out
    the data's host transfers; by default (``None``) as ``uses_synthetic_data`` decides;
    the title then says ", synthetic data".
    """
    runs = program_record.runs
    synthetic = [uses_synthetic_data(run, synthetic_data) for run in runs]
    if any(run.stages for run in runs):
        timeline = simulate_runs(runs, target=target, host=host, batch_size=batch_size,
                                 title=title, synthetic_data=synthetic_data)
    else:
        runs = [_without_data(run) if leave_out else run
                for run, leave_out in zip(runs, synthetic)]
        timeline = simulate_engine_runs(runs, target=target, host=host, batch_size=batch_size,
                                        title=title)
    if any(synthetic) and "synthetic data" not in timeline.title:
        timeline = replace(timeline, title=f"{timeline.title}, synthetic data")
    return timeline


def _without_data(run: EngineRun) -> EngineRun:
    """The run with synthetic data: nothing crosses the host link."""
    return replace(run, infeed_bytes_per_iteration=0, outfeed_bytes_per_iteration=0,
                   input_bytes=0, output_bytes=0)


record.use_simulator(simulate_record)


def total_makespan(runs: Sequence[EngineRun], target: Union[str, IPUTarget] = "ipu2",
                   host: Optional[HostModel] = None) -> float:
    """Simulated seconds of ``runs`` one after another, without building the joined
    timeline: runs that differ only in host wall time are simulated once (a long training
    script repeats the same engine run hundreds of times)."""
    target = get_target(target)
    seconds = {}
    total = 0.0
    for run in runs:
        key = replace(run, host_seconds=None, first_run=False)
        if key not in seconds:
            seconds[key] = simulate_run(key, target, host).metrics.makespan
        total += seconds[key]
    return total


def _shifted(timeline: Timeline, offset: float, engine_run: int):
    events = [replace(e, start=e.start + offset, end=e.end + offset, engine_run=engine_run)
              for e in timeline.events]
    counters = [replace(c, time=c.time + offset) for c in timeline.counters]
    flows = [replace(f, from_time=f.from_time + offset, to_time=f.to_time + offset)
             for f in timeline.flows]
    phases = [(name, start + offset, end + offset) for name, start, end in timeline.phases]
    return events, counters, flows, phases


def join_timelines(timelines: Sequence[Timeline], title: str = "") -> Timeline:
    """Timelines of consecutive engine runs on one clock, each starting when the last ended.

    Metrics are recomputed over the whole span; peaks (memory, micro-batches in flight) are
    the largest of any run.
    """
    if not timelines:
        return Timeline(events=[], lanes=[HOST_LANE], title=title)
    num_ipus = max(len(t.ipu_lanes) for t in timelines)
    lanes = [HOST_LANE] + [ipu_lane(i) for i in range(num_ipus)]
    events, counters, flows, phases, spans = [], [], [], [], []
    offset = 0.0
    for index, timeline in enumerate(timelines):
        shifted = _shifted(timeline, offset, index)
        events += shifted[0]
        counters += shifted[1]
        flows += shifted[2]
        phases += shifted[3]
        end = offset + timeline.metrics.makespan
        spans.append((offset, end))
        offset = end
    return Timeline(events=events, lanes=lanes, metrics=_joined_metrics(timelines, events, offset),
                    title=title, clock=timelines[0].clock, engine_run_spans=spans,
                    counters=counters, flows=flows, phases=phases)


def _joined_metrics(timelines: Sequence[Timeline], events, makespan: float) -> Metrics:
    def peak(attribute):
        merged = {}
        for t in timelines:
            for ipu, value in getattr(t.metrics, attribute).items():
                merged[ipu] = max(merged.get(ipu, value), value)
        return merged

    samples = [t.metrics.samples for t in timelines]
    # The lanes span the widest run, so an IPU no run used would count as idle: report only
    # the IPUs that did something, in the order they first did it.
    ipus = dict.fromkeys(e.ipu for e in events if e.ipu is not None)
    return timeline_metrics(
        events, ipus, makespan=makespan,
        engine_runs=sum(max(1, t.metrics.engine_runs) for t in timelines),
        iterations=sum(t.metrics.iterations for t in timelines),
        samples=sum(samples) if all(s is not None for s in samples) else None,
        peak_memory_bytes=peak("peak_memory_bytes"), out_of_memory=peak("out_of_memory"),
        peak_in_flight=peak("peak_in_flight"), clock=timelines[0].metrics.clock,
        effective_batch_size=timelines[-1].metrics.effective_batch_size,
        out_of_memory_messages=sorted({m for t in timelines
                                       for m in t.metrics.out_of_memory_messages}),
    )


__all__ = ["simulate_run", "simulate_runs", "join_timelines", "total_makespan"]
