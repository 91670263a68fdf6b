"""``FeedsExplorer``: change the steps per execution of a looped training program and watch the
host's share of the simulated IPU time shrink.

    from widgets.feeds_explorer import FeedsExplorer
    FeedsExplorer()                       # tutorial 3's MLP, 10,000 steps, its host
    FeedsExplorer(step_cost=runs.runs[-1].step_cost)   # the cost of a program you recorded

The model half is pure: ``simulate(FeedsConfig(...))`` gives the simulated time of the whole
training with feeds (``steps_per_execution`` steps per engine run) and without them (one
engine run per step, the batch copied in as an ordinary input).  Engine runs are blocking
and identical, so the total is one simulated run times the number of runs; only the first
steps are drawn as a trace.  The widget turns its controls into a ``FeedsConfig``, calls
``simulate`` and draws; an invalid value shows a message and keeps the last valid drawing.
No TensorFlow is imported.
"""
from __future__ import annotations

import io
import math
import traceback
from dataclasses import dataclass, replace
from html import escape
from typing import Optional, Sequence, Tuple

import ipywidgets as w

from ipu_emulator import views
from ipu_emulator.views.time_axis import FoldedTime
from ipu_emulator.sim import builtin_models, cost_model, hardware
from ipu_emulator.sim.hardware import HostModel
from ipu_emulator.record import ComputeCost, EngineRun
from ipu_emulator.sim.timeline import Timeline, simulate_engine_runs

IPU_VERSIONS = hardware.IPU_VERSIONS
HOSTS = ("tutorial 3 host", "ideal host")
STEPS_PER_EXECUTION_CHOICES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
# Graphcore's tutorial 3 model: Flatten, Dense(128, relu), Dense(10, softmax), batches of 32.
TUTORIAL3_MLP = builtin_models.builtin_model("tutorial3-mlp")
LOSS_BYTES = 4  # each step sends its float32 loss to the host through the outfeed
TRACE_STEPS = 20  # steps drawn in the trace


def tutorial3_step_cost(batch_size: int = 32) -> ComputeCost:
    """One training step of tutorial 3's MLP, from the declarative cost model."""
    return cost_model.step_cost(TUTORIAL3_MLP, batch_size)


def batch_bytes(batch_size: int) -> int:
    """One batch crossing the host link: float32 28x28 images and int32 labels."""
    return batch_size * (28 * 28 * 4 + 4)


@dataclass(frozen=True)
class FeedsConfig:
    """One point of the explorer (defaults: Graphcore's tutorial 3 measurement)."""

    steps: int = 10_000
    steps_per_execution: int = 10
    host: str = "tutorial 3 host"
    ipu_version: str = "ipu2"
    batch_size: int = 32
    step_cost: Optional[ComputeCost] = None  # None: tutorial 3's MLP from the cost model

    def with_changes(self, **changes) -> "FeedsConfig":
        return replace(self, **changes)


@dataclass(frozen=True)
class ProgramTime:
    """Simulated IPU time of the whole training done one way."""

    engine_runs: int
    total_seconds: float
    launch_seconds: float  # the host launching engine runs (``Engine::run``)
    trace: Timeline  # the first TRACE_STEPS steps

    @property
    def launch_fraction(self) -> float:
        """Share of the total spent launching engine runs: what more steps per execution
        remove (preparing batches is the input pipeline's cost, paid either way)."""
        return self.launch_seconds / self.total_seconds if self.total_seconds else 0.0


@dataclass(frozen=True)
class FeedsResult:
    config: FeedsConfig
    with_feeds: Optional[ProgramTime] = None
    without_feeds: Optional[ProgramTime] = None
    error: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def speedup(self) -> float:
        return self.without_feeds.total_seconds / self.with_feeds.total_seconds


def host_model(name: str) -> HostModel:
    """``tutorial 3 host`` charges the host's per-batch work measured there; ``ideal host``
    keeps up with any IPU and only pays the per-engine-run launch."""
    if name == "tutorial 3 host":
        return HostModel.tutorial3()
    if name == "ideal host":
        return HostModel()
    raise ValueError(f"unknown host {name!r}; choose one of {', '.join(HOSTS)}")


