"""``PipelinePlayground``: change a pipeline's splits, schedule, repeat count and more, and
watch the simulated IPU trace, utilisation and memory update at once.

    from widgets import PipelinePlayground
    PipelinePlayground()                      # the pipelining tutorial's model, 4 stages
    PipelinePlayground(compare=True)          # two configurations, one above the other

The widget owns no logic: each change turns the controls into a ``PlaygroundConfig``, calls
``playground_model.simulate`` and draws the result.  An invalid combination shows the SDK's
error text and keeps the last valid trace; the widget never raises.
"""
from __future__ import annotations

import traceback
from html import escape
from typing import List, Optional

import ipywidgets as w

from ipu_emulator import views
from ipu_emulator.views import svg
from ipu_emulator.sim.hardware import get_target
from ipu_emulator.sim.timeline import Timeline
from .playground_model import (IPU_VERSIONS, SCHEDULES, PlaygroundConfig, PlaygroundResult,
                               layer_names, ordered_splits, simulate)

_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_REPLICAS = (1, 2, 4, 8)
_DEFAULT_SPLITS = {"tutorial-mlp": ("dense128", "dense64", "dense32"),
                   "tutorial-convnet": ("conv2",)}


class ConfigControls(w.VBox):
    """The controls for one configuration; ``config()`` reads them, ``set_config`` writes."""

    def __init__(self, config: PlaygroundConfig, title: str = ""):
        style = {"description_width": "initial"}
        self.model = w.Dropdown(options=("tutorial-mlp", "tutorial-convnet"), value=config.model,
                                description="model", style=style)
        self.splits = w.SelectMultiple(options=layer_names(config.model), value=config.splits,
                                       rows=6, description="new stage at", style=style)
        self.schedule = w.Dropdown(options=SCHEDULES, value=config.schedule,
                                   description="schedule", style=style)
        self.gradient_accumulation_count = w.BoundedIntText(
            value=config.gradient_accumulation_count, min=1, max=1024,
            description="gradient accumulation count", style=style)
        self.repeat_count = w.IntSlider(value=config.repeat_count, min=1, max=8,
                                        description="repeat count", continuous_update=False,
                                        style=style)
        self.batch_size = w.Dropdown(options=_BATCH_SIZES, value=config.batch_size,
                                     description="batch size", style=style)
        self.replicas = w.Dropdown(options=_REPLICAS, value=config.replicas,
                                   description="replicas", style=style)
        self.recompute = w.Checkbox(value=config.recompute, description="recomputation",
                                    indent=False)
        self.ipu_version = w.ToggleButtons(options=IPU_VERSIONS, value=config.ipu_version,
                                           description="IPU", style=style)
        self.unit_cost = w.Checkbox(value=config.unit_cost, description="unit-cost mode",
                                    indent=False)
        self.model.observe(self._model_changed, names="value")
        heading = [w.HTML(f"<b>{escape(title)}</b>")] if title else []
        super().__init__(heading + [
            w.HBox([self.model, self.schedule]),
            w.HBox([self.splits, w.VBox([self.gradient_accumulation_count, self.repeat_count,
                                         self.batch_size, self.replicas])]),
            w.HBox([self.ipu_version, self.recompute, self.unit_cost]),
        ])

    @property
    def value_widgets(self) -> List[w.ValueWidget]:
        return [self.model, self.splits, self.schedule, self.gradient_accumulation_count,
                self.repeat_count, self.batch_size, self.replicas, self.recompute,
                self.ipu_version, self.unit_cost]

    def _model_changed(self, change) -> None:
        # A different model has different layers: offer its layers and a sensible split.
        self.splits.value = ()
        self.splits.options = layer_names(change["new"])
        self.splits.value = _DEFAULT_SPLITS.get(change["new"], ())

    def config(self) -> PlaygroundConfig:
        return PlaygroundConfig(
            model=self.model.value,
            splits=ordered_splits(self.model.value, self.splits.value),
            schedule=self.schedule.value,
            repeat_count=self.repeat_count.value,
            gradient_accumulation_count=self.gradient_accumulation_count.value,
            batch_size=self.batch_size.value,
            replicas=self.replicas.value,
            recompute=self.recompute.value,
            ipu_version=self.ipu_version.value,
            unit_cost=self.unit_cost.value)


