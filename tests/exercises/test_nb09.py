"""Notebook 09's exercises beyond the generic checks: the memory budget is met only by
combining options, and the checks judge answers by simulation, not by their spelling."""
from ipu_emulator.exercises import nb09_further as exercises


def test_no_single_option_fits_the_budget_and_float16_accumulators_cost_no_time():
    _, reference_pass = exercises._peak_and_pass(None, {})
    for name, (_, switched_on) in exercises.MEMORY_OPTIONS.items():
        peak, seconds = exercises._peak_and_pass(None, {name: switched_on})
        assert peak > exercises.BUDGET_MB, name
        if name == "accumulation_dtype_bytes":
            assert abs(seconds - reference_pass) < 1e-3 * reference_pass
        else:
            assert seconds > reference_pass, name


def test_the_fastest_fitting_choice_is_offloading_plus_float16_accumulators():
    assert exercises._fastest_fitting() == {"offload_weights": True,
                                            "accumulation_dtype_bytes": 2}


def test_the_budget_check_accepts_defaults_spelled_out_and_any_order():
    spelled = {"recompute": False, "accumulation_dtype_bytes": 2, "offload_activations": False,
               "offload_weights": True}
    assert exercises.check_memory_budget(spelled).ok
    unknown = exercises.check_memory_budget({"offload_optimizer_state": True})
    assert not unknown.ok and "offload_weights" in unknown.text


def test_the_effective_batch_check_reports_the_sdk_rule_and_the_ratio():
    refused = exercises.check_accumulation_for_replicas(6)
    assert not refused.ok and "multiple of 4" in refused.text
    assert "2 times" in exercises.check_accumulation_for_replicas(16).text
    assert "1/2 of" in exercises.check_accumulation_for_replicas(4).text
