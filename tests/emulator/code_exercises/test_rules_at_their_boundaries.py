"""Every rule of every code exercise, probed at its boundary: the reference solution's run
is judged Right, and each probe (the smallest wrong change to that run's facts: one engine
run too many, one mini-batch fewer, a layer on both IPUs, an update 6 % too large) is caught
by the rule it names, first.  A rule that lets its boundary through fails here, whatever
attempts the other tests happen to try; a rule with no probe fails too.

Costs one reference run per exercise (the checks' own cache: about 1 s each on this machine)."""
import pytest

from ipu_emulator.code_exercises import CODE_REGISTRY
from ipu_emulator.code_exercises import (nb01_porting, nb02_loops, nb03_feeds,  # noqa: F401
                                         nb05_replication, nb06_accumulation, nb07_sharding,
                                         nb09_pipelining, nb11_configurable_stages, nb12_memory)
from tests.support.code_exercise_checks import outside_solutions_mode  # noqa: F401  (autouse)

EXERCISES = {name: entry.check.exercise for name, entry in sorted(CODE_REGISTRY.items())
             if hasattr(entry.check, "exercise")}


def test_every_code_exercise_is_data_on_the_harness():
    assert sorted(EXERCISES) == sorted(CODE_REGISTRY)


@pytest.mark.parametrize("name", sorted(EXERCISES))
def test_the_reference_run_is_right_and_every_rule_is_probed(name):
    exercise = EXERCISES[name]
    assert exercise.verdict(exercise.reference()).ok
    probed = {probe.rule for probe in exercise.probes}
    assert [rule.fact for rule in exercise.rules if rule.fact not in probed] == []
    assert probed <= {rule.fact for rule in exercise.rules}


@pytest.mark.parametrize("name, index", [(name, index) for name, exercise in
                                         sorted(EXERCISES.items())
                                         for index in range(len(exercise.probes))])
def test_each_probe_is_caught_by_its_rule(name, index):
    exercise = EXERCISES[name]
    probe = exercise.probes[index]
    rule, said = exercise.first_difference(probe.change(exercise.reference()))
    assert rule is not None, f"{probe.what}: judged Right"
    assert (rule.fact, said.ok) == (probe.rule, False), f"{probe.what}: {said.text}"
