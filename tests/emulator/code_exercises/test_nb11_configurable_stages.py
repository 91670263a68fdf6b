"""Notebook 11's code exercise: the solution passes, and each realistic wrong attempt at
building stages from splits gets its own hint, drawn from what its program did (in process)."""
import json

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb11_configurable_stages as code_exercises
from ipu_emulator.exercises import SOLUTIONS_VARIABLE, SolutionFailed
from tests.support.child_python import ROOT
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_asks_for_code, assert_own_hint, outside_solutions_mode,
    exercise_cell, keeping_the_configuration)


def pipeline(make_stages, accumulation_count=16, outfeed_loss=True,
             optimizer_function=code_exercises.optimizer_function):
    """A learner's ``pipeline_for_splits`` whose stage functions come from
    ``make_stages(layers, splits)``."""
    def pipeline_for_splits(layers, splits, learning_rate, infeed, outfeed):
        return ipu.pipelining_ops.pipeline(
            computational_stages=make_stages(layers, splits),
            gradient_accumulation_count=accumulation_count,
            inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
            optimizer_function=optimizer_function, outfeed_loss=outfeed_loss)
    return pipeline_for_splits


def cut_at_the_splits(layers, splits):
    return [staged(piece, k) for k, piece in enumerate(pieces(layers, splits))]


def a_smaller_step(learning_rate, loss):
    return code_exercises.optimizer_function(learning_rate / 10, loss)


def pieces(layers, splits, shift=0):
    names = [layer.name for layer in layers]
    cuts = [0] + [names.index(split) + shift for split in splits] + [len(layers)]
    return [layers[start:end] for start, end in zip(cuts, cuts[1:])]


def staged(piece, k, scoped=True):
    def stage(*args):
        for layer in piece:
            if scoped:
                with tf.compat.v1.variable_scope(f"stage{k}_{layer.name}", use_resource=True):
                    args = layer.function(*args)
            else:
                args = layer.function(*args)
        return args
    return stage


def cut_one_late(layers, splits):
    return [staged(piece, k) for k, piece in enumerate(pieces(layers, splits, shift=1))]


def without_scopes(layers, splits):
    return [staged(piece, k, scoped=False) for k, piece in enumerate(pieces(layers, splits))]


def in_a_loop(layers, splits):
    """Stage functions defined straight in the loop: each reads ``piece`` when it runs."""
    stages = []
    for k, piece in enumerate(pieces(layers, splits)):
        def stage(*args):
            for layer in piece:
                with tf.compat.v1.variable_scope(f"stage{k}_{layer.name}", use_resource=True):
                    args = layer.function(*args)
            return args
        stages.append(stage)
    return stages


def starting_code():
    namespace = {"tf": tf.compat.v1, "ipu": ipu,
                 "optimizer_function": code_exercises.optimizer_function}
    exec(code_exercises.STARTING_CODE, namespace)  # pylint: disable=exec-used
    return namespace["pipeline_for_splits"]


WRONG_ATTEMPTS = {
    "step 3's two stages, unchanged": (starting_code, "your pipeline ran 2 stages; 3 splits "
                                                      "make 4"),
    "each split ends a stage": (lambda: pipeline(cut_one_late), "dense128 ended stage 0"),
    "stages defined in the loop": (lambda: pipeline(in_a_loop),
                                   "every stage sees the last piece"),
    "no stage<k>_<layer> scopes": (lambda: pipeline(without_scopes),
                                   "no layer of your stages was built in a"),
    "a count of 8 micro-batches per update": (
        lambda: pipeline(cut_at_the_splits, accumulation_count=8),
        "the pipeline updated the weights every 8 micro-batches"),
    "outfeed_loss left out": (lambda: pipeline(cut_at_the_splits, outfeed_loss=False),
                              "keep outfeed_loss=True in the pipeline, so that it sends"),
    "the optimizer given a tenth of the learning rate": (
        lambda: pipeline(cut_at_the_splits, optimizer_function=a_smaller_step),
        "times smaller. The stages call each layer's function once"),
    "a count Grouped refuses for four stages": (
        lambda: pipeline(cut_at_the_splits, accumulation_count=4),
        "FailedPreconditionError: The number of iterations of the pipeline must be a multiple "
        "of 8, but it is 4."),
}


def test_the_solution_passes_and_says_what_ran_keeping_the_learners_configuration():
    feedback = keeping_the_configuration(
        lambda: code_exercises.check_configurable_pipeline(code_exercises.solution), ipus=8)
    assert feedback.ok, feedback.text
    assert "flatten-dense256 | dense128 | dense64 | dense32-logits-cel on 4 IPUs" in \
        feedback.text


@pytest.mark.parametrize("attempt", WRONG_ATTEMPTS)
def test_each_wrong_attempt_gets_its_own_hint(attempt):
    make, _ = WRONG_ATTEMPTS[attempt]
    assert_own_hint(code_exercises.check_configurable_pipeline(make()), attempt,
                    WRONG_ATTEMPTS)


def test_a_program_right_only_for_the_first_splits_is_caught_on_the_second():
    def four_stages_always(layers, splits):
        return [staged(p, k) for k, p in
                enumerate(pieces(layers, ["dense128", "dense64", "dense32"]))]
    text = code_exercises.check_configurable_pipeline(pipeline(four_stages_always)).text
    # the device for ['dense64'] has 2 IPUs: the SDK's own refusal, and a hint
    assert "with 2 IPUs and 4 shards" in text and "exactly len(splits) + 1 stage" in text


def test_an_untouched_or_misused_cell_asks_for_code():
    assert_asks_for_code(code_exercises.check_configurable_pipeline)


def test_in_solutions_mode_the_check_runs_the_solution(monkeypatch):
    monkeypatch.setenv(SOLUTIONS_VARIABLE, "1")
    assert code_exercises.check_configurable_pipeline(starting_code()).ok
    monkeypatch.setattr(code_exercises, "GRADIENT_ACCUMULATION_COUNT", 4)  # 4 stages: 8
    with pytest.raises(SolutionFailed):
        code_exercises.check_configurable_pipeline()


def test_the_starting_code_is_the_notebooks_exercise_cell():
    notebook = ROOT / "notebooks" / "11_configurable_stages.ipynb"
    assert exercise_cell(notebook) == code_exercises.STARTING_CODE  # what a reset restores


def test_the_solution_shown_in_the_notebook_passes():
    notebook = json.loads((ROOT / "notebooks" / "11_configurable_stages.ipynb").read_text())
    cells = notebook["cells"]
    [index] = [k for k, c in enumerate(cells) if "code-exercise" in c["metadata"].get("tags", [])]
    shown = "".join(cells[index + 2]["source"])
    namespace = {"tf": tf.compat.v1, "ipu": ipu,
                 "optimizer_function": code_exercises.optimizer_function}
    exec(shown.split("```python\n")[1].split("```")[0], namespace)  # pylint: disable=exec-used
    assert code_exercises.check_configurable_pipeline(namespace["pipeline_for_splits"]).ok
