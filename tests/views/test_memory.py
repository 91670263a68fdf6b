"""Memory views (notebook 12): memory over a pass, peak memory by micro-batch, variants."""
import matplotlib

matplotlib.use("Agg")
import pytest  # noqa: E402

from ipu_emulator.sim.builtin_models import builtin_model  # noqa: E402
from ipu_emulator.sim.cost_model import stage_costs  # noqa: E402
from ipu_emulator.sim.passes import one_pass  # noqa: E402
from ipu_emulator.sim.pipeline_simulator import simulate_pipeline  # noqa: E402
from ipu_emulator.views.legibility import figure_problems  # noqa: E402
from ipu_emulator.views.memory import (  # noqa: E402
    memory_over_time,
    plot_memory_over_pass,
    plot_peak_memory,
    plot_variants,
    variants_table,
)


def pipeline(batch_size=32, **options):
    stages = stage_costs(builtin_model("tutorial-mlp"), ["dense32"], batch_size=batch_size,
                         optimizer="momentum")
    return simulate_pipeline(stages, "grouped", 16, repeat_count=2, batch_size=batch_size,
                             synthetic_data=True, **options)


def test_memory_over_time_follows_the_counter_and_peaks_at_the_metric():
    timeline = pipeline()
    times, values = memory_over_time(timeline, "IPU0")
    assert times == sorted(times) and len(times) == len(values) > 2
    assert max(values) == timeline.metrics.peak_memory_bytes[0]
    assert memory_over_time(timeline, "IPU9") == ([], [])


def test_memory_over_pass_draws_one_line_per_variant_on_each_ipu():
    fig = plot_memory_over_pass({"reference": pipeline(),
                                 "offloaded": pipeline(offload_weights=True)})
    assert [ax.get_title().split()[0] for ax in fig.axes] == ["IPU0", "IPU1"]
    for ax in fig.axes:
        assert [line.get_label() for line in ax.get_lines()] == ["reference", "offloaded"]
        assert ax.get_ylim()[0] == 0
    # Offloading frees the optimizer state for most of the pass: the curve is lower somewhere.
    reference, offloaded = (line.get_ydata() for line in fig.axes[0].get_lines())
    assert min(offloaded) < min(reference)
    assert figure_problems(fig) == []


def test_peak_memory_plot_shows_each_size_and_the_limit():
    sizes = [32, 64, 128]
    runs = {"kept": [pipeline(b) for b in sizes],
            "recomputed": [pipeline(b, recompute=True) for b in sizes]}
    ax = plot_peak_memory(sizes, runs, limit_bytes=4 * 2 ** 20, limit_label="4 MiB",
                          title="peak")
    lines = ax.get_lines()
    assert [line.get_label() for line in lines] == ["kept", "recomputed", "4 MiB"]
    assert list(lines[0].get_xdata()) == sizes
    assert lines[0].get_ydata()[-1] == runs["kept"][-1].metrics.peak_memory_bytes[0] / 2 ** 20
    assert list(lines[2].get_ydata()) == [4, 4]
    assert ax.get_xscale() == "log"
    assert figure_problems(ax.figure) == []


def test_variants_table_and_bars_agree_with_the_metrics():
    variants = {"reference": pipeline(), "float16 accumulators": pipeline(accumulation_dtype_bytes=2)}
    lines = variants_table(variants).splitlines()
    assert lines[0].split() == ["variant", "one", "pass", "IPU0", "peak", "IPU1", "peak"]
    assert lines[1].startswith("reference ") and lines[2].startswith("float16 accumulators ")
    peak = variants["reference"].metrics.peak_memory_bytes[0] / 1e6
    assert f"{peak:6.3f} MB" in lines[1]

    fig = plot_variants(variants)
    left, right = fig.axes[:2]
    times = [bar.get_width() for bar in left.patches]
    assert times == pytest.approx([one_pass(t).metrics.makespan * 1e6 for t in variants.values()])
    assert len(right.patches) == 2 * len(variants)              # a bar per IPU per variant
    assert [t.get_text() for t in left.get_yticklabels()] == list(variants)
    assert figure_problems(fig) == []
