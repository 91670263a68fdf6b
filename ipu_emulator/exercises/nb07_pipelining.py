"""Notebook 07's exercises: pipelining the tutorial's classifier over two IPUs (step 3).

Each check judges with the pure simulator: the tutorial's four equal stages in unit-cost
mode, or this notebook's recorded run when the notebook passes it in (optional), or else the
built-in model of the tutorial's classifier.

    >>> check_faster_schedule(("grouped", "b")).ok
    True
    >>> check_faster_schedule(("interleaved", "b")).ok
    False
    >>> check_in_flight(7).ok, check_pace_setter("IPU3").ok
    (True, True)
"""
from __future__ import annotations

from dataclasses import replace
from numbers import Real
from typing import Optional

from ipu_emulator.exercises import exercise, is_whole_number, not_yet, right
from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
from ipu_emulator.sim.recorded_runs import simulate_run
from ipu_emulator.sim.timeline import COMPUTE_KINDS

# The tutorial's diagrams: four equal stages, 16 micro-batches.
STAGES = 4
MICRO_BATCHES = 16
# This notebook's pipeline: the tutorial's split, micro-batches of 32, 16 per weight update.
SPLITS = ("dense32",)
FOUR_STAGE_SPLITS = ("dense128", "dense64", "dense32")
BATCH_SIZE = 32
LAUNCH_GOAL = 0.10


def _diagram(schedule: str, backward_ratio: float):
    return simulate_pipeline(unit_stages(STAGES), schedule, MICRO_BATCHES, unit_cost=True,
                             backward_ratio=backward_ratio)


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


# --- 1. Which schedule finishes first when a backward takes twice a forward, and why ------

REASONS = {
    "a": "Grouped's first micro-batch finishes its backward pass sooner",
    "b": "under Interleaved each IPU alternates a short forward and a long backward, so "
         "neighbouring stages fall out of step and wait for each other",
    "c": "Grouped runs fewer forward and backward passes",
}


@exercise("07.faster-schedule", solution=lambda: ("grouped", "b"),
          wrong=(("interleaved", "b"), ("grouped", "a"), ("grouped", "c"), "grouped",
                 ("sequential", "b")))
def check_faster_schedule(answer):
    """``(schedule, reason)``: the schedule that finishes 16 micro-batches through four equal
    stages first when a backward pass takes twice a forward pass, and the letter of the
    reason."""
    if isinstance(answer, str) or not isinstance(answer, (tuple, list)) or len(answer) != 2:
        return not_yet("answer with a pair in brackets: the schedule's name and the letter of "
                       "the reason, like ('sequential', 'c').")
    schedule, reason = (str(part).strip().lower() for part in answer)
    makespans = {name: _diagram(name, 2.0).metrics.makespan
                 for name in ("grouped", "interleaved", "sequential")}
    if schedule not in makespans:
        return not_yet(f"{answer[0]!r} is not one of Graphcore's schedules: 'grouped', "
                       "'interleaved' or 'sequential'.")
    if schedule != min(makespans, key=makespans.get):
        return not_yet("simulate both schedules with backward_ratio=2.0 and compare their "
                       "makespans (metrics.makespan, in steps).")
    if reason not in REASONS:
        return not_yet("the schedule is right; now give the letter of the reason: 'a', 'b' "
                       "or 'c'.")
    if reason == "a":
        return not_yet("the schedule is right, but follow micro-batch 0 in the diagram above: "
                       "whose backward pass ends sooner?")
    if reason == "c":
        return not_yet("the schedule is right, but count the boxes: both schedules run every "
                       "micro-batch's forward and backward pass once on every IPU.")
    return right(f"Grouped takes {makespans['grouped']:g} steps, Interleaved "
                 f"{makespans['interleaved']:g}. Grouped's IPUs all run forwards, then all run "
                 "backwards, so in every step they do work of the same length. Under "
                 "Interleaved an IPU running a one-step forward waits for its neighbour's "
                 "two-step backward: that idle time is the imbalance in its bubble split.")


# --- 2. How many micro-batches IPU0 holds under Grouped ------------------------------------

def _peak_in_flight(schedule: str) -> int:
    return _diagram(schedule, 1.0).metrics.peak_in_flight[0]