class PipelinePlayground(w.VBox):
    """Controls, the simulated trace (SVG), a metrics table and a message line."""

    def __init__(self, config: Optional[PlaygroundConfig] = None,
                 compare_with: Optional[PlaygroundConfig] = None, compare: bool = False):
        config = config or PlaygroundConfig()
        compare_with = compare_with or config.with_changes(schedule="interleaved")
        self.controls = ConfigControls(config, title="configuration A")
        self.compare_controls = ConfigControls(compare_with, title="configuration B")
        self.compare = w.Checkbox(value=compare, description="compare with a second configuration",
                                  indent=False)
        # Inline SVG in an HTML widget (not an Image) so the boxes' hover tooltips work.
        self.trace = w.HTML(layout=w.Layout(overflow="auto"))
        self.trace.add_class("ipu-playground-trace")
        self.metrics = w.HTML()
        self.message = w.HTML()
        self.results: List[PlaygroundResult] = []
        self.last_valid: List[PlaygroundResult] = []
        self.redraw_count = 0
        for control in self.controls.value_widgets + self.compare_controls.value_widgets:
            control.observe(self._on_change, names="value")
        self.compare.observe(self._on_change, names="value")
        self._second_panel = w.VBox([self.compare_controls])
        super().__init__([self.controls, self.compare, self._second_panel, self.message,
                          self.trace, self.metrics])
        self.refresh()

    # -- reading the controls -----------------------------------------------------------

    def configs(self) -> List[PlaygroundConfig]:
        configs = [self.controls.config()]
        if self.compare.value:
            configs.append(self.compare_controls.config())
        return configs

    # -- redrawing ----------------------------------------------------------------------

    def _on_change(self, change) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Simulate the current controls and redraw; never raises."""
        try:
            self._second_panel.layout.display = None if self.compare.value else "none"
            self.results = [simulate(config) for config in self.configs()]
            errors = [(label, r.error) for label, r in zip("AB", self.results) if not r.ok]
            if errors:
                self.message.value = _error_html(errors, keeps_last=bool(self.last_valid))
                return
            self.message.value = ""
            self.last_valid = list(self.results)
            self.trace.value = render_svg([r.timeline for r in self.results])
            self.metrics.value = metrics_html(self.results)
            self.redraw_count += 1
        except Exception:  # pylint: disable=broad-except  (a widget must not break the kernel)
            self.message.value = _error_html(
                [("", "unexpected error in the playground:\n" + traceback.format_exc(limit=3))],
                keeps_last=bool(self.last_valid))


def render_svg(timelines: List[Timeline], width: int = 960) -> str:
    """Draw timelines stacked on one shared simulated-time axis as inline SVG.

    SVG text takes milliseconds where matplotlib takes a few hundred, so the trace keeps up
    with a dragged slider; hovering over a box names it.
    """
    # The host's launch of the engine run (about 1 ms) would dwarf a small pipeline, so the
    # view starts where the IPUs start; the title says what was left out.
    start = min(_first_ipu_event(t) for t in timelines)
    titles = [t.title + (f"  ({svg.launch_note(start)})" if start > 0 else "")
              for t in timelines]
    return svg.timeline_svg(timelines, width=width, start=start, titles=titles)


def _first_ipu_event(timeline: Timeline) -> float:
    starts = [e.start for e in timeline.events if e.ipu is not None]
    return min(starts) if starts else 0.0


def metrics_html(results: List[PlaygroundResult]) -> str:
    """A compact table of each configuration's metrics (simulated IPU time)."""
    rows = []
    for label, result in zip("AB", results):
        m = result.timeline.metrics
        capacity = get_target(result.config.ipu_version).sram_bytes_per_chip
        memory = ", ".join(
            ("<span style='color:#c00'>IPU%d %s (out of memory)</span>" if m.out_of_memory.get(ipu)
             else "IPU%d %s") % (ipu, _megabytes(peak))
            for ipu, peak in sorted(m.peak_memory_bytes.items()))
        utilisation = ", ".join(f"IPU{ipu} {share:.0%}" for ipu, share in sorted(m.utilisation.items()))
        in_flight = ", ".join(f"IPU{ipu} {n}" for ipu, n in sorted(m.peak_in_flight.items()))
        throughput = (f"{m.samples_per_second:,.0f} samples/s" if m.samples_per_second
                      and not result.config.unit_cost else "n/a in unit-cost mode")
        rows.append(
            f"<tr><td><b>{label}</b></td><td>{escape(result.timeline.title)}</td>"
            f"<td>{views.format_seconds(m.makespan) if not result.config.unit_cost else f'{m.makespan:g} units'}</td>"
            f"<td>{m.bubble_fraction:.0%}</td><td>{utilisation}</td><td>{in_flight}</td>"
            f"<td>{memory} of {_megabytes(capacity)}</td><td>{throughput}</td></tr>")
    header = ("<tr><th></th><th>configuration</th><th>makespan (simulated IPU time)</th>"
              "<th>bubble</th><th>utilisation</th><th>peak in flight</th><th>peak memory</th>"
              "<th>throughput</th></tr>")
    return f"<table style='font-size:90%'>{header}{''.join(rows)}</table>"


def _megabytes(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.1f} MB"


def _error_html(errors, keeps_last: bool) -> str:
    parts = [f"<b>{escape(label)}</b> " if label else "" for label, _ in errors]
    texts = [f"{prefix}<code style='white-space:pre-wrap'>{escape(text)}</code>"
             for prefix, (_, text) in zip(parts, errors)]
    note = " The trace below is the last valid one." if keeps_last else ""
    return ("<div style='color:#a00;border-left:3px solid #a00;padding-left:6px'>"
            f"{'<br>'.join(texts)}<br><i>This configuration cannot run.{note}</i></div>")
