"""``FeedsExplorer``: change the steps per execution of a looped training program and watch the
host's share of the simulated IPU time shrink.

    from ipu_lab_widgets.feeds_explorer import FeedsExplorer
    FeedsExplorer()                       # tutorial 3's MLP, 10,000 steps, its host
    FeedsExplorer(step_cost=runs.runs[-1].step_cost)   # the cost of a program you recorded

The model half is pure: ``simulate(FeedsConfig(...))`` gives the simulated time of the whole
training with feeds (``steps_per_execution`` steps per engine run) and without them (one
engine run per step, the batch copied in as an ordinary input).  Engine runs are blocking
and identical, so the total is one simulated run times the number of runs; only the first
steps are drawn as a trace.  The widget turns its controls into a ``FeedsConfig``, calls
``simulate`` and draws SVG (a chart of the total against steps per execution, and the
traces); an invalid value shows a message and keeps the last valid drawing.  No TensorFlow,
no matplotlib, no NumPy: it runs in JupyterLite's browser kernel too.
"""
from __future__ import annotations

import math
import traceback
from dataclasses import dataclass, replace
from html import escape
from typing import Optional, Sequence

import ipywidgets as w

from ipu_emulator import views
from ipu_emulator.views.line_chart import Series, line_chart_svg
from ipu_emulator.views.trace_figure import fluid
from ipu_emulator.sim import feeds, hardware
from ipu_emulator.sim.hardware import HostModel
from ipu_emulator.record import ComputeCost, EngineRun
from ipu_emulator.sim.timeline import Timeline, simulate_engine_runs

IPU_VERSIONS = hardware.IPU_VERSIONS
HOSTS = ("tutorial 3 host", "ideal host")
STEPS_PER_EXECUTION_CHOICES = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)
TRACE_STEPS = 20  # steps drawn in the trace


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


def _first_steps_trace(run: EngineRun, engine_runs: int, config: FeedsConfig,
                       host: HostModel) -> Timeline:
    """The engine runs (each ``run``) that hold the training's first TRACE_STEPS steps."""
    shown = max(1, min(engine_runs, math.ceil(TRACE_STEPS / run.iterations)))
    return simulate_engine_runs([run] * shown, target=config.ipu_version, host=host,
                                batch_size=config.batch_size)


def _program(config: FeedsConfig):
    """``(host model, step cost, steps per execution)`` of a checked configuration."""
    _check(config)
    host = host_model(config.host)
    step = config.step_cost or feeds.tutorial3_step_cost(config.batch_size)
    return host, step, min(config.steps_per_execution, config.steps)


def simulate(config: FeedsConfig) -> FeedsResult:
    """Both programs' simulated IPU time (``ipu_emulator.sim.feeds``) and the first steps
    of each; any failure becomes ``result.error``."""
    try:
        host, step, spe = _program(config)
        total, launching, engine_runs = feeds.with_feeds(
            config.steps, spe, step, host, config.ipu_version, config.batch_size)
        with_feeds = ProgramTime(engine_runs, total, launching, _first_steps_trace(
            feeds.looped_run(spe, step, config.batch_size), engine_runs, config, host))
        total, launching = feeds.without_feeds(config.steps, step, host, config.ipu_version,
                                               config.batch_size)
        without_feeds = ProgramTime(config.steps, total, launching, _first_steps_trace(
            feeds.per_step_run(step, config.batch_size), config.steps, config, host))
    except Exception as error:  # pylint: disable=broad-except  (shown instead of raised)
        return FeedsResult(config=config, error=f"{type(error).__name__}: {error}")
    return FeedsResult(config=config, with_feeds=with_feeds, without_feeds=without_feeds)


def sweep(config: FeedsConfig, choices: Sequence[int] = STEPS_PER_EXECUTION_CHOICES):
    """``(steps_per_execution, total seconds with feeds)`` for each choice up to ``steps``."""
    points = []
    for spe in choices:
        if spe > config.steps:
            break
        # The total alone, as ``simulate`` works it out: not ``simulate`` itself, which also
        # simulates both programs' first steps for the traces (most of its time, and the
        # chart draws no trace).  A configuration that cannot run has no point.
        try:
            host, step, _ = _program(config.with_changes(steps_per_execution=spe))
            total = feeds.with_feeds(config.steps, spe, step, host, config.ipu_version,
                                     config.batch_size)[0]
        except Exception:  # pylint: disable=broad-except  (as ``simulate``: never raised)
            continue
        points.append((spe, total))
    return points


# --- the widget ------------------------------------------------------------------------------

