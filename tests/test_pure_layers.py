"""The pure layers run without TensorFlow: what the JupyterLite site and the playground's quick
start rely on.  ``lint-imports`` checks the import statements of our own modules; this checks
what really gets imported, third-party imports included, when each is used: one child
process does it all, step by step, and reports after each step whether TensorFlow came in."""
import textwrap

import pytest

from tests.support.child_python import REPORTER, run_python

CHILD = REPORTER + textwrap.dedent("""
    import sys
    import matplotlib
    matplotlib.use("Agg")

    def step(name, action):
        action()
        report(name, "tensorflow" in sys.modules)

    def simulator_and_views():
        from ipu_emulator import views
        from ipu_emulator.sim import timeline
        from ipu_emulator.record import ComputeCost, EngineRun
        t = timeline.simulate_engine_runs([EngineRun("p", 2, ComputeCost(forward_flops=1e9))])
        views.plot_timeline(t); views.to_chrome_trace(t); views.summary_table(t)

    def playground():
        import widgets
        widgets.PipelinePlayground()

    def splits_picker():
        from ipu_lab_widgets.splits_picker import SplitsPicker
        SplitsPicker()

    def feeds_explorer():
        from ipu_lab_widgets.feeds_explorer import FeedsExplorer
        FeedsExplorer()

    for name, action in [("simulator and views", simulator_and_views),
                         ("pipeline playground", playground), ("splits picker", splits_picker),
                         ("feeds explorer", feeds_explorer)]:
        step(name, action)
""")
STEPS = ["simulator and views", "pipeline playground", "splits picker", "feeds explorer"]


@pytest.fixture(scope="module")
def imported():
    return run_python(CHILD, timeout=120).check().results


@pytest.mark.parametrize("step", STEPS)
def test_using_it_does_not_import_tensorflow(imported, step):
    assert imported[step] is False
