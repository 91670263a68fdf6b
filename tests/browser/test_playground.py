"""The pipeline playground as a learner meets it: notebook 08 in JupyterLab, in Chromium.

Choosing another schedule in the widget must redraw the trace the learner sees (compared as
screenshots, so a redraw that changed nothing visible fails), and an invalid gradient
accumulation count must show the SDK's message while the last valid trace stays.
"""
import pytest

from tests.support.lab_driver import (colour_share, error_outputs, images_differ, notebook_panel,
                        pixel_difference, run_all_cells, screenshot,
                        screenshots_dir, select_dropdown, show_notebook, wait_for_html_change,
                        widget_html)

pytestmark = pytest.mark.browser

NOTEBOOK = "08_pipeline_playground.ipynb"
TRACE_CLASS = "ipu-playground-trace"


@pytest.fixture(scope="module")
def playground(_module_page, lab):
    """Notebook 08 run once in a kernel for this module's tests (each drives its widgets);
    a kernel's start and a Run All for each test would check nothing more."""
    show_notebook(_module_page, lab, NOTEBOOK)
    run_all_cells(_module_page)
    return _module_page


def test_changing_the_schedule_redraws_the_trace(playground, shared_page):
    page = playground
    assert error_outputs(page) == []

    trace = widget_html(page, TRACE_CLASS)
    trace.locator("svg").wait_for(state="visible")
    assert "grouped" in trace.inner_text()
    before_html = trace.inner_html()
    before = screenshot(trace, screenshots_dir() / "08_playground_grouped.png")
    for colour in ("#0072B2", "#D55E00"):  # forward and backward boxes as rendered
        assert colour_share(before, colour) > 0.01

    select_dropdown(page, "schedule", "interleaved")
    wait_for_html_change(trace, before_html)
    after = screenshot(trace, screenshots_dir() / "08_playground_interleaved.png")
    assert "interleaved" in trace.inner_text()
    assert images_differ(before, after), "the trace looks the same after changing the schedule"


def test_an_invalid_count_shows_the_sdk_message_and_keeps_the_trace(playground, shared_page,
                                                                    tmp_path):
    page = playground
    trace = widget_html(page, TRACE_CLASS)
    trace.locator("svg").wait_for(state="visible")
    if "grouped" not in trace.inner_text():      # the test before chose another schedule
        before_html = trace.inner_html()
        select_dropdown(page, "schedule", "grouped")
        wait_for_html_change(trace, before_html)
    assert "grouped" in trace.inner_text()
    before = screenshot(trace)

    count = notebook_panel(page).locator(".widget-inline-hbox").filter(
        has_text="gradient accumulation count").locator("input").first
    count.fill("6")
    count.press("Enter")
    message = notebook_panel(page).get_by_text("must be a multiple of 8, but it is 6").first
    message.wait_for(state="visible")
    assert pixel_difference(before, screenshot(trace, tmp_path / "kept.png")) == 0.0
