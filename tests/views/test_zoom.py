"""ipu_window: the stretch a zoom shows, from the events it names."""
import pytest

from ipu_emulator.record import ComputeCost, EngineRun
from ipu_emulator.sim.timeline import simulate_engine_runs
from ipu_emulator.views import ipu_window


def per_step_and_looped():
    step = EngineRun("step", 1, ComputeCost(forward_flops=1e9), input_bytes=4096)
    loop = EngineRun("loop", 10, ComputeCost(forward_flops=1e9), infeed_bytes_per_iteration=4096)
    return simulate_engine_runs([step] * 3), simulate_engine_runs([loop])


def test_one_engine_run_and_some_iterations():
    per_step, looped = per_step_and_looped()
    start, end = ipu_window(per_step, engine_run=1)
    run_start, run_end = per_step.engine_run_spans[1]
    assert run_start < start < end <= run_end          # after its launch, within its run
    ipu = [e for e in per_step.events if e.ipu is not None and e.engine_run == 1]
    assert (start, end) == (min(e.start for e in ipu), max(e.end for e in ipu))

    first, fifth = ipu_window(looped, iterations=0), ipu_window(looped, iterations=range(5))
    assert first[0] == fifth[0] and first[1] < fifth[1]
    assert fifth[1] < ipu_window(looped)[1]            # the rest of the loop comes later


def test_margin_pads_both_sides_and_nothing_matching_is_an_error():
    _, looped = per_step_and_looped()
    start, end = ipu_window(looped, iterations=0)
    padded = ipu_window(looped, iterations=0, margin=0.1)
    assert padded == pytest.approx((start - 0.1 * (end - start), end + 0.1 * (end - start)))
    with pytest.raises(ValueError, match="no IPU events"):
        ipu_window(looped, engine_run=5)
