"""A training with and without feeds, as engine runs: tutorial 3's what-if.

With feeds, each engine run loops ``steps_per_execution`` steps on the IPU, each batch
arriving through the infeed and each loss leaving through the outfeed; without them, every
step is an engine run of its own, its batch passed in and its loss returned.  Engine runs are
blocking and identical, so a training's time is one simulated run's time times the number of
runs: nothing simulates all 10,000 steps.  The feeds explorer (``ipu_lab_widgets.feeds_explorer``)
and notebook 04's exercise both time a training here.

    >>> total, launching, engine_runs = with_feeds(10_000, 10, tutorial3_step_cost(),
    ...                                            HostModel.tutorial3())
    >>> engine_runs, round(total, 1)
    (1000, 14.6)
"""
from __future__ import annotations

import functools
from typing import Tuple, Union

from ipu_emulator.record import ComputeCost, EngineRun
from ipu_emulator.sim import builtin_models, cost_model
from ipu_emulator.sim.hardware import HostModel, IPUTarget
from ipu_emulator.sim.timeline import simulate_engine_runs

LOSS_BYTES = 4  # each step sends its float32 loss to the host
# Graphcore's tutorial 3 model: Flatten, Dense(128, relu), Dense(10, softmax).
TUTORIAL3_MLP = builtin_models.builtin_model("tutorial3-mlp")


def tutorial3_step_cost(batch_size: int = 32) -> ComputeCost:
    """One training step of tutorial 3's MLP, from the declarative cost model."""
    return cost_model.step_cost(TUTORIAL3_MLP, batch_size)


def batch_bytes(batch_size: int) -> int:
    """One batch crossing the host link: float32 28x28 images and int32 labels."""
    return batch_size * (28 * 28 * 4 + 4)


def looped_run(iterations: int, step_cost: ComputeCost, batch_size: int = 32) -> EngineRun:
    """One engine run of ``iterations`` steps, batches from the infeed, losses to the outfeed."""
    return EngineRun("training loop with feeds", iterations=iterations, step_cost=step_cost,
                     infeed_bytes_per_iteration=batch_bytes(batch_size),
                     outfeed_bytes_per_iteration=LOSS_BYTES)


def per_step_run(step_cost: ComputeCost, batch_size: int = 32) -> EngineRun:
    """One engine run of one step, its batch passed in and its loss returned."""
    return EngineRun("one step per engine run", iterations=1, step_cost=step_cost,
                     input_bytes=batch_bytes(batch_size), output_bytes=LOSS_BYTES)


# A widget's redraw and an exercise's search ask for the same few runs again and again; runs,
# hosts and targets are frozen records, so one simulation serves every later call.
@functools.lru_cache(maxsize=4096)
def run_seconds(run: EngineRun, host: HostModel,
                target: Union[str, IPUTarget] = "ipu2") -> Tuple[float, float]:
    """``(total, launching)``: simulated seconds of one engine run, and of its launch."""
    timeline = simulate_engine_runs([run], target=target, host=host)
    launching = sum(event.duration for event in timeline.events if event.name == "Engine::run")
    return timeline.metrics.makespan, launching


def with_feeds(steps: int, steps_per_execution: int, step_cost: ComputeCost, host: HostModel,
               target: Union[str, IPUTarget] = "ipu2",
               batch_size: int = 32) -> Tuple[float, float, int]:
    """``(total, launching, engine_runs)`` of ``steps`` steps, ``steps_per_execution`` per
    engine run (the last run holds what is left over)."""
    full_runs, remainder = divmod(steps, steps_per_execution)
    total = launching = 0.0
    for iterations, count in ((steps_per_execution, full_runs), (remainder, 1)):
        if iterations and count:
            run_total, run_launching = run_seconds(
                looped_run(iterations, step_cost, batch_size), host, target)
            total, launching = total + count * run_total, launching + count * run_launching
    return total, launching, full_runs + (1 if remainder else 0)


def without_feeds(steps: int, step_cost: ComputeCost, host: HostModel,
                  target: Union[str, IPUTarget] = "ipu2",
                  batch_size: int = 32) -> Tuple[float, float]:
    """``(total, launching)`` of ``steps`` steps, one engine run each."""
    run_total, run_launching = run_seconds(per_step_run(step_cost, batch_size), host, target)
    return steps * run_total, steps * run_launching


__all__ = ["LOSS_BYTES", "TUTORIAL3_MLP", "batch_bytes", "looped_run", "per_step_run",
           "run_seconds", "tutorial3_step_cost", "with_feeds", "without_feeds"]
