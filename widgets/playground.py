"""``PipelinePlayground``: change a pipeline's splits, schedule, repeat count and more, and
watch the simulated IPU trace, utilisation and memory update at once.

    from ipu_lab_widgets import PipelinePlayground
    PipelinePlayground()                      # the pipelining tutorial's model, 4 stages
    PipelinePlayground(compare=True)          # two configurations, one above the other
    PipelinePlayground(predict=True)          # the class guesses which is faster, then sees

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
from ipu_emulator.sim.bubbles import bubble_breakdown, textbook_bubble
from ipu_emulator.sim.hardware import get_target
from ipu_emulator.sim.timeline import Timeline
from .playground_model import (ACCUMULATION_DTYPES, IPU_VERSIONS, SCHEDULES, PlaygroundConfig,
                               PlaygroundResult, ordered_splits, simulate, split_points)

_BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_REPLICAS = (1, 2, 4, 8)
_BACKWARD_RATIOS = (("1 : 1", 1.0), ("1.5 : 1", 1.5), ("2 : 1", 2.0), ("3 : 1", 3.0))
_GUESSES = (("A", "A"), ("B", "B"), ("the same", "same"))
_DEFAULT_SPLITS = {"tutorial-mlp": ("dense128", "dense64", "dense32"),
                   "tutorial-convnet": ("conv2",)}


class ConfigControls(w.VBox):
    """The controls for one configuration; ``config()`` reads them."""

    def __init__(self, config: PlaygroundConfig, title: str = ""):
        style = {"description_width": "initial"}
        self.model = w.Dropdown(options=("tutorial-mlp", "tutorial-convnet"), value=config.model,
                                description="model", style=style)
        self.splits = w.SelectMultiple(options=split_points(config.model), value=config.splits,
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
        self.backward_ratio = w.Dropdown(options=_BACKWARD_RATIOS, value=config.backward_ratio,
                                         description="backward : forward", style=style,
                                         disabled=not config.unit_cost)
        self.synthetic_data = w.Checkbox(value=config.synthetic_data, indent=False,
                                         description="synthetic data (no host transfers)",
                                         disabled=config.unit_cost)
        self.offload_weights = w.Checkbox(value=config.offload_weights, indent=False,
                                          description="offload optimizer state")
        self.offload_activations = w.Checkbox(value=config.offload_activations, indent=False,
                                              description="offload activations")
        self.accumulation_dtype = w.Dropdown(options=tuple(ACCUMULATION_DTYPES),
                                             value=config.accumulation_dtype,
                                             description="accumulators", style=style)
        self.model.observe(self._model_changed, names="value")
        # Unit costs have no bytes and no host: those controls only matter with real costs.
        self.unit_cost.observe(self._unit_cost_changed, names="value")
        heading = [w.HTML(f"<b>{escape(title)}</b>")] if title else []
        super().__init__(heading + [
            w.HBox([self.model, self.schedule]),
            w.HBox([self.splits, w.VBox([self.gradient_accumulation_count, self.repeat_count,
                                         self.batch_size, self.replicas])]),
            w.HBox([self.unit_cost, self.backward_ratio, self.synthetic_data]),
            w.HBox([self.ipu_version, self.recompute]),
            w.HBox([self.offload_weights, self.offload_activations, self.accumulation_dtype]),
        ])

    @property
    def value_widgets(self) -> List[w.ValueWidget]:
        return [self.model, self.splits, self.schedule, self.gradient_accumulation_count,
                self.repeat_count, self.batch_size, self.replicas, self.recompute,
                self.ipu_version, self.unit_cost, self.backward_ratio, self.synthetic_data,
                self.offload_weights, self.offload_activations, self.accumulation_dtype]

    def _model_changed(self, change) -> None:
        # A different model has different layers: offer its layers and a sensible split.
        self.splits.value = ()
        self.splits.options = split_points(change["new"])
        self.splits.value = _DEFAULT_SPLITS.get(change["new"], ())

    def _unit_cost_changed(self, change) -> None:
        self.backward_ratio.disabled = not change["new"]
        self.synthetic_data.disabled = change["new"]

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
            unit_cost=self.unit_cost.value,
            backward_ratio=self.backward_ratio.value,
            synthetic_data=self.synthetic_data.value,
            offload_weights=self.offload_weights.value,
            offload_activations=self.offload_activations.value,
            accumulation_dtype=self.accumulation_dtype.value)


class PipelinePlayground(w.VBox):
    """Controls, the simulated trace (SVG), a metrics table and a message line.

    ``follow`` picks one micro-batch to outline across the IPUs.  ``predict=True`` (with
    ``compare``) is for the classroom: the traces stay hidden until the learner has said
    which configuration finishes first and pressed *reveal*; any change hides them again.
    """

    def __init__(self, config: Optional[PlaygroundConfig] = None,
                 compare_with: Optional[PlaygroundConfig] = None, compare: bool = False,
                 predict: bool = False):
        config = config or PlaygroundConfig()
        compare_with = compare_with or config.with_changes(schedule="interleaved")
        self.controls = ConfigControls(config, title="configuration A")
        self.compare_controls = ConfigControls(compare_with, title="configuration B")
        self.compare = w.Checkbox(value=compare or predict, indent=False,
                                  description="compare with a second configuration")
        self.follow = w.Dropdown(options=_follow_options(config.gradient_accumulation_count),
                                 value=None, description="follow micro-batch",
                                 style={"description_width": "initial"})
        self.predict = w.Checkbox(value=predict, indent=False,
                                  description="predict, then reveal")
        self.guess = w.ToggleButtons(options=_GUESSES, value=None,
                                     description="Which finishes first?",
                                     style={"description_width": "initial"})
        self.reveal = w.Button(description="reveal", icon="eye", disabled=True)
        self.verdict = w.HTML()
        # Inline SVG in an HTML widget (not an Image) so the boxes' hover tooltips work.
        self.trace = w.HTML(layout=w.Layout(overflow="auto"))
        self.trace.add_class("ipu-playground-trace")
        self.metrics = w.HTML()
        self.message = w.HTML()
        self.results: List[PlaygroundResult] = []
        self.last_valid: List[PlaygroundResult] = []
        self.redraw_count = 0
        self.revealed = False
        for control in self.controls.value_widgets + self.compare_controls.value_widgets:
            control.observe(self._on_change, names="value")
        for control in (self.compare, self.follow, self.predict):
            control.observe(self._on_change, names="value")
        self.controls.gradient_accumulation_count.observe(self._count_changed, names="value")
        self.guess.observe(self._guessed, names="value")
        self.reveal.on_click(self._reveal)
        self._second_panel = w.VBox([self.compare_controls])
        self._prediction = w.VBox([w.HBox([self.guess, self.reveal]), self.verdict])
        self._shown = w.VBox([self.trace, self.metrics])
        super().__init__([self.controls, w.HBox([self.compare, self.predict, self.follow]),
                          self._second_panel, self._prediction, self.message, self._shown])
        self.refresh()

    # -- reading the controls -----------------------------------------------------------

    def configs(self) -> List[PlaygroundConfig]:
        configs = [self.controls.config()]
        if self.compare.value or self.predict.value:
            configs.append(self.compare_controls.config())
        return configs

    # -- redrawing ----------------------------------------------------------------------

    def _on_change(self, change) -> None:
        self.revealed = False  # a new question: predict again
        self.guess.value = None
        self.refresh()

    def _count_changed(self, change) -> None:
        self.follow.options = _follow_options(change["new"])

    def _guessed(self, change) -> None:
        self.reveal.disabled = change["new"] is None

    def _reveal(self, _button=None) -> None:
        self.revealed = True
        self.refresh()

    def hidden(self) -> bool:
        """Whether the traces wait for a prediction."""
        return self.predict.value and not self.revealed

    def refresh(self) -> None:
        """Simulate the current controls and redraw; never raises."""
        try:
            predicting = self.predict.value
            self._second_panel.layout.display = (None if self.compare.value or predicting
                                                 else "none")
            self._prediction.layout.display = None if predicting else "none"
            self._shown.layout.display = "none" if self.hidden() else None
            self.results = [simulate(config) for config in self.configs()]
            errors = [(label, r.error) for label, r in zip("AB", self.results) if not r.ok]
            if errors:
                self.message.value = _error_html(errors, keeps_last=bool(self.last_valid))
                self.verdict.value = ""
                return
            self.message.value = ""
            self.last_valid = list(self.results)
            self.verdict.value = (verdict_html(self.guess.value, self.results)
                                  if predicting and self.revealed else "")
            if self.hidden():
                return  # nothing drawn that could give the answer away
            self.trace.value = render_svg([r.timeline for r in self.results],
                                          follow_micro_batch=self.follow.value)
            self.metrics.value = metrics_html(self.results)
            self.redraw_count += 1
        except Exception:  # pylint: disable=broad-except  (a widget must not break the kernel)
            self.message.value = _error_html(
                [("", "unexpected error in the playground:\n" + traceback.format_exc(limit=3))],
                keeps_last=bool(self.last_valid))


def _follow_options(micro_batches: int):
    # A dropdown of at most 64 entries stays usable; later micro-batches look the same.
    return [("none", None)] + [(str(k), k) for k in range(min(micro_batches, 64))]


def winner(results: List[PlaygroundResult]) -> str:
    """``"A"``, ``"B"`` or ``"same"``: which configuration has the shorter makespan (within
    0.5 %, the same)."""
    a, b = (r.timeline.metrics.makespan for r in results[:2])
    if abs(a - b) <= 0.005 * max(a, b):
        return "same"
    return "A" if a < b else "B"


def verdict_html(guess: Optional[str], results: List[PlaygroundResult]) -> str:
    """What the reveal says: right or not, and both makespans."""
    answer = winner(results)
    spans = " vs ".join(f"{label} {_makespan_text(r)}" for label, r in zip("AB", results))
    named = {"A": "A finishes first", "B": "B finishes first", "same": "they tie"}[answer]
    mark = ("<b style='color:#060'>Right:</b>" if guess == answer
            else "<b style='color:#a00'>Not quite:</b>")
    return f"{mark} {named} ({spans}). Look at the bubble column for why."


def render_svg(timelines: List[Timeline], width: int = 960,
               follow_micro_batch: Optional[int] = None) -> str:
    """Draw timelines stacked on one shared simulated-time axis as inline SVG.

    SVG text takes milliseconds where matplotlib takes a few hundred, so the trace keeps up
    with a dragged slider; hovering over a box names it.  The host's engine-run launch
    (about 1 ms, longer than a small pipeline) is folded to a narrow band.
    """
    follow = follow_micro_batch if all(
        any(e.micro_batch == follow_micro_batch for e in t.events) for t in timelines) else None
    # Compute boxes at least 4 px wide, so 64 micro-batches stay legible (the trace scrolls).
    return svg.timeline_svg(timelines, width=width, follow_micro_batch=follow, min_box_px=4)


def metrics_html(results: List[PlaygroundResult]) -> str:
    """A compact table of each configuration's metrics (simulated IPU time), with the
    bubble split by cause and, in unit-cost mode, the textbook (S-1)/(M+S-1) beside it."""
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
            f"<td>{_makespan_text(result)}</td><td>{bubble_html(result)}</td>"
            f"<td>{utilisation}</td><td>{in_flight}</td>"
            f"<td>{memory} of {_megabytes(capacity)}</td><td>{throughput}</td></tr>")
    header = ("<tr><th></th><th>configuration</th><th>makespan (simulated IPU time)</th>"
              "<th>bubble</th><th>utilisation</th><th>peak in flight</th><th>peak memory</th>"
              "<th>throughput</th></tr>")
    return f"<table style='font-size:90%'>{header}{''.join(rows)}</table>"


def bubble_html(result: PlaygroundResult) -> str:
    """``'16% = ramp-up 8% + ramp-down 8%'``, and the textbook value in unit-cost mode."""
    timeline = result.timeline
    parts = [f"{cause} {share:.0%}" for cause, share in bubble_breakdown(timeline).items()
             if share >= 0.005]
    text = f"<b>{timeline.metrics.bubble_fraction:.0%}</b>" + (
        f" = {' + '.join(parts)}" if parts else "")
    if result.config.unit_cost:
        s, m = result.config.num_stages, result.config.gradient_accumulation_count
        text += (f"<br><i>textbook (S-1)/(M+S-1) = {s - 1}/{m + s - 1} = "
                 f"{textbook_bubble(s, m):.0%}</i>")
    return text


def _makespan_text(result: PlaygroundResult) -> str:
    m = result.timeline.metrics
    return f"{m.makespan:g} time steps" if result.config.unit_cost else views.format_seconds(m.makespan)


def _megabytes(nbytes: float) -> str:
    return f"{nbytes / 1e6:,.1f} MB"


def _error_html(errors, keeps_last: bool) -> str:
    parts = [f"<b>{escape(label)}</b> " if label else "" for label, _ in errors]
    texts = [f"{prefix}<code style='white-space:pre-wrap'>{escape(text)}</code>"
             for prefix, (_, text) in zip(parts, errors)]
    note = " The trace below is the last valid one." if keeps_last else ""
    return ("<div style='color:#a00;border-left:3px solid #a00;padding-left:6px'>"
            f"{'<br>'.join(texts)}<br><i>This configuration cannot run.{note}</i></div>")