@exercise("07.in-flight", solution=lambda: _peak_in_flight("grouped"), wrong=(4, 11, 8, 1, "7"))
def check_in_flight(count):
    """The most micro-batches IPU0 holds at once under Grouped, four equal stages."""
    if not is_whole_number(count):
        return not_yet("answer with a whole number of micro-batches, without quotes.")
    grouped, interleaved = _peak_in_flight("grouped"), _peak_in_flight("interleaved")
    if count == grouped:
        return right(f"IPU0 holds up to {grouped} micro-batches under Grouped and "
                     f"{interleaved} under Interleaved. A micro-batch is in flight from its "
                     "forward pass to the end of its backward pass on that IPU; Grouped "
                     "delays every backward, so more forwards start in between and IPU0 keeps "
                     "more activations: the memory price the tutorial warns about.")
    if count == interleaved:
        return not_yet("that is Interleaved's figure. Read the strip under IPU0 in the "
                       "Grouped trace.")
    return not_yet("a micro-batch stays in flight on IPU0 from its forward pass to the end of "
                   "its backward pass there. Read the label of the strip under IPU0 in the "
                   "Grouped trace, or count the forward passes IPU0 started before micro-batch "
                   "0's backward ended.")


# --- 3. The textbook bubble fraction --------------------------------------------------------

BUBBLE_CASES = ((2, 16), (2, 4), (4, 16), (4, 32), (3, 12), (8, 16))


def _textbook(stages: int, micro_batches: int) -> float:
    return (stages - 1) / (micro_batches + stages - 1)


def _simulated_bubble(stages: int, micro_batches: int) -> float:
    return simulate_pipeline(unit_stages(stages), "grouped", micro_batches,
                             unit_cost=True).metrics.bubble_fraction


@exercise("07.textbook-bubble", solution=lambda: _textbook,
          wrong=(lambda s, m: (s - 1) / m, lambda s, m: (s - 1) / (m + s), lambda s, m: 0.0,
                 0.0588),
          hint_on_error="your function raised an error. It receives two whole numbers, the "
                        "stages S and the micro-batches M, and returns a fraction.")
def check_bubble_function(function):
    """A function ``(stages, micro_batches) -> bubble fraction`` for equal stages, unit cost."""
    if not callable(function):
        return not_yet("answer with a function of two numbers, S and M, e.g. one written "
                       "with def or lambda.")
    for stages, micro_batches in BUBBLE_CASES:
        expected = _simulated_bubble(stages, micro_batches)
        got = function(stages, micro_batches)
        if not _is_number(got):
            return not_yet(f"for S={stages}, M={micro_batches} your function returned "
                           f"{got!r}, not a number.")
        if abs(got - 100 * expected) < 1e-6 and expected > 0:
            return not_yet("return a fraction (0.5 for half), not a percentage.")
        if abs(got - expected) > 1e-9:
            return not_yet(f"for S={stages} stages and M={micro_batches} micro-batches the "
                           f"simulator finds a bubble of {expected:.2%}, your function "
                           f"{float(got):.2%}. Count the steps of one pass: M+S-1 of them, and "
                           "in how many is each IPU idle?")
    return right("the simulator agrees for every case tried. Each IPU idles S-1 steps while "
                 "the pipeline fills and drains, out of M+S-1 steps per pass. For this "
                 "notebook's 2 stages and 16 micro-batches that is 1/17 = 5.9 %, close to "
                 "the ramp-up plus ramp-down of the recorded pass 0. The formula leaves out "
                 "communication and imbalance, which real stages add.")


# --- 4. The schedule never changes the result -----------------------------------------------

@exercise("07.schedule-keeps-losses", solution=lambda: 0.0, wrong=(0.01, 0.5, "0", None))
def check_schedule_keeps_losses(largest_difference):
    """The largest difference between the losses of the same micro-batches trained with
    Grouped and with another schedule."""
    if not _is_number(largest_difference):
        return not_yet("answer with a number: the largest absolute difference between the "
                       "two runs' losses of the same micro-batches.")
    if abs(largest_difference) <= 1e-5:
        return right("the losses are the same. A schedule only changes the order in which "
                     "each IPU runs its forward and backward passes; every micro-batch's "
                     "gradients are summed in full before the one weight update, whatever "
                     "the order.")
    return not_yet("compare the same micro-batches: the other run's losses with the first "
                   "as many of `losses`, both trained from the same starting weights. Could "
                   "the order of the passes change what is summed before the weight update?")


# --- 5. The repeat count that makes the launch small -----------------------------------------

