"""The SVG trace as a notebook figure: what a cell shows when it ends with ``show_trace(...)``.

The same cell runs in JupyterLab and in JupyterLite's browser kernel, where no matplotlib
exists: the picture is ``views.timeline_svg``'s, written in pure Python.

    >>> from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    >>> grouped = simulate_pipeline(unit_stages(2), "grouped", 4, unit_cost=True)
    >>> figure = show_trace(grouped, titles=["Grouped, 2 stages"])
    >>> figure
    execution trace (SVG): Grouped, 2 stages
    >>> figure._repr_svg_().startswith('<svg xmlns="http://www.w3.org/2000/svg" width="100%"')
    True

The figure offers Jupyter two forms: the SVG, and a line of text naming what it shows.
JupyterLab draws an SVG output only once the notebook is trusted (after the cell has run on
this machine); a stored notebook opened from a fresh clone shows the text line instead of an
unreadable half-sanitised picture.  (The SVG is drawn as an image, so its hover tooltips are
the widgets' only: ``PipelinePlayground`` shows the same picture inline.)

JupyterLab draws an SVG output as an ``<img>`` that nothing shrinks to the notebook's width:
a 960-pixel trace would be cut off beside the file browser on a laptop.  So the figure is
offered with ``width="100%"`` and its ``viewBox`` kept: it fills the output area's width,
its proportions kept, whatever the screen (``svg`` holds the picture at its drawn size).
"""
from __future__ import annotations

import re
from typing import List, Sequence, Union

from ipu_emulator.sim.timeline import Timeline
from ipu_emulator.views.svg import timeline_svg


class TraceFigure:
    """One or more timelines on one time axis, displayed as SVG (``timeline_svg``'s options:
    ``titles``, ``follow_micro_batch``, ``fold_idle``, ``memory``, ``width``, ...)."""

    def __init__(self, timelines: Union[Timeline, Sequence[Timeline]], **options):
        self.timelines: List[Timeline] = (
            [timelines] if isinstance(timelines, Timeline) else list(timelines))
        self.svg = timeline_svg(self.timelines, **options)
        titles = options.get("titles") or [t.title for t in self.timelines]
        self.titles = [title or "untitled" for title in titles]

    def _repr_svg_(self) -> str:
        return fluid(self.svg)

    def __repr__(self) -> str:
        return "execution trace (SVG): " + "; ".join(self.titles)


_SIZE = re.compile(r'^(<svg [^>]*?)width="[\d.]+" height="[\d.]+" ')


def fluid(svg: str) -> str:
    """``svg`` (with a ``viewBox``) sized to fill its container's width, proportions kept.

    >>> fluid('<svg xmlns="http://www.w3.org/2000/svg" width="960" height="90" viewBox="0 0 960 90"/>')
    '<svg xmlns="http://www.w3.org/2000/svg" width="100%" viewBox="0 0 960 90"/>'
    """
    if "viewBox=" not in svg.split(">", 1)[0]:
        return svg   # without a viewBox the drawing could not be scaled: keep its size
    return _SIZE.sub(r'\1width="100%" ', svg, count=1)


def show_trace(timelines: Union[Timeline, Sequence[Timeline]], **options) -> TraceFigure:
    """The figure of ``timelines`` (one, or several stacked on one time axis); leave it last
    in a cell, or pass it to ``IPython.display.display``.  Raises ``ValueError`` as
    ``timeline_svg`` does (no timeline, a micro-batch to follow that is not there)."""
    return TraceFigure(timelines, **options)


__all__ = ["TraceFigure", "show_trace", "fluid"]
