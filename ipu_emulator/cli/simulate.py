"""``python -m ipu_emulator simulate``: simulate a pipeline schedule without TensorFlow.

Identical stages (one unit of work each)::

    python -m ipu_emulator simulate --stages 4 --micro-batches 8 --schedule interleaved --unit-cost

The pipelining tutorial's model, cut into stages at ``--splits`` (each names the first layer
of the next stage, as in the tutorial's step 4), timed on an IPU target::

    python -m ipu_emulator simulate --model tutorial-mlp --splits dense128 dense32 \\
        --batch-size 32 --gradient-accumulation-count 24 --repeat-count 2 --replicas 2 \\
        --ipu-version ipu2 --schedule grouped --perfetto pipeline.json

Without ``--json`` it prints the schedule (when small) and a summary table; with ``--json``
one JSON object: ``schedule``, ``events`` (``ipu``, ``stage``, ``kind``, ``micro_batch`` or
null, ``start``, ``end``, ...), ``phases`` and ``metrics`` (``makespan``, ``bubble_fraction``,
and per IPU -- keyed by IPU number -- ``utilisation``, ``peak_in_flight``,
``peak_memory_bytes``; ``samples_per_second`` when a model gives the batch size).  Times are
simulated IPU seconds, or time steps with ``--unit-cost``.  A configuration the SDK would
reject exits with status 1 and its message on stderr; so does a size below 1 (``--stages 0``).

Requests are bounded: the number of events is estimated from the sizes before anything is
built, and a request above ``MAX_EVENTS`` (1,000,000 events: about 10 s here, 30 s with
``--json``) is refused with the estimate and its likely run time.  Use fewer stages,
micro-batches, repeats or replicas.

Schedules: grouped, interleaved, sequential (Graphcore's), gpipe, 1f1b, interleaved-1f1b,
zero-bubble (for comparison).  No TensorFlow is imported.
"""
from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import List, Optional

from ipu_emulator import views
from ipu_emulator.sim import (builtin_models, cost_model, pipeline_simulator, schedule_actions,
                              schedule_rules, schedules)
from ipu_emulator.sim.hardware import TARGETS
from ipu_emulator.sim.schedule_actions import InvalidScheduleError
from ipu_emulator.sim.schedule_rules import PipelineConfigurationError

DEFAULT_STAGES = 4
# The pipelining tutorial's defaults: --batches-to-accumulate 16, --batch-size 32.
DEFAULT_MICRO_BATCHES = 16
DEFAULT_BATCH_SIZE = 32
ACCUMULATION_DTYPES = {"float32": 4, "float16": 2}
# Above this many micro-batches the printed schedule grid would be too wide to read.
MAX_PRINTED_MICRO_BATCHES = 16