def _launch_share(repeat_count: int, run=None) -> float:
    if run is not None:
        pipeline = replace(run.pipeline, repeat_count=repeat_count)
        timeline = simulate_run(
            replace(run, pipeline=pipeline,
                    iterations=pipeline.gradient_accumulation_count * repeat_count),
            batch_size=BATCH_SIZE, synthetic_data=True)
    else:
        stages = cost_model.stage_costs(builtin_models.builtin_model("tutorial-mlp"),
                                        SPLITS, BATCH_SIZE)
        timeline = simulate_pipeline(stages, "grouped", 16, repeat_count=repeat_count,
                                     batch_size=BATCH_SIZE, synthetic_data=True)
    return timeline.metrics.host_overhead_fraction


def _smallest_repeat_count(run=None) -> int:
    count = 1
    while _launch_share(count, run) >= LAUNCH_GOAL:
        count += 1
    return count


@exercise("07.repeat-count", solution=_smallest_repeat_count, wrong=(4, 10, 100, "25", 0))
def check_repeat_count(repeat_count, run=None):
    """The smallest repeat count for which the host's launch is under 10 % of the engine
    run's makespan (``run``: the recorded engine run; without it, the built-in model)."""
    if not is_whole_number(repeat_count):
        return not_yet("answer with a whole number of passes, without quotes.")
    if repeat_count < 1:
        return not_yet("a pipeline makes at least one pass per engine run.")
    share = _launch_share(repeat_count, run)
    if share >= LAUNCH_GOAL:
        return not_yet(f"with repeat_count={repeat_count} the launch is still {share:.1%} of "
                       "the run. The launch costs the same however many passes follow it: "
                       "how many passes make it small?")
    if repeat_count > 1 and _launch_share(repeat_count - 1, run) < LAUNCH_GOAL:
        return not_yet(f"{repeat_count} passes bring the launch under the goal, but fewer "
                       "passes do too. Which is the smallest count?")
    return right(f"{repeat_count} passes per engine run: the launch is {share:.1%} of the "
                 "run. Each pass adds the same time and the launch is paid once, so its share "
                 "falls as the repeat count grows. That is why production code uses a large "
                 "repeat count.")


# --- 6. Which IPU sets the pace of four stages -----------------------------------------------

def _compute_by_ipu(timeline) -> dict:
    return {ipu: sum(t for kind, t in by_kind.items() if kind in COMPUTE_KINDS)
            for ipu, by_kind in timeline.metrics.busy_time_by_kind.items()}


def _four_stages():
    stages = cost_model.stage_costs(builtin_models.builtin_model("tutorial-mlp"),
                                    FOUR_STAGE_SPLITS, BATCH_SIZE)
    return simulate_pipeline(stages, "grouped", 16, batch_size=BATCH_SIZE, synthetic_data=True)


def _busiest_ipu(timeline=None) -> int:
    work = _compute_by_ipu(timeline if timeline is not None else _four_stages())
    return max(work, key=work.get)


@exercise("07.pace-setter", solution=_busiest_ipu, wrong=(0, "IPU0", 1, 2, "dense256"))
def check_pace_setter(ipu, timeline: Optional[object] = None):
    """The IPU that sets the pace of the four-stage pipeline (``timeline``: its simulated
    trace; without it, the built-in model cut the same way)."""
    if isinstance(ipu, str) and ipu.strip().upper().startswith("IPU"):
        ipu = ipu.strip()[3:]
    try:
        number = int(ipu)
    except (TypeError, ValueError):
        return not_yet("answer with the IPU's number, like 2 or 'IPU2'.")
    work = _compute_by_ipu(timeline if timeline is not None else _four_stages())
    if number not in work:
        return not_yet("the four-stage pipeline runs on four IPUs, numbered from 0.")
    busiest = max(work, key=work.get)
    if number != busiest:
        return not_yet("the pace is set by the IPU that computes longest per micro-batch: "
                       "look for the lane with the fewest gaps in the four-stage trace.")
    return right(f"IPU{busiest} runs dense32, the logits and the loss, the same layers as "
                 "IPU1 did with two stages. The new cuts split only IPU0's work, three ways; "
                 "the last stage keeps all of its work and is now the slowest. Every step "
                 "waits for it, and each extra stage adds exchanges between IPUs to every "
                 "micro-batch, so the pass is hardly shorter. Splitting pays only when it "
                 "shortens the slowest stage by more than the exchanges it adds.")


__all__ = ["check_faster_schedule", "check_in_flight", "check_bubble_function",
           "check_schedule_keeps_losses", "check_repeat_count", "check_pace_setter",
           "REASONS"]
