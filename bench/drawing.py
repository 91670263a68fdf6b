"""What drawing a pipeline's trace with matplotlib and checking it for legibility costs, with
the micro-batch labels' sizes kept per text (``FittingLabel._size``) and measured anew for
each label as before.

Each round runs two fresh Pythons, in alternating order; each simulates twelve pipelines (three
schedules, unit and real costs, 8 and 16 micro-batches, four stages), draws each with
``plot_timeline`` and checks it with ``figure_problems`` (what the notebooks' run and
tests/views/test_legibility.py do for every figure), and prints the CPU of the drawing and
checking.  Medians over the rounds, then the ratio.
Usage:  python bench/drawing.py [--rounds R]
"""
import os
import sys

from _alternating import child_json, medians_from_command_line, print_two_settings

DRAW = """
import json, sys, time
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
from ipu_emulator.views import matplotlib_trace, plot_timeline
from ipu_emulator.views.legibility import figure_problems

if sys.argv[1] == "measured for each label":
    label = matplotlib_trace._fitting_label_class()
    label._size = lambda self, renderer: tuple(
        getattr(self.get_window_extent(renderer), side) for side in ("width", "height"))
timelines = [simulate_pipeline(unit_stages(4), schedule, gradient_accumulation_count=count,
                               unit_cost=unit_cost, batch_size=32)
             for schedule in ("grouped", "interleaved", "sequential")
             for unit_cost in (True, False) for count in (8, 16)]
plot_timeline(timelines[0])   # matplotlib's first figure loads its fonts
started = time.process_time()
for timeline in timelines:
    ax = plot_timeline(timeline)
    assert figure_problems(ax.figure) == []
    plt.close(ax.figure)
print(json.dumps({"CPU s": time.process_time() - started}))
"""
SETTINGS = ["measured for each label", "kept per text"]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def measure(setting):
    return child_json(DRAW, setting, env=dict(os.environ, PYTHONPATH=ROOT))


if __name__ == "__main__":
    sys.exit(print_two_settings(*medians_from_command_line(__doc__, measure, SETTINGS),
                                "CPU s", "drawing and checking, kept / measured"))
