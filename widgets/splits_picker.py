"""``SplitsPicker``: choose where a model is cut into pipeline stages, see what the IPUs
would do with that cut, and hand the choice to code that trains it for real.

Step 4 of Graphcore's pipelining tutorial makes the stages a run-time option: a list of
*splits*, each naming the layer that starts the next stage, so N splits give N + 1 stages.
This widget is that option as a control:

    from ipu_lab_widgets.splits_picker import SplitsPicker
    picker = SplitsPicker(splits=("dense32",))
    picker                      # pick layers; the simulated trace redraws at once
    picker.splits               # ("dense32",), in model order
    picker.on_train(my_train)   # the button then calls my_train(picker) (e.g. real training)

The pure part (``evaluate`` and the small helpers) needs no widget; the widget owns no
logic: controls -> ``evaluate`` -> drawing.  A choice the SDK would refuse shows the SDK's
message and keeps the last valid trace; nothing here raises into the kernel, and nothing
imports TensorFlow (training is the callback's business).
"""
from __future__ import annotations

import traceback
from dataclasses import dataclass
from html import escape
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import ipywidgets as w

from ipu_emulator.sim import builtin_models, cost_model, schedule_rules
from ipu_emulator.sim.timeline import COMPUTE_KINDS, Timeline
from .playground import metrics_html, render_svg
from ipu_emulator.sim.hardware import next_power_of_two
from .playground_model import (PlaygroundConfig, PlaygroundResult, error_text, split_points,
                               ordered_splits, simulate)

PICKER_SCHEDULES = ("grouped", "interleaved", "sequential")
# What an IPU spends its own time on in a pipeline step.  Syncs and IPU-Link exchanges are
# paid by every IPU alike, so they do not make one IPU slower than another.
OWN_WORK_KINDS = frozenset(COMPUTE_KINDS) | {"stream_copy"}


# --- the pure part -------------------------------------------------------------------------


def ipus_for_splits(splits: Sequence[str]) -> int:
    """IPUs to ask for: one per stage (``len(splits) + 1``), rounded up to a device size
    that exists.  The IPUs beyond the stages stay idle (one stage per IPU here)."""
    return next_power_of_two(len(tuple(splits)) + 1)


