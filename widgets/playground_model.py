"""What the pipeline playground computes, without any widget: a configuration in, a simulated
timeline (or the error the SDK would report) out.

Keeping this pure makes the widget a thin view (controls -> ``simulate`` -> drawing) and lets
tests and scripts use the same logic:

    >>> result = simulate(PlaygroundConfig(schedule="interleaved"))
    >>> result.error is None, result.timeline.metrics.makespan > 0
    (True, True)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Optional, Tuple

from ipu_emulator.sim import builtin_models, cost_model, hardware, pipeline_simulator
from ipu_emulator.sim.schedule_rules import SCHEDULE_NAMES as SCHEDULES
from ipu_emulator.sim.timeline import Timeline

IPU_VERSIONS = hardware.IPU_VERSIONS
ACCUMULATION_DTYPES = {"float32": 4, "float16": 2}


@dataclass(frozen=True)
class PlaygroundConfig:
    """One point in the playground's control space (defaults: the pipelining tutorial)."""

    model: str = "tutorial-mlp"
    splits: Tuple[str, ...] = ("dense128", "dense64", "dense32")
    schedule: str = "grouped"
    repeat_count: int = 1
    gradient_accumulation_count: int = 16
    batch_size: int = 32
    replicas: int = 1
    recompute: bool = False
    ipu_version: str = "ipu2"
    # Unit costs show the schedule's shape as Graphcore's diagrams do; real costs are a tick away.
    unit_cost: bool = True
    # A backward pass usually takes about twice its forward (two matmuls per weight, not
    # one): with equal boxes Grouped and Interleaved would tie, which the tutorial says
    # they do not.  Unit-cost mode only.
    backward_ratio: float = 2.0
    # No host transfers, as TF_POPLAR_FLAGS=--use_synthetic_data (Graphcore profiled
    # pipelines this way): the trace shows the pipeline, not the data feed.
    synthetic_data: bool = True
    offload_weights: bool = False
    offload_activations: bool = False
    accumulation_dtype: str = "float32"

    @property
    def num_stages(self) -> int:
        return len(self.splits) + 1

    def with_changes(self, **changes) -> "PlaygroundConfig":
        return replace(self, **changes)


@dataclass(frozen=True)
class PlaygroundResult:
    config: PlaygroundConfig
    timeline: Optional[Timeline] = None
    error: Optional[str] = None
    stages: Tuple[cost_model.StageCost, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.error is None


def split_points(model: str) -> Tuple[str, ...]:
    """Names of the layers a split may start at: every layer after the first computing one
    (a split at the input or at the first layer would leave stage 0 empty, always refused).

    >>> split_points("tutorial-mlp")
    ('dense256', 'dense128', 'dense64', 'dense32', 'logits', 'cel')
    """
    return tuple(layer.name for layer in builtin_models.builtin_model(model))[2:]


def ordered_splits(model: str, splits) -> Tuple[str, ...]:
    """Splits in model order, whatever order they were picked in."""
    order = {name: index for index, name in enumerate(split_points(model))}
    return tuple(sorted(set(splits), key=lambda name: order.get(name, len(order))))


def simulate(config: PlaygroundConfig) -> PlaygroundResult:
    """Simulate one configuration; every failure becomes ``result.error`` (never raised).

    Errors carry the SDK's own wording where the SDK would have refused the configuration
    (gradient accumulation count rules, too few stages), so learners meet the real messages.
    """
    try:
        layers = builtin_models.builtin_model(config.model)
        # Recomputation is the simulator's to apply (an extra forward action); costing it
        # here as well would count the second forward twice.
        stages = tuple(cost_model.stage_costs(
            layers, ordered_splits(config.model, config.splits), config.batch_size))
        timeline = pipeline_simulator.simulate_pipeline(
            stages,
            schedule=config.schedule,
            gradient_accumulation_count=config.gradient_accumulation_count,
            repeat_count=config.repeat_count,
            replicas=config.replicas,
            target=config.ipu_version,
            batch_size=config.batch_size,
            recompute=config.recompute,
            unit_cost=config.unit_cost,
            backward_ratio=config.backward_ratio if config.unit_cost else 1.0,
            synthetic_data=config.synthetic_data,
            offload_weights=config.offload_weights,
            offload_activations=config.offload_activations,
            accumulation_dtype_bytes=ACCUMULATION_DTYPES[config.accumulation_dtype],
            title=describe(config))
    except Exception as error:  # pylint: disable=broad-except  (shown to the learner instead)
        return PlaygroundResult(config=config, error=error_text(error))
    return PlaygroundResult(config=config, timeline=timeline, stages=stages)


def error_text(error: Exception) -> str:
    """``"<SDK exception type>: <text>"``, naming the exception the SDK would raise."""
    kind = getattr(error, "sdk_error", None) or type(error).__name__
    text = getattr(error, "message", None) or str(error) or kind
    return f"{kind}: {text}"


def describe(config: PlaygroundConfig) -> str:
    """The configuration in a line, naming only what differs from the tutorial's usual."""
    stages = config.num_stages
    extras = [name for name, on in (
        ("recompute", config.recompute), ("offload weights", config.offload_weights),
        ("offload activations", config.offload_activations),
        ("float16 accumulators", config.accumulation_dtype == "float16")) if on]
    if config.unit_cost:
        extras.append(f"unit cost, backward {config.backward_ratio:g}x forward")
    elif config.synthetic_data:
        extras.append("synthetic data")
    return (f"{config.schedule}, {stages} stage{'s' if stages != 1 else ''}, "
            f"GA count {config.gradient_accumulation_count}, repeat {config.repeat_count}, "
            f"{config.replicas} replica{'s' if config.replicas != 1 else ''}, "
            f"{config.ipu_version}" + "".join(f", {extra}" for extra in extras))