class FeedsExplorer(w.VBox):
    """Controls, a summary, and an SVG drawing: total time against steps per execution, and
    both programs' first steps."""

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
        # Inline SVG in an HTML widget, as the playground's trace: no matplotlib (so it runs
        # in JupyterLite's kernel) and the points' and boxes' tooltips work.
        self.drawing = w.HTML(layout=w.Layout(overflow="auto"))
        self.result: Optional[FeedsResult] = None
        self.last_valid: Optional[FeedsResult] = None
        self.redraw_count = 0
        for control in (self.steps_per_execution, self.steps, self.host, self.ipu_version):
            control.observe(self._on_change, names="value")
        super().__init__([w.HBox([self.steps_per_execution, self.steps]),
                          w.HBox([self.host, self.ipu_version]),
                          self.message, self.summary, self.drawing])
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
            self.drawing.value = drawing_html(self.result, sweep(self.result.config))
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


CHART_WIDTH = 320
FEEDS_COLOUR = "#0072B2"      # Okabe-Ito blue and vermillion, as the traces' palette
NO_FEEDS_COLOUR = "#D55E00"
# The traces are drawn 600 px wide and shown 540-720 px wide: narrower, their text would shrink
# below 10 px, so the drawing scrolls instead.
TRACE_WIDTH = 600
TRACE_MIN_WIDTH, TRACE_MAX_WIDTH = 540, 720


def chart_svg(result: FeedsResult, points) -> str:
    """The whole training's total against steps per execution: ``points`` (``sweep``'s) with
    feeds, the program without feeds as a dashed line, the chosen configuration circled."""
    config, feeds, plain = result.config, result.with_feeds, result.without_feeds
    chosen = (min(config.steps_per_execution, config.steps), feeds.total_seconds)
    # The x axis ends at the last choice the training can use, or at the chosen point.
    xs = [x for x, _ in points] + [chosen[0]]
    ticks = [c for c in STEPS_PER_EXECUTION_CHOICES if c <= max(xs)] or [1]
    highest = max([y for _, y in points] + [chosen[1], plain.total_seconds])
    unit = views.pick_time_unit(highest)
    scale = views.time_unit_scale(unit)
    series = [Series("with feeds", [(x, y * scale) for x, y in points], colour=FEEDS_COLOUR),
              Series("without feeds", [(min(ticks + xs), plain.total_seconds * scale),
                                       (max(ticks + xs), plain.total_seconds * scale)],
                     colour=NO_FEEDS_COLOUR, dashed=True, markers=False)]
    return line_chart_svg(series, x_label="steps per execution",
                          y_label=f"total, simulated IPU time ({unit})", x_ticks=ticks,
                          log_x=True, circled=(chosen[0], chosen[1] * scale),
                          circled_name=f"chosen: {chosen[0]:,} per execution",
                          title=f"{config.steps:,} training steps", width=CHART_WIDTH)


def traces_svg(result: FeedsResult) -> str:
    """Both programs' first ``TRACE_STEPS`` steps on one time axis, so the shorter looks
    shorter; the host's waits are the lesson here, so no idle time is folded."""
    spe = min(result.config.steps_per_execution, result.config.steps)
    shown = min(TRACE_STEPS, result.config.steps)
    traces = [first_steps(result.with_feeds.trace, shown),
              first_steps(result.without_feeds.trace, shown)]
    return views.timeline_svg(
        traces, width=TRACE_WIDTH, end=max(_last_end(t) for t in traces), fold_idle=False,
        titles=[f"with feeds ({spe:,} per execution): the first {shown} steps",
                f"without feeds: the first {shown} steps"])


def first_steps(trace: Timeline, steps: int) -> Timeline:
    """``trace`` cut after its first ``steps`` steps: one engine run of 1,000 steps is
    simulated whole, but only its first steps compare with the other program's."""
    keys = sorted({(e.engine_run, e.iteration) for e in trace.events if e.iteration is not None})
    kept_steps = set(keys[:steps])
    kept_runs = {run for run, _ in kept_steps}
    events = [e for e in trace.events if (e.engine_run, e.iteration) in kept_steps
              or (e.iteration is None and e.engine_run in kept_runs)]
    end = max((e.end for e in events), default=0.0)
    return replace(trace, events=events,
                   engine_run_spans=[(a, min(b, end)) for a, b in trace.engine_run_spans
                                     if a < end])


def _last_end(trace: Timeline) -> float:
    return max((e.end for e in trace.events), default=0.0)


def drawing_html(result: FeedsResult, points) -> str:
    """The chart, and the traces beside it scaled to the room left (0.9 to 1.2 times their
    drawn size); on a screen too narrow for both, the traces wrap below it."""
    return ("<div style='display:flex;flex-wrap:wrap;align-items:flex-start;gap:12px'>"
            f"<div style='flex:0 0 auto'>{chart_svg(result, points)}</div>"
            f"<div style='flex:1 1 {TRACE_MIN_WIDTH}px;min-width:{TRACE_MIN_WIDTH}px;"
            f"max-width:{TRACE_MAX_WIDTH}px'>"
            f"{fluid(traces_svg(result))}</div></div>")