def accumulation_count_for(schedule: str, num_stages: int, at_least: int = 16) -> int:
    """The smallest gradient accumulation count >= ``at_least`` that ``schedule`` accepts
    for ``num_stages`` training stages (a multiple of the schedule's overlap: 2N for
    Grouped, N for Interleaved, anything for Sequential)."""
    overlap = schedule_rules.pipeline_overlap(schedule, num_stages, training=True)
    return max(1, -(-max(at_least, 1) // overlap)) * overlap


def ipu_work(timeline: Timeline) -> Dict[int, float]:
    """Seconds each IPU spends on its own work (compute and stream copies)."""
    return {ipu: sum(t for kind, t in by_kind.items() if kind in OWN_WORK_KINDS)
            for ipu, by_kind in sorted(timeline.metrics.busy_time_by_kind.items())}


def imbalance(timeline: Timeline) -> float:
    """Busiest IPU's own work over the mean of all IPUs' (1.0 = perfectly balanced).

    In a bulk-synchronous pipeline every step waits for the slowest IPU, so this ratio,
    not the total amount of work, is what a good split keeps small."""
    work = list(ipu_work(timeline).values())
    mean = sum(work) / len(work) if work else 0.0
    return max(work) / mean if mean > 0 else 1.0


@dataclass(frozen=True)
class SplitChoice:
    """One choice of splits and what it means: its stages (layer names), the device size
    to ask for, the accumulation count used, and the simulated result (or the error)."""

    splits: Tuple[str, ...]
    stages: Tuple[Tuple[str, ...], ...]
    num_ipus: int
    gradient_accumulation_count: int
    result: PlaygroundResult

    @property
    def ok(self) -> bool:
        return self.result.ok

    @property
    def error(self) -> Optional[str]:
        return self.result.error


def evaluate(splits: Sequence[str], model: str = "tutorial-mlp", schedule: str = "grouped",
             batch_size: int = 32, repeat_count: int = 1, min_accumulation: int = 16,
             unit_cost: bool = False) -> SplitChoice:
    """Simulate the pipeline that ``splits`` make of ``model``; never raises.

    The gradient accumulation count is the smallest one the schedule accepts that is at
    least ``min_accumulation``, so every valid split can be compared.  Bad splits (unknown,
    repeated, leaving stage 0 empty, or none at all) come back as ``result.error`` with
    the message the SDK or the cost model gives.
    """
    picked = tuple(splits)
    try:
        ordered = ordered_splits(model, picked)
        stages = cost_model.split_stages(builtin_models.builtin_model(model), ordered)
        num_stages = len(stages)
        gac = accumulation_count_for(schedule, num_stages, min_accumulation)
    except Exception as error:  # pylint: disable=broad-except  (shown to the learner)
        config = PlaygroundConfig(model=model, splits=picked, schedule=schedule,
                                  batch_size=batch_size, repeat_count=repeat_count,
                                  unit_cost=unit_cost)
        return SplitChoice(picked, (), 0, 0, PlaygroundResult(
            config=config, error=error_text(error)))
    config = PlaygroundConfig(model=model, splits=ordered, schedule=schedule,
                              gradient_accumulation_count=gac, batch_size=batch_size,
                              repeat_count=repeat_count, unit_cost=unit_cost)
    return SplitChoice(ordered, stages, ipus_for_splits(ordered), gac, simulate(config))


def describe_stages(stages: Sequence[Sequence[str]]) -> List[str]:
    """``["0. flatten-dense256", "1. dense128-..."]``: the stages as the tutorial prints them."""
    return [f"{index}. {'-'.join(layers)}" for index, layers in enumerate(stages)]


# --- the widget ----------------------------------------------------------------------------


class SplitsPicker(w.VBox):
    """A layer list to pick splits from, the simulated trace of the resulting pipeline, and
    a button that hands the choice to a training callback (see ``on_train``)."""

    def __init__(self, splits: Sequence[str] = ("dense32",), model: str = "tutorial-mlp",
                 schedule: str = "grouped", batch_size: int = 32, min_accumulation: int = 16,
                 on_train: Optional[Callable[["SplitsPicker"], object]] = None):
        self.model = model
        self.batch_size = batch_size
        self.min_accumulation = min_accumulation
        style = {"description_width": "initial"}
        self.layers = w.SelectMultiple(options=split_points(model),
                                       value=ordered_splits(model, splits), rows=7,
                                       description="new stage at", style=style)
        self.schedule = w.Dropdown(options=PICKER_SCHEDULES, value=schedule,
                                   description="schedule", style=style)
        self.train_button = w.Button(description="train with this split", icon="play",
                                     disabled=on_train is None)
        self.summary = w.HTML()
        self.message = w.HTML()
        # Inline SVG in an HTML widget so the boxes' hover tooltips work.
        self.trace = w.HTML(layout=w.Layout(overflow="auto"))
        self.metrics = w.HTML()
        self.output = w.Output()
        self.choice: Optional[SplitChoice] = None
        self.last_valid: Optional[SplitChoice] = None
        self.redraw_count = 0
        self.train_count = 0
        self._train_callback = on_train
        self.layers.observe(self._on_change, names="value")
        self.schedule.observe(self._on_change, names="value")
        self.train_button.on_click(self._on_train_clicked)
        super().__init__([
            w.HBox([self.layers, w.VBox([self.schedule, self.summary, self.train_button])]),
            self.message, self.trace, self.metrics, self.output])
        self.refresh()

    @property
    def splits(self) -> Tuple[str, ...]:
        """The picked splits in model order (what ``--splits`` would be given)."""
        return ordered_splits(self.model, self.layers.value)

    def on_train(self, callback: Callable[["SplitsPicker"], object]) -> None:
        """Call ``callback(picker)`` when the button is clicked; its output (prints, plots)
        appears below the trace."""
        self._train_callback = callback
        self.train_button.disabled = False

    def _on_change(self, change) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Evaluate the current choice and redraw; never raises."""
        try:
            self.choice = evaluate(self.splits, self.model, self.schedule.value,
                                   self.batch_size, min_accumulation=self.min_accumulation)
            if not self.choice.ok:
                self.message.value = _error_html(self.choice.error, bool(self.last_valid))
                self.summary.value = ""
                self.train_button.disabled = True
                return
            self.message.value = ""
            self.last_valid = self.choice
            self.summary.value = summary_html(self.choice)
            self.trace.value = render_svg([self.choice.result.timeline])
            self.metrics.value = metrics_html([self.choice.result])
            self.train_button.disabled = self._train_callback is None
            self.redraw_count += 1
        except Exception:  # pylint: disable=broad-except  (a widget must not break the kernel)
            self.message.value = _error_html(
                "unexpected error in the splits picker:\n" + traceback.format_exc(limit=3),
                bool(self.last_valid))

    def _on_train_clicked(self, _button) -> None:
        if self._train_callback is None or self.choice is None or not self.choice.ok:
            return
        self.train_button.disabled = True
        self.output.clear_output()
        with self.output:
            try:
                self._train_callback(self)
                self.train_count += 1
            except Exception:  # pylint: disable=broad-except  (shown, never raised)
                print("Training with this split failed:\n" + traceback.format_exc(limit=4))
        self.train_button.disabled = False


def summary_html(choice: SplitChoice) -> str:
    stages = "<br>".join(escape(line) for line in describe_stages(choice.stages))
    spare = choice.num_ipus - len(choice.stages)
    device = (f"{choice.num_ipus} IPUs" + (f" ({spare} spare: devices come in powers of two)"
                                           if spare else ""))
    timeline = choice.result.timeline
    return (f"<div style='font-size:90%'><b>{len(choice.stages)} stages</b> on {device}<br>"
            f"{stages}<br>gradient accumulation count {choice.gradient_accumulation_count}"
            f"<br>imbalance {imbalance(timeline):.2f} (busiest IPU's own work / mean)</div>")


def _error_html(text: str, keeps_last: bool) -> str:
    note = " The trace below is the last valid one." if keeps_last else ""
    return ("<div style='color:#a00;border-left:3px solid #a00;padding-left:6px'>"
            f"<code style='white-space:pre-wrap'>{escape(text)}</code><br>"
            f"<i>This split cannot run.{note}</i></div>")


__all__ = ["SplitsPicker", "SplitChoice", "evaluate", "ipus_for_splits", "next_power_of_two",
           "accumulation_count_for", "ipu_work", "imbalance", "describe_stages"]
