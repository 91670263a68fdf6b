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
reject exits with status 1 and its message on stderr.

Schedules: grouped, interleaved, sequential (Graphcore's), gpipe, 1f1b, interleaved-1f1b,
zero-bubble (for comparison).  No TensorFlow is imported.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from typing import List, Optional

from ipu_emulator import views
from ipu_emulator.sim import builtin_models, cost_model, pipeline_simulator, schedules
from ipu_emulator.sim.hardware import TARGETS
from ipu_emulator.sim.schedules import InvalidScheduleError, PipelineConfigurationError

DEFAULT_STAGES = 4
# The pipelining tutorial's defaults: --batches-to-accumulate 16, --batch-size 32.
DEFAULT_MICRO_BATCHES = 16
DEFAULT_BATCH_SIZE = 32
ACCUMULATION_DTYPES = {"float32": 4, "float16": 2}
# Above this many micro-batches the printed schedule grid would be too wide to read.
MAX_PRINTED_MICRO_BATCHES = 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    shape = parser.add_argument_group("pipeline")
    shape.add_argument("--schedule", default="grouped", metavar="NAME",
                       help="one of: " + ", ".join(schedules.SCHEDULE_NAMES) + " (default grouped)")
    shape.add_argument("--stages", type=int, default=None, metavar="S",
                       help=f"number of identical unit stages (default {DEFAULT_STAGES}; "
                            "with --model: the splits decide, and S must agree)")
    shape.add_argument("--synthetic-data", action="store_true",
                       help="no host transfers of the data, as TF_POPLAR_FLAGS="
                            "--use_synthetic_data asks of the SDK")
    shape.add_argument("--micro-batches", "--gradient-accumulation-count", dest="micro_batches",
                       type=int, default=DEFAULT_MICRO_BATCHES, metavar="M",
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
    model.add_argument("--batch-size", type=int, default=None, metavar="B",
                       help=f"micro-batch size (default {DEFAULT_BATCH_SIZE} with --model)")
    model.add_argument("--optimizer", choices=sorted(cost_model.OPTIMIZERS), default="sgd",
                       help="optimizer of the model (default sgd, as in the tutorial)")

    timing = parser.add_argument_group("timing and output")
    timing.add_argument("--ipu-version", choices=sorted(TARGETS), default="ipu2",
                        help="IPU target (default ipu2)")
    timing.add_argument("--unit-cost", action="store_true",
                        help="every forward/backward takes one time step; nothing else costs")
    timing.add_argument("--json", action="store_true", help="print one JSON object")
    timing.add_argument("--perfetto", metavar="FILE", default=None,
                        help="write the trace as Chrome-trace JSON (open in ui.perfetto.dev)")
    timing.add_argument("--plot", metavar="FILE", default=None,
                        help="save the matplotlib execution trace (e.g. trace.png)")


def stage_costs_for(options) -> List[cost_model.StageCost]:
    """The stages the options describe: a built-in model (one stage without --splits, else
    cut at its splits), or identical unit stages."""
    if options.model is None:
        if options.splits is not None or options.batch_size is not None:
            raise ValueError("--splits and --batch-size describe a model; give --model too.")
        stages = pipeline_simulator.unit_stages(options.stages if options.stages is not None
                                                else DEFAULT_STAGES)
    else:
        # Recomputation is simulated by the pipeline (an R before each B), so the cost model
        # must not fold it into the backward pass as well.
        stages = cost_model.stage_costs(builtin_models.builtin_model(options.model),
                                        options.splits or (),
                                        batch_size=options.batch_size or DEFAULT_BATCH_SIZE,
                                        optimizer=options.optimizer)
        if options.stages is not None and options.stages != len(stages):
            raise ValueError(f"--stages {options.stages} disagrees with --splits, which give "
                             f"{len(stages)} stage{'s' if len(stages) != 1 else ''}.")
    if options.synthetic_data:
        stages = [replace(stages[0], input_bytes=0)] + list(stages[1:])
    return stages


def simulate(options):
    """``(schedule, timeline)`` for parsed options; raises on invalid input."""
    stages = stage_costs_for(options)
    training = not options.inference
    if options.model is not None and not options.splits:  # not a pipeline: one IPU
        schedule = schedules.single_ipu(options.micro_batches, training)
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
        unit_cost=options.unit_cost)
    return schedule, timeline


def to_json(schedule: schedules.Schedule, timeline, clock_hz: float) -> dict:
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
        "ipu_actions": [schedules.format_actions(actions) for actions in schedule.ipu_actions],
    }
    return data


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
