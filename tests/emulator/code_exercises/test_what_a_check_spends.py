"""What a check spends beside the learner's program: comparing the learner's weights with the
reference's measures the right lengths and wakes none of NumPy's BLAS threads
(``np.linalg.norm`` of a long vector is a BLAS dot product, after which OpenBLAS's worker
threads spin before they sleep: a quarter of a check's CPU, bench/blas_spin.py; one forked
child, about 0.3 s of CPU), and the digits a check trains on are fed, not embedded in its
graph (about 1 s of CPU)."""
import functools
import json

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator.code_exercises import nb09_pipelining, nb12_memory, reference
from ipu_emulator.code_exercises.weights import WeightWatch
from tests.support.child_python import run_code
from tests.support.code_exercise_checks import outside_solutions_mode  # noqa: F401


def watch(start, final):
    watched = WeightWatch()
    watched.start, watched.final = list(start), list(final)
    return watched


def test_the_comparison_measures_the_update_against_the_references():
    rng = np.random.default_rng(3)
    start = [rng.standard_normal((784, 256)), rng.standard_normal(256)]
    theirs = [w + 0.01 * rng.standard_normal(w.shape) for w in start]
    # Twice the reference's update, in the same direction: scale 2, distance 1.
    mine = [s + 2 * (t - s) for s, t in zip(start, theirs)]
    compared = reference.compare_weights(watch(start, mine), watch(start, theirs))
    assert compared.shapes_match and compared.moved
    assert np.isclose(compared.scale, 2.0, rtol=1e-9)
    assert np.isclose(compared.distance, 1.0, rtol=1e-9)
    assert not compared.same
    assert reference.compare_weights(watch(start, theirs), watch(start, theirs)).same


# Each length computed 20 times, a pause after each as a check's other work would leave; the
# CPU every thread but the main one spent meanwhile (OpenBLAS's workers: a forked child has no
# other thread until BLAS starts them).
PROBE = r"""
import json, os, time
import numpy as np
from ipu_emulator.code_exercises import reference
from ipu_emulator.code_exercises.weights import WeightWatch

def other_threads_cpu():
    ticks = 0
    for tid in os.listdir("/proc/self/task"):
        if int(tid) != os.getpid():
            with open(f"/proc/self/task/{tid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")

rng = np.random.default_rng(0)
start = [rng.standard_normal((784, 256)), rng.standard_normal((256, 128))]
def watch(final):
    watched = WeightWatch()
    watched.start, watched.final = start, final
    return watched
mine = watch([w + 0.01 for w in start])
theirs = watch([w + 0.02 for w in start])
vector = np.concatenate([w.ravel() for w in start])

def spent(compute):
    before = other_threads_cpu()
    for _ in range(20):
        compute()
        time.sleep(0.01)
    return other_threads_cpu() - before

print(json.dumps({"compare_weights": spent(lambda: reference.compare_weights(mine, theirs)),
                  "np.linalg.norm": spent(lambda: np.linalg.norm(vector))}))
"""


def test_comparing_weights_wakes_no_blas_thread():
    spent = json.loads(run_code(PROBE).check().stdout.splitlines()[-1])
    assert spent["compare_weights"] <= 0.02, spent
    # The probe sees BLAS's threads where they run (on two cores or more, as here).
    assert spent["np.linalg.norm"] > 0.05, spent


def largest_constant_bytes(graph) -> int:
    """The size of the largest constant tensor ``graph`` holds."""
    values = [op.get_attr("value") for op in graph.get_operations() if op.type == "Const"]
    return max((tf.TensorShape(value.tensor_shape).num_elements() * tf.as_dtype(value.dtype).size
                for value in values), default=0)


@pytest.mark.parametrize("run", ["09", "12"])
def test_a_checks_graph_reads_the_digits_from_its_feed_not_from_constants(run):
    """The digits a check trains on (6.4 MB for notebooks 09 and 12) are fed to the infeed's
    initializer: embedded, each check copied them into the graph, its serialized form and the
    session (about 65 ms of CPU a check, bench/embedded_data.py).  The largest constant left
    is a weight matrix's start (784 x 256 float32: 0.8 MB).  About 1 s of CPU."""
    ran = (nb09_pipelining.run_model(nb09_pipelining.solution) if run == "09" else
           nb12_memory.run_program(nb12_memory.solution_configure_ipus,
                                   nb12_memory.solution_pipelined_model))
    digits = 2048 * 784 * 4
    losses = [np.ravel(loss) for loss in ran.losses]   # it trained on them
    assert losses and np.isfinite(np.concatenate(losses)).all()
    assert largest_constant_bytes(ran.weights.variables[0].graph) == 784 * 256 * 4 < digits


@pytest.fixture
def runs_of_programs(monkeypatch):
    """No reference run yet in this process, and every program a check runs counted (outside
    solutions mode, the module's autouse ``outside_solutions_mode``: there a check would run
    the solution whatever it is given)."""
    from ipu_emulator.code_exercises import harness
    monkeypatch.setattr(reference, "_REFERENCE_RUNS", {})
    ran = []
    original = harness.Exercise.facts_of

    def counted(self, program):
        ran.append(program)
        return original(self, program)

    monkeypatch.setattr(harness.Exercise, "facts_of", counted)
    return ran


def test_a_check_given_the_solution_runs_it_once_its_run_is_the_references(runs_of_programs):
    """Solutions mode (notebooks run by nbval, an instructor's run-through) hands each check
    the solution: run once, not again as the reference (notebook 09's: 0.6 s of CPU)."""
    from ipu_emulator.code_exercises import nb02_loops
    exercise = nb02_loops.EXERCISE
    assert nb02_loops.check_loop_on_device(nb02_loops.solution).ok
    assert runs_of_programs == [nb02_loops.solution]
    assert exercise.reference().exercise is exercise
    # Another correct program is judged against that run: only the learner's runs now.
    assert nb02_loops.check_loop_on_device(functools.partial(nb02_loops.solution)).ok
    assert len(runs_of_programs) == 2
    assert exercise.is_solution(nb02_loops.solution)
    assert not exercise.is_solution(functools.partial(nb02_loops.solution))


def test_a_learners_program_run_first_is_not_taken_for_the_reference(runs_of_programs):
    from ipu_emulator.code_exercises import nb02_loops
    attempt = functools.partial(nb02_loops.solution)   # the same program, not the solution
    assert nb02_loops.check_loop_on_device(attempt).ok
    assert runs_of_programs == [attempt, nb02_loops.solution]   # the reference ran too
