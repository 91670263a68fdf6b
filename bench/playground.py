"""How fast the pipeline playground answers, and how far the simulator scales.

Three measurements (simulated IPU time is what is drawn; this measures host wall time):

1. Redraw latency for S <= 8 stages, M <= 64 micro-batches: one control change costs a
   simulation plus a drawing.  The goal is under 100 ms together ("feels instant").  The
   widget's inline-SVG drawing and the matplotlib PNG it replaced are timed side by side.
2. Simulator scale at S = 64, M = 1024 for every schedule (events simulated per second).
3. ``import ipu_lab_widgets`` (the widgets) in a fresh process: wall time, peak memory, and
   that TensorFlow stays out.

Usage:  python bench/playground.py [--rounds R] [--quick]
"""
import argparse
import io
import json
import statistics
import subprocess
import sys
import time

from ipu_emulator import views
from ipu_emulator.sim import pipeline_simulator
from ipu_lab_widgets.playground import PipelinePlayground, metrics_html, render_svg
from ipu_lab_widgets.playground_model import PlaygroundConfig, PlaygroundResult

SCHEDULES = ("grouped", "interleaved", "sequential", "gpipe", "1f1b", "interleaved-1f1b",
             "zero-bubble")
GOAL_SECONDS = 0.100


def _median_seconds(function, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _simulate(stages, micro_batches, schedule, unit_cost):
    return pipeline_simulator.simulate_pipeline(pipeline_simulator.unit_stages(stages), schedule,
                                      gradient_accumulation_count=micro_batches,
                                      unit_cost=unit_cost)


def _render_png(timeline):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    figure = Figure(figsize=(11, 0.42 * (len(timeline.lanes) + 1.6) + 0.6))
    FigureCanvasAgg(figure)
    views.plot_timeline(timeline, ax=figure.subplots())
    figure.tight_layout()
    figure.savefig(io.BytesIO(), format="png", dpi=80)


def redraw_latency(rounds):
    print("1. One control change: simulate + draw (host wall time, median of "
          f"{rounds}; goal < {GOAL_SECONDS * 1e3:.0f} ms)")
    print(f"   {'schedule':12s} {'S':>2s} {'M':>3s} {'events':>6s} {'simulate':>9s} "
          f"{'SVG':>8s} {'total':>8s} {'matplotlib':>11s} {'mpl/SVG':>8s}")
    worst = 0.0
    for schedule in ("grouped", "interleaved", "1f1b"):
        for stages, micro_batches in ((2, 8), (4, 16), (4, 64), (8, 64)):
            for unit_cost in (True, False):
                timeline = _simulate(stages, micro_batches, schedule, unit_cost)
                simulate = _median_seconds(
                    lambda: _simulate(stages, micro_batches, schedule, unit_cost), rounds)
                # What the widget draws: the trace (in-flight strips, folds, widened to keep
                # 4-px boxes) and the metrics table with the bubble split.
                result = PlaygroundResult(PlaygroundConfig(unit_cost=unit_cost), timeline)
                svg = _median_seconds(lambda: (render_svg([timeline]), metrics_html([result])),
                                      rounds)
                # matplotlib is slow: fewer rounds, and only for one cost mode.
                png = (_median_seconds(lambda: _render_png(timeline), max(3, rounds // 5))
                       if not unit_cost else None)
                total = simulate + svg
                worst = max(worst, total)
                png_text = f"{png * 1e3:9.1f}ms {png / svg:7.0f}x" if png else " " * 20
                print(f"   {schedule:12s} {stages:2d} {micro_batches:3d} "
                      f"{len(timeline.events):6d} {simulate * 1e3:7.1f}ms {svg * 1e3:6.1f}ms "
                      f"{total * 1e3:6.1f}ms {png_text}"
                      f"{'' if unit_cost else '  (real costs)'}")
    verdict = "meets" if worst < GOAL_SECONDS else "MISSES"
    print(f"   worst simulate + draw: {worst * 1e3:.1f} ms, {verdict} the "
          f"{GOAL_SECONDS * 1e3:.0f} ms goal")
    widget_redraw(rounds)


def widget_redraw(rounds):
    """The whole widget: a control change in compare mode (two configurations of the
    tutorial's model simulated, drawn and tabulated), as a learner triggers it."""
    print(f"\n   The widget itself, compare mode, tutorial-mlp (median of {rounds}):")
    playground = PipelinePlayground(compare=True)
    worst = 0.0
    for unit_cost in (True, False):
        for count in (8, 16, 64):
            for splits in (("dense128",), ("dense128", "dense64", "dense32")):
                for controls in (playground.controls, playground.compare_controls):
                    controls.unit_cost.value = unit_cost
                    controls.gradient_accumulation_count.value = count
                    controls.splits.value = splits
                seconds = _median_seconds(playground.refresh, rounds)
                if not all(result.ok for result in playground.results):
                    raise RuntimeError(f"not a valid configuration: {playground.results}")
                worst = max(worst, seconds)
                print(f"   {'unit' if unit_cost else 'real'} cost, {len(splits) + 1} stages, "
                      f"M={count:3d}: {seconds * 1e3:6.1f} ms")
    verdict = "meets" if worst < GOAL_SECONDS else "MISSES"
    print(f"   worst widget redraw: {worst * 1e3:.1f} ms, {verdict} the "
          f"{GOAL_SECONDS * 1e3:.0f} ms goal")


def simulator_scale():
    print("\n2. Simulator scale: S = 64 stages, M = 1024 micro-batches (unit cost, one run)")
    for schedule in SCHEDULES:
        start = time.perf_counter()
        try:
            timeline = _simulate(64, 1024, schedule, True)
        except Exception as error:  # pylint: disable=broad-except  (report, keep going)
            print(f"   {schedule:18s} refused: {error}")
            continue
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        svg = render_svg([timeline])
        draw = time.perf_counter() - start
        events = len(timeline.events)
        print(f"   {schedule:18s} {events:7d} events in {seconds:5.2f} s "
              f"({events / seconds / 1e3:5.0f}k events/s); SVG {draw:5.2f} s, "
              f"{len(svg) / 1e6:4.1f} MB")


_IMPORT_PROBE = """
import json, sys, time
start = time.perf_counter()
import ipu_lab_widgets
imported = time.perf_counter() - start
start = time.perf_counter()
ipu_lab_widgets.PipelinePlayground()
first = time.perf_counter() - start
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the (large) benchmark process
# that forked this one, while VmHWM belongs to this program's own memory.
peak_kb = next(int(line.split()[1]) for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
print(json.dumps({"import": imported, "first": first, "peak_mb": peak_kb / 1024,
                  "tensorflow": "tensorflow" in sys.modules}))
"""


def import_cost(rounds):
    print(f"\n3. Fresh process (median of {rounds}): import ipu_lab_widgets, then build the "
          "playground")
    results = [json.loads(subprocess.run([sys.executable, "-c", _IMPORT_PROBE], check=True,
                                         capture_output=True, text=True).stdout)
               for _ in range(rounds)]
    median = {key: statistics.median(r[key] for r in results) for key in ("import", "first",
                                                                           "peak_mb")}
    print(f"   import ipu_lab_widgets {median['import'] * 1e3:.0f} ms; first PipelinePlayground() "
          f"{median['first'] * 1e3:.0f} ms; peak RSS {median['peak_mb']:.0f} MB; "
          f"TensorFlow imported: {any(r['tensorflow'] for r in results)}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, skip the scale run")
    options = parser.parse_args()
    rounds = 5 if options.quick else options.rounds
    redraw_latency(rounds)
    if not options.quick:
        simulator_scale()
    import_cost(3 if options.quick else 5)


if __name__ == "__main__":
    main()
