"""Notebook 11's exercises agree with the splits picker the learner uses to answer them."""
from itertools import combinations

from ipu_emulator.exercises import nb11_configurable_stages as nb11
from ipu_emulator.sim.passes import one_pass
from ipu_lab_widgets.splits_picker import evaluate


def pass_time(splits):
    return one_pass(evaluate(list(splits), batch_size=32).result.timeline).metrics.makespan


def test_four_stages_are_the_pickers_shortest_and_beat_two():
    times = {combo: pass_time(combo) for combo in combinations(nb11.EVERY_LAYER, 3)}
    best = min(times, key=times.get)
    assert nb11._best_four_stages() == best
    assert times[best] < pass_time(["dense32"])
    assert nb11.check_four_stages(list(best)).ok
    assert "model's order" in nb11.check_four_stages(["dense32", "dense128", "cel"]).text
    # a wrong cut is told how to look, not how long it took (no countdown to search by)
    wrong = nb11.check_four_stages(["dense128", "dense64", "dense32"]).text
    assert "wait for" in wrong and "µs" not in wrong
