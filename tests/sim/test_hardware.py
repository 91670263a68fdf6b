"""IPU targets and the host model: published numbers, consistency, calibration."""
import dataclasses

import pytest

from ipu_emulator.sim.hardware import (
    TARGETS,
    TUTORIAL3_LOOPED,
    TUTORIAL3_PER_STEP,
    TUTORIAL3_STEPS,
    HostModel,
    IPUTarget,
    calibrate_host_costs,
    get_target,
)


def test_three_targets_by_name():
    assert set(TARGETS) == {"ipu1", "ipu2", "ipu21"}
    for name, target in TARGETS.items():
        assert get_target(name) is target
        assert target.name == name


def test_unknown_target_lists_valid_names():
    with pytest.raises(ValueError) as error:
        get_target("ipu3")
    message = str(error.value)
    assert "'ipu3'" in message
    for name in ("'ipu1'", "'ipu2'", "'ipu21'"):
        assert name in message


def test_target_instance_passes_through():
    custom = get_target("ipu2").with_overrides(compute_efficiency=1.0)
    assert get_target(custom) is custom
    assert custom.compute_efficiency == 1.0
    assert get_target("ipu2").compute_efficiency != 1.0  # the original is untouched


def test_targets_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        get_target("ipu2").tiles = 1


def test_published_sizes():
    assert get_target("ipu1").tiles == 1216
    assert get_target("ipu2").tiles == get_target("ipu21").tiles == 1472
    # Mk1: 304 MiB per chip; Mk2 / Bow: about 900 MB per chip.
    assert get_target("ipu1").sram_bytes_per_chip == 304 * 2**20
    assert get_target("ipu2").sram_bytes_per_chip == pytest.approx(900e6, rel=0.05)
    assert get_target("ipu21").sram_bytes_per_chip == get_target("ipu2").sram_bytes_per_chip
    assert get_target("ipu2").worker_threads == 8832


@pytest.mark.parametrize("name, fp16_flop_per_cycle_per_tile", [("ipu1", 64), ("ipu2", 128), ("ipu21", 128)])
def test_peak_fp16_matches_tiles_times_clock(name, fp16_flop_per_cycle_per_tile):
    # The sources' peak rates, tile counts and clocks agree with each other.
    t = get_target(name)
    assert t.peak_fp16_flops == pytest.approx(t.tiles * fp16_flop_per_cycle_per_tile * t.clock_hz, rel=0.01)
    assert t.peak_fp16_flops == pytest.approx(4 * t.peak_fp32_flops, rel=0.01)


def test_every_rate_is_positive_and_unknowns_are_plausible():
    for t in TARGETS.values():
        for f in dataclasses.fields(IPUTarget):
            value = getattr(t, f.name)
            if isinstance(value, (int, float)) and f.name != "streaming_memory_bytes_per_ipu":
                assert value > 0, f.name
        assert 0 < t.compute_efficiency <= 1
        assert 1e-7 < t.external_sync_seconds < 1e-4


def test_calibration_from_tutorial3():
    h, d = calibrate_host_costs(TUTORIAL3_STEPS, TUTORIAL3_LOOPED, TUTORIAL3_PER_STEP)
    assert h == pytest.approx(1.0222e-3, rel=1e-3)
    assert d == pytest.approx(1.3578e-3, rel=1e-3)
    # The fit reproduces both measurements exactly.
    assert 1_000 * h + 10_000 * d == pytest.approx(14.6)
    assert 10_000 * h + 10_000 * d == pytest.approx(23.8)


def test_calibration_needs_two_different_run_counts():
    with pytest.raises(ValueError):
        calibrate_host_costs(10, (5, 1.0), (5, 2.0))


def test_host_model_defaults():
    host = HostModel()
    h, d = calibrate_host_costs(TUTORIAL3_STEPS, TUTORIAL3_LOOPED, TUTORIAL3_PER_STEP)
    assert host.engine_run_overhead_s == h
    assert host.host_seconds_per_batch == 0.0
    assert 0 < host.stream_copy_latency_s < 1e-4
    tutorial = HostModel.tutorial3()
    assert tutorial.engine_run_overhead_s == h
    assert tutorial.host_seconds_per_batch == d
    assert HostModel.tutorial3(stream_copy_latency_s=0.0).stream_copy_latency_s == 0.0