def _check(config: FeedsConfig) -> None:
    for name in ("steps", "steps_per_execution", "batch_size"):
        value = getattr(config, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ValueError(f"{name} must be a positive integer, not {value!r}")
    if config.ipu_version not in IPU_VERSIONS:
        raise ValueError(f"unknown IPU version {config.ipu_version!r}")


def _program_time(runs: Sequence[Tuple[EngineRun, int]], config: FeedsConfig,
                  host: HostModel) -> ProgramTime:
    """Total time of ``count`` repetitions of each run, plus a trace of the first steps."""
    total = launch_total = 0.0
    engine_runs = 0
    for run, count in runs:
        if count == 0:
            continue
        one = simulate_engine_runs([run], target=config.ipu_version, host=host)
        launch = sum(e.duration for e in one.events if e.name == "Engine::run")
        total += count * one.metrics.makespan
        launch_total += count * launch
        engine_runs += count
    first, _ = runs[0]
    shown = max(1, min(engine_runs, math.ceil(TRACE_STEPS / first.iterations)))
    trace_runs = [first] * shown
    drawn = simulate_engine_runs(trace_runs, target=config.ipu_version, host=host,
                                 batch_size=config.batch_size)
    return ProgramTime(engine_runs=engine_runs, total_seconds=total,
                       launch_seconds=launch_total, trace=drawn)


def simulate(config: FeedsConfig) -> FeedsResult:
    """Both programs' simulated IPU time; any failure becomes ``result.error``."""
    try:
        _check(config)
        host = host_model(config.host)
        step = config.step_cost or tutorial3_step_cost(config.batch_size)
        data = batch_bytes(config.batch_size)
        spe = min(config.steps_per_execution, config.steps)
        full_runs, remainder = divmod(config.steps, spe)

        def looped(iterations):
            return EngineRun("training loop with feeds", iterations=iterations, step_cost=step,
                             infeed_bytes_per_iteration=data,
                             outfeed_bytes_per_iteration=LOSS_BYTES)
        with_feeds = _program_time([(looped(spe), full_runs), (looped(max(1, remainder)),
                                                               1 if remainder else 0)],
                                   config, host)
        per_step = EngineRun("one step per engine run", iterations=1, step_cost=step,
                             input_bytes=data, output_bytes=LOSS_BYTES)
        without_feeds = _program_time([(per_step, config.steps)], config, host)
    except Exception as error:  # pylint: disable=broad-except  (shown instead of raised)
        return FeedsResult(config=config, error=f"{type(error).__name__}: {error}")
    return FeedsResult(config=config, with_feeds=with_feeds, without_feeds=without_feeds)


def sweep(config: FeedsConfig, choices: Sequence[int] = STEPS_PER_EXECUTION_CHOICES):
    """``(steps_per_execution, total seconds with feeds)`` for each choice up to ``steps``."""
    points = []
    for spe in choices:
        if spe > config.steps:
            break
        result = simulate(config.with_changes(steps_per_execution=spe))
        if result.ok:
            points.append((spe, result.with_feeds.total_seconds))
    return points


# --- the widget ------------------------------------------------------------------------------

class FeedsExplorer(w.VBox):
    """Controls, a summary, and a PNG: total time against steps per execution, and traces."""

    def __init__(self, config: Optional[FeedsConfig] = None, step_cost: Optional[ComputeCost] = None):
        config = config or FeedsConfig()
        if step_cost is not None:
            config = config.with_changes(step_cost=step_cost)
        self._base = config
        style = {"description_width": "initial"}
        self.steps_per_execution = w.SelectionSlider(
            options=STEPS_PER_EXECUTION_CHOICES, value=_nearest_choice(config.steps_per_execution),
            description="steps per execution", continuous_update=False, style=style)
        self.steps = w.BoundedIntText(value=config.steps, min=1, max=10_000_000,
                                      description="training steps", style=style)
        self.host = w.ToggleButtons(options=HOSTS, value=config.host, description="host",
                                    style=style)
        self.ipu_version = w.ToggleButtons(options=IPU_VERSIONS, value=config.ipu_version,
                                           description="IPU", style=style)
        self.summary = w.HTML()
        self.message = w.HTML()
        self.image = w.Image(format="png", layout=w.Layout(max_width="100%"))
        self.result: Optional[FeedsResult] = None
        self.last_valid: Optional[FeedsResult] = None
        self.redraw_count = 0
        for control in (self.steps_per_execution, self.steps, self.host, self.ipu_version):
            control.observe(self._on_change, names="value")
        super().__init__([w.HBox([self.steps_per_execution, self.steps]),
                          w.HBox([self.host, self.ipu_version]),
                          self.message, self.summary, self.image])
        self.refresh()

    def config(self) -> FeedsConfig:
        return self._base.with_changes(steps_per_execution=self.steps_per_execution.value,
                                       steps=self.steps.value, host=self.host.value,
                                       ipu_version=self.ipu_version.value)

    def _on_change(self, change) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Simulate the controls' configuration and redraw; never raises."""
        try:
            self.result = simulate(self.config())
            if not self.result.ok:
                note = " The drawing below is the last valid one." if self.last_valid else ""
                self.message.value = (f"<div style='color:#a00'><code>{escape(self.result.error)}"
                                      f"</code><br><i>This configuration cannot run.{note}</i></div>")
                return
            self.message.value = ""
            self.last_valid = self.result
            self.summary.value = summary_html(self.result)
            self.image.value = render_png(self.result, sweep(self.result.config))
            self.redraw_count += 1
        except Exception:  # pylint: disable=broad-except  (a widget must not break the kernel)
            self.message.value = ("<pre style='color:#a00'>unexpected error in the explorer:\n"
                                  f"{escape(traceback.format_exc(limit=3))}</pre>")


def _nearest_choice(value: int) -> int:
    return min(STEPS_PER_EXECUTION_CHOICES, key=lambda choice: abs(choice - value))


def summary_html(result: FeedsResult) -> str:
    config, feeds, plain = result.config, result.with_feeds, result.without_feeds
    rows = [
        ("with feeds", f"{feeds.engine_runs:,} engine runs of up to "
                       f"{min(config.steps_per_execution, config.steps)} steps",
         feeds.total_seconds, feeds.launch_fraction),
        ("without feeds", f"{plain.engine_runs:,} engine runs of 1 step",
         plain.total_seconds, plain.launch_fraction),
    ]
    body = "".join(f"<tr><td><b>{name}</b></td><td>{what}</td>"
                   f"<td>{views.format_seconds(seconds)}</td><td>{share:.0%}</td></tr>"
                   for name, what, seconds, share in rows)
    return (f"<p>{config.steps:,} training steps on {config.ipu_version}, {config.host}: "
            f"feeds are <b>{result.speedup:.2f}x</b> faster (simulated IPU time).</p>"
            "<table style='font-size:90%'><tr><th></th><th>program</th>"
            "<th>total (simulated IPU time)</th><th>launching engine runs</th></tr>"
            f"{body}</table>")


def render_png(result: FeedsResult, points, width_inches: float = 11.0) -> bytes:
    """Total time against steps per execution (left), and both programs' first steps."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width_inches, 5.2))
    FigureCanvasAgg(figure)
    grid = figure.add_gridspec(2, 2, width_ratios=(1, 2.2))
    curve = figure.add_subplot(grid[:, 0])
    if points:
        xs, ys = zip(*points)
        curve.plot(xs, ys, "o-", color="tab:blue", label="with feeds")
    curve.axhline(result.without_feeds.total_seconds, color="tab:red", ls="--",
                  label="without feeds")
    curve.plot([min(result.config.steps_per_execution, result.config.steps)],
               [result.with_feeds.total_seconds], "o", ms=11, mfc="none", color="k",
               label="chosen")
    curve.set_xscale("log")
    curve.set_ylim(bottom=0)
    curve.set_xlabel("steps per execution")
    curve.set_ylabel("total, simulated IPU time (s)")
    curve.legend(fontsize="small")
    # One time axis for both traces, so the shorter one looks shorter; the host's waits are
    # the lesson here, so nothing is folded.
    traces = (result.with_feeds.trace, result.without_feeds.trace)
    longest = max(trace.metrics.makespan for trace in traces)
    shared = FoldedTime(0.0, longest)
    for row, (name, trace) in enumerate(zip(("with feeds", "without feeds"), traces)):
        ax = figure.add_subplot(grid[row, 1])
        views.plot_timeline(trace, ax=ax, time_unit="ms", time_axis=shared,
                            title=f"{name}: the first {TRACE_STEPS} steps")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=80)
    return buffer.getvalue()
