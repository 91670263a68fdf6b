"""``views.show_trace``: the SVG trace as a notebook figure, the same in JupyterLab and in
JupyterLite (no matplotlib): the picture timeline_svg draws, a text line naming it for a
notebook JupyterLab does not trust yet, and the errors timeline_svg raises."""
import xml.etree.ElementTree as ET

import pytest
from IPython.core.formatters import DisplayFormatter

from ipu_emulator import views
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
from ipu_emulator.views.legibility import svg_problems
from ipu_emulator.views.trace_figure import TraceFigure, fluid, show_trace
from tests.support.child_python import run_python


def pipeline(schedule="grouped", micro_batches=8):
    return simulate_pipeline(unit_stages(4), schedule, micro_batches, unit_cost=True,
                             title=f"{schedule} pipeline")


def test_the_figure_is_timeline_svgs_picture_and_legible():
    timelines = [pipeline("grouped"), pipeline("interleaved")]
    figure = show_trace(timelines, titles=["A", "B"], follow_micro_batch=0)
    assert figure.svg == views.timeline_svg(timelines, titles=["A", "B"], follow_micro_batch=0)
    assert svg_problems(figure.svg) == []
    # Offered to Jupyter at its container's width, proportions kept: the same drawing.
    drawn, shown = ET.fromstring(figure.svg), ET.fromstring(figure._repr_svg_())
    assert shown.tag == "{http://www.w3.org/2000/svg}svg"
    assert shown.get("width") == "100%" and shown.get("height") is None
    assert shown.get("viewBox") == drawn.get("viewBox") == (
        f"0 0 {drawn.get('width')} {drawn.get('height')}")
    assert list(shown) and [child.tag for child in shown] == [child.tag for child in drawn]


def test_the_text_form_names_what_the_picture_shows():
    one = pipeline("gpipe")
    assert repr(show_trace(one)) == "execution trace (SVG): gpipe pipeline"
    assert repr(show_trace([one, pipeline("1f1b")], titles=["GPipe", "1F1B"])) == (
        "execution trace (SVG): GPipe; 1F1B")
    assert isinstance(show_trace(one), TraceFigure) and show_trace(one).timelines == [one]


def test_ipython_displays_it_as_svg_with_a_text_fallback():
    shown, _ = DisplayFormatter().format(show_trace(pipeline()))
    assert set(shown) == {"image/svg+xml", "text/plain"}
    assert shown["image/svg+xml"].startswith("<svg")
    assert 'width="100%"' in shown["image/svg+xml"]


def test_bad_requests_raise_as_timeline_svg_does():
    with pytest.raises(ValueError, match="at least one timeline"):
        show_trace([])
    with pytest.raises(ValueError, match="micro-batches 0 to 7"):
        show_trace(pipeline(), follow_micro_batch=8)


def test_it_needs_no_matplotlib():
    """What JupyterLite's kernel has: no matplotlib, no NumPy."""
    code = ("import sys; sys.modules['matplotlib'] = sys.modules['numpy'] = None\n"
            "from ipu_emulator import views\n"
            "from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages\n"
            "t = simulate_pipeline(unit_stages(2), 'grouped', 4, unit_cost=True)\n"
            "print(views.show_trace(t)._repr_svg_()[:4])")
    result = run_python(code, timeout=120)
    assert result.stdout.strip() == "<svg", result.stderr[-2000:]


def test_a_picture_without_a_viewbox_keeps_its_size():
    fixed = '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="5"><rect/></svg>'
    assert fluid(fixed) == fixed
