"""Notebook 12's code exercise: the solution passes, and each realistic wrong choice of memory
options gets its own hint, drawn from the options the run really used (in process)."""
import json

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb12_memory as code_exercises
from ipu_emulator.exercises import SOLUTIONS_VARIABLE, SolutionFailed
from tests.support.child_python import ROOT
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_asks_for_code, assert_own_hint, outside_solutions_mode,
    exercise_cell, keeping_the_configuration)

RECOMPUTE = ipu.pipelining_ops.RecomputationMode.RecomputeThenBackpropagate


def configure_plainly():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()


def configure_for_recomputation():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.allow_recompute = True
    config.configure_ipu_system()


def counted(count, repeats):
    """The solution's options on a pipeline of other counts."""
    def pipelined_model(infeed, outfeed):
        return ipu.pipelining_ops.pipeline(
            [code_exercises.stage1, code_exercises.stage2], gradient_accumulation_count=count,
            repeat_count=repeats, infeed_queue=infeed, outfeed_queue=outfeed,
            optimizer_function=code_exercises.optimizer_function, outfeed_loss=True,
            offload_weight_update_variables=True, gradient_accumulation_dtype=tf.float16)
    return pipelined_model


def plain_sgd(loss):
    return ipu.pipelining_ops.OptimizerFunctionOutput(
        tf.compat.v1.train.GradientDescentOptimizer(code_exercises.LEARNING_RATE), loss)


def pipeline(optimizer_function=code_exercises.optimizer_function, **options):
    def pipelined_model(infeed, outfeed):
        return ipu.pipelining_ops.pipeline(
            [code_exercises.stage1, code_exercises.stage2], gradient_accumulation_count=16,
            repeat_count=2, infeed_queue=infeed, outfeed_queue=outfeed,
            optimizer_function=optimizer_function, outfeed_loss=True, **options)
    return pipelined_model


def mode_without_permission(infeed, outfeed):
    """The recomputation mode given, the system never told to allow it."""
    return ipu.pipelining_ops.pipeline(
        [code_exercises.stage1, code_exercises.stage2], gradient_accumulation_count=16,
        repeat_count=2, infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=code_exercises.optimizer_function, outfeed_loss=True,
        recomputation_mode=RECOMPUTE, offload_weight_update_variables=True,
        gradient_accumulation_dtype=tf.float16)


def starting_code():
    namespace = {"tf": tf.compat.v1, "ipu": ipu, "stage1": code_exercises.stage1,
                 "stage2": code_exercises.stage2,
                 "optimizer_function": code_exercises.optimizer_function}
    exec(code_exercises.STARTING_CODE, namespace)  # pylint: disable=exec-used
    return namespace["configure_ipus"], namespace["pipelined_model"]


def offload_in_the_config():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.offload_weight_update_variables = True
    config.configure_ipu_system()


WRONG_ATTEMPTS = {
    "the reference, unchanged": (starting_code, "which option shrinks each?"),
    "float16 accumulators alone": (
        lambda: (configure_plainly, pipeline(gradient_accumulation_dtype=tf.float16)),
        "No single option saves enough"),
    "recomputation and offloading, accumulators left": (
        lambda: (configure_for_recomputation,
                 pipeline(recomputation_mode=RECOMPUTE, offload_weight_update_variables=True)),
        "do your options not touch yet?"),
    "every option at once": (
        lambda: (configure_for_recomputation,
                 pipeline(recomputation_mode=RECOMPUTE, offload_weight_update_variables=True,
                          offload_activations=True, gradient_accumulation_dtype=tf.float16)),
        "costs time without being needed"),
    "recomputation alone, the system never told to allow it": (
        lambda: (configure_plainly, pipeline(recomputation_mode=RECOMPUTE)),
        "Your pipeline asks for recomputation_mode=RecomputeThenBackpropagate, but nothing "
        "was recomputed"),
    "plain gradient descent instead of momentum": (
        lambda: (configure_plainly, pipeline(optimizer_function=plain_sgd,
                                             gradient_accumulation_dtype=tf.float16)),
        "with GradientDescent, not the notebook's momentum optimizer"),
    "offload_weights taken for the optimizer's state": (
        lambda: (configure_plainly, pipeline(offload_weights=True,
                                             gradient_accumulation_dtype=tf.float16)),
        "You passed offload_weights=True"),
    "gradient_accumulation_count=8": (lambda: (configure_plainly, counted(8, 2)),
                                      "your pipeline ran 2 passes of 8 micro-batches"),
    "offloading set on the IPU configuration": (
        lambda: (offload_in_the_config, pipeline()),
        "ValueError: 'offload_weight_update_variables' is not a valid attribute of this "
        "config"),
}


