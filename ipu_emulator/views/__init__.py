"""Views of a simulated timeline: the execution trace (matplotlib or SVG), a text summary,
Chrome-trace JSON for Perfetto.  Plain Python (matplotlib only when plotting); no TensorFlow.
Every time shown names its clock, so simulated IPU time is never mistaken for host wall time::

    >>> from ipu_emulator.record import ComputeCost, EngineRun
    >>> from ipu_emulator.sim.timeline import simulate_engine_runs
    >>> run = EngineRun("train", 10, ComputeCost(forward_flops=1e9, backward_flops=2e9),
    ...                 infeed_bytes_per_iteration=4096)
    >>> timeline = simulate_engine_runs([run] * 3, title="looped")
    >>> print(summary_table(timeline).splitlines()[0])
    Simulated IPU timeline: looped
    >>> trace = to_chrome_trace(timeline)        # json.dump it and open in ui.perfetto.dev
    >>> ax = plot_timeline(timeline)              # doctest: +SKIP
    >>> figure = show_trace(timeline)             # SVG in a notebook, no matplotlib needed
"""
from ipu_emulator.views.export import save_chrome_trace, to_chrome_trace, to_dict
from ipu_emulator.views.matplotlib_trace import plot_comparison, plot_timeline
from ipu_emulator.views.style import (KIND_COLOURS, PHASE_COLOURS, format_seconds,
                                      pick_time_unit, time_unit_scale)
from ipu_emulator.views.summary import summary_table
from ipu_emulator.views.svg import timeline_svg
from ipu_emulator.views.trace_figure import show_trace
from ipu_emulator.views.zoom import ipu_window

__all__ = [
    "KIND_COLOURS", "PHASE_COLOURS", "format_seconds", "pick_time_unit", "time_unit_scale",
    "plot_timeline", "plot_comparison", "summary_table", "timeline_svg", "show_trace",
    "to_chrome_trace", "save_chrome_trace", "to_dict", "ipu_window",
]