# The largest request simulated, in events (timeline entries: each forward, backward,
# recompute and weight update on each replica's IPU, plus syncs, exchanges and stream copies
# without --unit-cost).  Measured on the 2-core development machine: the simulation and the
# summary run at about 100,000 events/s at this size (150,000 on small runs), and --json,
# --perfetto and --plot each add 13 to 19 us per event.  So a run at the limit takes about
# 10 s and 0.5 GB (30 s and 1 GB with --json): larger requests, which would run for minutes
# without a word, are refused before anything is built.
MAX_EVENTS = 1_000_000
SECONDS_PER_EVENT = 1e-5             # simulate + summary, measured at about 1,000,000 events
SECONDS_PER_EVENT_WRITTEN = 1.7e-5   # each of --json, --perfetto and --plot
LIMIT_HELP = (f"A request is refused if it would simulate more than MAX_EVENTS = {MAX_EVENTS:,} "
              "events (about stages x micro-batches x repeats x replicas x the actions and "
              "copies of each), estimated before anything is built.")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    shape = parser.add_argument_group("pipeline", description=textwrap.fill(LIMIT_HELP, 78))
    shape.add_argument("--schedule", default="grouped", metavar="NAME",
                       help="one of: " + ", ".join(schedule_rules.SCHEDULE_NAMES)
                       + " (default grouped)")
    shape.add_argument("--stages", type=int, default=None, metavar="S",
                       help=f"number of identical unit stages (default {DEFAULT_STAGES}; "
                            "with --model: the splits decide, and S must agree)")
    data = shape.add_mutually_exclusive_group()
    data.add_argument("--synthetic-data", dest="synthetic_data", action="store_const",
                      const=True, default=None,
                      help="no host transfers of the data, as TF_POPLAR_FLAGS="
                           "--use_synthetic_data asks of the SDK (the default for pipelines "
                           "and replicas, as Graphcore profiled them)")
    data.add_argument("--host-data", dest="synthetic_data", action="store_const", const=False,
                      help="the data's host transfers (the default for one IPU)")
    shape.add_argument("--micro-batches", "--gradient-accumulation-count", dest="micro_batches",
                       type=int, default=DEFAULT_MICRO_BATCHES, metavar="M",
                       action=_StoreNamingTheFlag,
                       help="micro-batches per pipeline pass = gradient accumulation count "
                            f"(default {DEFAULT_MICRO_BATCHES})")
    shape.add_argument("--repeat-count", type=int, default=1, metavar="R",
                       help="pipeline passes per engine run (default 1)")
    shape.add_argument("--replicas", type=int, default=1, metavar="N",
                       help="data-parallel replicas of the pipeline (default 1)")
    shape.add_argument("--device-mapping", type=int, nargs="+", default=None, metavar="IPU",
                       help="IPU of each stage (default: stage k on IPU k)")
    shape.add_argument("--stages-per-ipu", type=int, default=2, metavar="V",
                       help="virtual stages per IPU for interleaved-1f1b (default 2)")
    shape.add_argument("--inference", action="store_true",
                       help="forward passes only (no backward, no weight update)")
    shape.add_argument("--recompute", action="store_true",
                       help="recompute each stage's forward just before its backward")
    shape.add_argument("--offload-weights", action="store_true",
                       help="keep optimizer state in streaming memory (loaded for the update)")
    shape.add_argument("--offload-activations", action="store_true",
                       help="keep in-flight activations in streaming memory")
    shape.add_argument("--accumulation-dtype", choices=sorted(ACCUMULATION_DTYPES),
                       default="float32", help="gradient accumulator type (default float32)")

    model = parser.add_argument_group("model (instead of identical stages)")
    model.add_argument("--model", choices=sorted(builtin_models.MODELS), default=None,
                       help="a built-in model: one stage on one IPU (gradient accumulation "
                            "over the micro-batches), or cut into stages at --splits")
    model.add_argument("--splits", nargs="+", default=None, metavar="LAYER",
                       help="first layer of each next stage, e.g. dense32 (the tutorial's "
                            f"step 3: {' '.join(builtin_models.TUTORIAL_MLP_SPLITS)})")
    model.add_argument("--sharded", action="store_true",
                       help="run the shards cut at --splits in turn, as ipu_shard scopes do "
                            "(the tutorial's step 2), not as a pipeline: gradients are "
                            "computed in the last shard, where minimize is built")
    model.add_argument("--colocate-gradients", action="store_true",
                       help="with --sharded: each gradient runs with its forward op, as "
                            "minimize(colocate_gradients_with_ops=True) asks")
    model.add_argument("--batch-size", type=int, default=None, metavar="B",
                       help=f"micro-batch size (default {DEFAULT_BATCH_SIZE} with --model)")
    model.add_argument("--optimizer", choices=sorted(cost_model.OPTIMIZERS), default="sgd",
                       help="optimizer of the model (default sgd, as in the tutorial)")

    timing = parser.add_argument_group("timing and output")
    timing.add_argument("--ipu-version", choices=sorted(TARGETS), default="ipu2",
                        help="IPU target (default ipu2)")
    timing.add_argument("--unit-cost", action="store_true",
                        help="every forward/backward takes one time step; nothing else costs")
    timing.add_argument("--backward-ratio", type=float, default=None, metavar="X",
                        help="with --unit-cost: a backward takes X time steps (default 1, as "
                             "Graphcore's diagrams draw it; about 2 on real models)")
    timing.add_argument("--json", action="store_true", help="print one JSON object")
    timing.add_argument("--perfetto", metavar="FILE", default=None,
                        help="write the trace as Chrome-trace JSON (open in ui.perfetto.dev)")
    timing.add_argument("--plot", metavar="FILE", default=None,
                        help="save the matplotlib execution trace (e.g. trace.png)")