def test_the_solution_passes_and_says_what_ran_keeping_the_learners_configuration():
    feedback = keeping_the_configuration(
        lambda: code_exercises.check_fits_in_memory(*code_exercises.SOLUTION))
    assert feedback.ok, feedback.text
    assert ("offload_weight_update_variables=True, gradient_accumulation_dtype=tf.float16: "
            "IPU 0 peaks at 2.4") in feedback.text


def test_a_recomputation_mode_the_system_does_not_allow_is_the_solution_as_the_sdk_runs_it():
    """The SDK recomputes only when the system allows it: a mode given without
    allow_recompute changes nothing, so the solution's options with it are right."""
    feedback = code_exercises.check_fits_in_memory(configure_plainly, mode_without_permission)
    assert feedback.ok, feedback.text


@pytest.mark.parametrize("attempt", WRONG_ATTEMPTS)
def test_each_wrong_attempt_gets_its_own_hint(attempt):
    make, _ = WRONG_ATTEMPTS[attempt]
    assert_own_hint(code_exercises.check_fits_in_memory(*make()), attempt, WRONG_ATTEMPTS)


def test_recomputation_really_ran_when_the_system_allowed_it():
    ran = code_exercises.run_program(configure_for_recomputation,
                                     pipeline(recomputation_mode=RECOMPUTE))
    assert ran.run.pipeline.recompute and ran.losses.size == 2 * 2 * 16
    run = code_exercises.run_program(configure_plainly, mode_without_permission).run
    assert not run.pipeline.recompute and run.pipeline.offload_weights
    assert run.pipeline.accumulation_dtype_bytes == 2


def test_an_untouched_or_misused_cell_asks_for_code():
    assert_asks_for_code(code_exercises.check_fits_in_memory)


def test_in_solutions_mode_the_check_runs_the_solution(monkeypatch):
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    assert code_exercises.check_fits_in_memory(*starting_code()).ok
    monkeypatch.setattr(code_exercises, "BUDGET_MB", 2.0)  # nothing fits: the solution fails
    with pytest.raises(SolutionFailed):
        code_exercises.check_fits_in_memory()


def test_the_starting_code_is_the_notebooks_exercise_cell():
    notebook = ROOT / "notebooks" / "12_further_considerations.ipynb"
    assert exercise_cell(notebook) == code_exercises.STARTING_CODE  # what a reset restores


def test_the_solution_shown_in_the_notebook_passes():
    notebook = json.loads((ROOT / "notebooks" / "12_further_considerations.ipynb").read_text())
    cells = notebook["cells"]
    [index] = [k for k, c in enumerate(cells) if "code-exercise" in c["metadata"].get("tags", [])]
    shown = "".join(cells[index + 2]["source"])
    namespace = {"tf": tf.compat.v1, "ipu": ipu, "stage1": code_exercises.stage1,
                 "stage2": code_exercises.stage2,
                 "optimizer_function": code_exercises.optimizer_function}
    exec(shown.split("```python\n")[1].split("```")[0], namespace)  # pylint: disable=exec-used
    assert code_exercises.check_fits_in_memory(namespace["configure_ipus"],
                                               namespace["pipelined_model"]).ok