class _StoreNamingTheFlag(argparse.Action):
    """Store the value, and which of the option's names was typed (``micro_batches_flag``),
    so an error names the flag the user wrote."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        setattr(namespace, self.dest + "_flag", option_string)


class RequestTooLargeError(ValueError):
    """A request estimated above ``MAX_EVENTS`` simulated events."""


def check_sizes(options) -> None:
    """Every size must be at least 1; the message names the flag as typed."""
    sizes = [
        ("--stages", options.stages),
        (getattr(options, "micro_batches_flag", None) or "--micro-batches", options.micro_batches),
        ("--repeat-count", options.repeat_count),
        ("--replicas", options.replicas),
        ("--batch-size", options.batch_size),
        ("--stages-per-ipu", options.stages_per_ipu),
    ]
    for flag, value in sizes:
        if value is not None and value < 1:
            raise ValueError(f"{flag} must be at least 1, got {value}.")
    ratio = options.backward_ratio
    if ratio is not None and not ratio > 0:
        raise ValueError(f"--backward-ratio must be above 0, got {ratio:g}.")
    if ratio is not None and not options.unit_cost:
        raise ValueError("--backward-ratio needs --unit-cost: with real costs the model's "
                         "FLOPs and ops set how long a backward pass takes.")


def _is_pipeline(options) -> bool:
    return options.model is None or bool(options.splits)


def uses_synthetic_data(options) -> bool:
    """``--synthetic-data`` or ``--host-data`` as given; else synthetic for pipelines and
    replicas (their lesson is the IPUs' work, which the feed's copies would bury), as
    recorded runs are simulated (``recorded_runs.synthetic_by_default``)."""
    if options.synthetic_data is not None:
        return options.synthetic_data
    return _is_pipeline(options) or options.replicas > 1


def _stage_count(options) -> int:
    """The number of stages, without building them (a model has one more than its splits)."""
    if options.model is not None:
        return len(options.splits) + 1 if options.splits else 1
    return options.stages if options.stages is not None else DEFAULT_STAGES


def estimate_events(options) -> int:
    """About how many events (``len(timeline.events)``) ``simulate(options)`` makes, from the
    sizes alone: nothing is built.  Within a factor of 1.5 of the real count (see
    ``tests/cli/test_simulate.py``)."""
    stages, micro_batches = _stage_count(options), options.micro_batches
    training = not options.inference
    name = "single-ipu"
    if _is_pipeline(options):
        try:
            name = schedule_rules.normalise_schedule_name(options.schedule)
        except PipelineConfigurationError:
            name = "grouped"  # the SDK's message for the name comes when the schedule is built
    forward_backward = stages * micro_batches * (2 if training else 1)
    events = forward_backward
    if training:
        events += stages  # weight updates
        # An R before each backward but where the IPU has just run that forward (the last
        # stage; every stage in Sequential and on one IPU).
        if options.recompute and name not in ("sequential", "single-ipu"):
            events += (stages - 1) * micro_batches
        if name == "zero-bubble":
            events += stages * micro_batches  # the W half of each backward
    if not options.unit_cost:
        model = options.model is not None
        # Host copies: the infeed (a model's data) and the outfeed (the loss when training).
        feeds = 0 if uses_synthetic_data(options) else micro_batches * (model + training)
        # Stage outputs crossing IPUs (unit stages have none).
        exchanges = (stages - 1) * micro_batches * (2 if training else 1) if model else 0
        if name == "grouped":    # a sync before each step on each IPU that works in it
            syncs = stages * micro_batches + (stages * stages if training else 0)
        elif name in ("interleaved", "sequential"):  # one action per IPU and step
            syncs = forward_backward + (stages if training else 0)
            if name == "sequential":  # the step after an exchange syncs its two IPUs
                syncs += exchanges
        else:                    # asynchronous: a sync before each host copy
            syncs = feeds
        offloads = (2 * stages * micro_batches
                    if model and training and options.offload_activations else 0)
        events += feeds + syncs + exchanges + offloads
    host = 0 if options.unit_cost else 1  # the engine run's launch, on the host's lane
    return events * options.repeat_count * options.replicas + host


def estimated_seconds(events: int, options) -> float:
    """Run time here of a request of ``events`` events, with the outputs it asks for."""
    written = sum(1 for output in (options.json, options.perfetto, options.plot) if output)
    return events * (SECONDS_PER_EVENT + written * SECONDS_PER_EVENT_WRITTEN)


def _about(events: int) -> str:
    """``events`` to two significant figures (exactly when that would not pass the limit),
    with thousands separators."""
    rounded = int(float(f"{events:.2g}"))
    return f"{rounded if rounded > MAX_EVENTS else events:,}"


def _duration(seconds: float) -> str:
    """``"about 3 hours"``: seconds in the largest unit that gives at least 1.5 of it."""
    if seconds > 365 * 86400:
        return "more than a year"
    for unit, size in (("days", 86400), ("hours", 3600), ("minutes", 60)):
        if seconds >= 1.5 * size:
            return f"about {seconds / size:.0f} {unit}"
    return f"about {max(seconds, 1):.0f} seconds"


def check_request_size(options) -> int:
    """The estimated event count; raises ``RequestTooLargeError`` above ``MAX_EVENTS``."""
    events = estimate_events(options)
    if events > MAX_EVENTS:
        raise RequestTooLargeError(
            f"this request would simulate about {_about(events)} events "
            f"({_duration(estimated_seconds(events, options))} here); the limit is "
            f"{MAX_EVENTS:,} events. Use fewer stages, micro-batches, repeats or replicas.")
    return events


def stage_costs_for(options) -> List[cost_model.StageCost]:
    """The stages the options describe: a built-in model (one stage without --splits, else
    cut at its splits), or identical unit stages."""
    if options.colocate_gradients and not options.sharded:
        raise ValueError("--colocate-gradients places the gradients of shards; give --sharded "
                         "too.")
    if options.sharded and (options.model is None or not options.splits):
        raise ValueError("--sharded cuts a model into shards: give --model and --splits.")
    if options.model is None:
        if options.splits is not None or options.batch_size is not None:
            raise ValueError("--splits and --batch-size describe a model; give --model too.")
        stages = pipeline_simulator.unit_stages(options.stages if options.stages is not None
                                                else DEFAULT_STAGES)
    else:
        # Recomputation is simulated by the pipeline (an R before each B), so the cost model
        # must not fold it into the backward pass as well.
        if options.sharded:
            stages = cost_model.shard_costs(
                builtin_models.builtin_model(options.model), options.splits or (),
                batch_size=options.batch_size or DEFAULT_BATCH_SIZE, optimizer=options.optimizer,
                colocate_gradients=options.colocate_gradients)
        else:
            stages = cost_model.stage_costs(builtin_models.builtin_model(options.model),
                                            options.splits or (),
                                            batch_size=options.batch_size or DEFAULT_BATCH_SIZE,
                                            optimizer=options.optimizer)
        if options.stages is not None and options.stages != len(stages):
            raise ValueError(f"--stages {options.stages} disagrees with --splits, which give "
                             f"{len(stages)} stage{'s' if len(stages) != 1 else ''}.")
    return stages


def simulate(options):
    """``(schedule, timeline)`` for parsed options; raises on invalid input, and on a request
    above ``MAX_EVENTS`` (checked before anything is built)."""
    check_sizes(options)
    check_request_size(options)
    stages = stage_costs_for(options)
    training = not options.inference
    if not _is_pipeline(options):  # not a pipeline: one IPU
        schedule = schedules.single_ipu(options.micro_batches, training)
    elif options.sharded:  # shards take turns, one micro-batch at a time
        schedule = schedules.build_checked_schedule(
            "sequential", len(stages), options.micro_batches, None, training)
    else:
        # Built once, with the SDK's checks; the simulator takes the built schedule as it is.
        schedule = schedules.build_checked_schedule(
            options.schedule, len(stages), options.micro_batches, options.device_mapping,
            training, options.recompute, options.stages_per_ipu)
    timeline = pipeline_simulator.simulate_pipeline(
        stages, schedule, options.micro_batches, repeat_count=options.repeat_count,
        replicas=options.replicas, target=options.ipu_version,
        batch_size=(options.batch_size or DEFAULT_BATCH_SIZE) if options.model else None,
        training=training, recompute=options.recompute,
        offload_weights=options.offload_weights, offload_activations=options.offload_activations,
        accumulation_dtype_bytes=ACCUMULATION_DTYPES[options.accumulation_dtype],
        unit_cost=options.unit_cost, synthetic_data=uses_synthetic_data(options),
        fifos=_is_pipeline(options) and not options.sharded,
        title=(f"sharded over {len(stages)} IPUs: {options.micro_batches} mini-batches"
               + (", synthetic data" if uses_synthetic_data(options) else "")
               if options.sharded else ""),
        backward_ratio=1.0 if options.backward_ratio is None else options.backward_ratio)
    return schedule, timeline


def to_json(schedule: schedule_actions.Schedule, timeline, clock_hz: float) -> dict:
    """The timeline as JSON, each time in seconds and in cycles of the target's clock (in
    time steps for a unit-cost run)."""
    data = views.to_dict(timeline)
    if data["time_unit"] == "s":
        data["clock_hz"] = clock_hz
        for event in data["events"]:
            event["start_cycles"] = round(event["start"] * clock_hz)
            event["end_cycles"] = round(event["end"] * clock_hz)
        data["metrics"]["makespan_cycles"] = round(data["metrics"]["makespan"] * clock_hz)
    data["schedule"] = {
        "name": schedule.name,
        "synchronous": schedule.synchronous,
        "num_stages": schedule.num_stages,
        "micro_batches": schedule.micro_batches,
        "device_mapping": list(schedule.device_mapping),
        "ipu_actions": [schedule_actions.format_actions(actions)
                        for actions in schedule.ipu_actions],
    }
    return data


def steps_note(schedule: schedule_actions.Schedule, timeline, options) -> Optional[str]:
    """Why the printed schedule's time steps and the summary's makespan differ, or None when
    they agree (or the schedule is asynchronous and counts no steps)."""
    if not schedule.synchronous:
        return None
    steps, passes = len(schedule.steps), options.repeat_count
    counted = f"{steps} schedule steps" + (" per pass" if passes > 1 else "")
    if not options.unit_cost:
        counted += f", {passes} passes" if passes > 1 else ""
        return (f"({counted}; each lasts as long as its busiest IPU, plus a sync and any "
                f"exchange: see the makespan below)")
    makespan = timeline.metrics.makespan
    if makespan == steps:
        return None
    reasons = []
    if any(len([a for a in step
                if a.kind != schedule_actions.UPDATE and schedule.ipu_of(a.stage) == ipu]) > 1
           for step in schedule.steps for ipu in range(schedule.num_ipus)):
        reasons.append("a step runs each IPU's actions one after another")
    if schedule.training:
        reasons.append("weight updates take no time")
    because = "; " + " and ".join(reasons) if reasons else ""
    total = f"the {passes} passes' simulated makespan" if passes > 1 else "the simulated makespan"
    return f"({counted}{because}, so {total} is {makespan:g} time steps)"


def run(options) -> int:
    try:
        schedule, timeline = simulate(options)
    except PipelineConfigurationError as error:
        print(f"{error.sdk_error}: {error.message}", file=sys.stderr)
        return 1
    except (InvalidScheduleError, ValueError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if options.perfetto:
        views.save_chrome_trace(timeline, options.perfetto)
    if options.plot:
        _save_plot(timeline, options.plot)
    if options.json:
        json.dump(to_json(schedule, timeline, TARGETS[options.ipu_version].clock_hz), sys.stdout)
        sys.stdout.write("\n")
        return 0
    if schedule.micro_batches <= MAX_PRINTED_MICRO_BATCHES:
        print(schedule)
        note = steps_note(schedule, timeline, options)
        if note:
            print(note)
        print()
    print(views.summary_table(timeline))
    if options.perfetto:
        print(f"Trace written to {options.perfetto} (open it in https://ui.perfetto.dev).")
    return 0


def _save_plot(timeline, path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    ax = views.plot_timeline(timeline)
    ax.figure.tight_layout()
    ax.figure.savefig(path, dpi=120)
    plt.close(ax.figure)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ipu_emulator simulate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
