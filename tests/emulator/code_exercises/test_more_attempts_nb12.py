"""More attempts at notebook 12's code exercise (fit IPU 0 in the memory budget), written as new
learners would: correct programs spelled another way than the reference (each judged Right),
and wrong programs of the kinds learners write (each judged "Not yet" with a hint on its own
mistake, no traceback).  Each attempt runs through ``check_fits_in_memory``, in process."""
import functools

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import nb12_memory
from tests.support.code_exercise_checks import (  # noqa: F401  (an autouse fixture)
    assert_own_hint, outside_solutions_mode)

v1 = tf.compat.v1
stage1, stage2 = nb12_memory.stage1, nb12_memory.stage2
optimizer_function = nb12_memory.optimizer_function
RECOMPUTE = ipu.pipelining_ops.RecomputationMode.RecomputeThenBackpropagate


def configure_two_ipus():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()


def fitted(stages=(stage1, stage2), **changes):
    """The reference's pipeline (the solution's two options), with ``changes`` to its
    arguments (an argument given as None is left out)."""
    arguments = dict(gradient_accumulation_count=16, repeat_count=2,
                     optimizer_function=optimizer_function, outfeed_loss=True,
                     offload_weight_update_variables=True,
                     gradient_accumulation_dtype=tf.float16)
    arguments.update(changes)
    arguments = {name: value for name, value in arguments.items() if value is not None}

    def pipelined_model(infeed, outfeed):
        return ipu.pipelining_ops.pipeline(list(stages), infeed_queue=infeed,
                                           outfeed_queue=outfeed, **arguments)
    return pipelined_model


# --- correct programs written another way --------------------------------------------------

def configure_with_the_module_function():
    """auto_select_ipus as a one-element list, allow_recompute=False said outright, the
    config applied by ipu.utils.configure_ipu_system."""
    ipu_config = ipu.config.IPUConfig()
    ipu_config.auto_select_ipus = [2]
    ipu_config.allow_recompute = False
    ipu.utils.configure_ipu_system(ipu_config)


def pipeline_through_ipu_ops(infeed, outfeed):
    """The module path ipu.ops.pipelining_ops, the accumulators typed tf.half, the
    gradient_accumulation_count positional."""
    return ipu.ops.pipelining_ops.pipeline(
        [stage1, stage2], 16, repeat_count=2, infeed_queue=infeed, outfeed_queue=outfeed,
        optimizer_function=optimizer_function, outfeed_loss=True,
        gradient_accumulation_dtype=tf.half, offload_weight_update_variables=True)


class MemoryFittedPipeline:
    """The options kept on an object whose __call__ builds the pipeline, the accumulators'
    type chosen per variable by a callable, every other option at its default said outright."""

    def __init__(self):
        self.stages = (stage1, stage2)
        self.accumulator_type = lambda variable: tf.float16
        self.offload_optimizer_state = True

    def __call__(self, infeed, outfeed):
        schedule = ipu.pipelining_ops.PipelineSchedule.Grouped
        return ipu.pipelining_ops.pipeline(
            computational_stages=self.stages, gradient_accumulation_count=16,
            gradient_accumulation_dtype=self.accumulator_type, repeat_count=2,
            infeed_queue=infeed, outfeed_queue=outfeed, optimizer_function=optimizer_function,
            device_mapping=[0, 1], pipeline_schedule=schedule,
            recomputation_mode=ipu.pipelining_ops.RecomputationMode.Auto,
            offload_weight_update_variables=self.offload_optimizer_state,
            offload_activations=False, replicated_optimizer_state_sharding=False,
            outfeed_loss=True)


def own_momentum(loss):
    """The notebook's optimizer written out again: keyword arguments, explicit defaults."""
    optimizer = v1.train.MomentumOptimizer(learning_rate=0.005, momentum=0.9,
                                           use_locking=False, use_nesterov=False)
    return ipu.ops.pipelining_ops.OptimizerFunctionOutput(opt=optimizer, loss=loss)


def pipelined_with_own_optimizer_and_no_outfeed_loss(infeed, outfeed):
    """The learner's own copy of optimizer_function, outfeed_loss left out (the last stage's
    only output is the loss, so the outfeed brings back the same values) and the stages
    wrapped in lambdas."""
    return ipu.pipelining_ops.pipeline(
        [lambda images, labels: stage1(images, labels), lambda hidden, labels:
         stage2(hidden, labels)],
        gradient_accumulation_count=16, repeat_count=2, infeed_queue=infeed,
        outfeed_queue=outfeed, optimizer_function=own_momentum,
        offload_weight_update_variables=True, gradient_accumulation_dtype=v1.float16)


def configure_with_the_legacy_functions():
    """SDK 1.x configuration, the recomputation switched off outright."""
    options = ipu.utils.create_ipu_config()
    options = ipu.utils.set_recomputation_options(options, allow_recompute=False)
    options = ipu.utils.auto_select_ipus(options, num_ipus=2)
    ipu.utils.configure_ipu_system(options)


def build_pipeline(infeed, outfeed, *, offload, accumulator_dtype):
    return ipu.pipelining_ops.pipeline(
        [stage1, stage2], gradient_accumulation_count=16, repeat_count=2,
        infeed_queue=infeed, outfeed_queue=outfeed, optimizer_function=optimizer_function,
        outfeed_loss=True, offload_weight_update_variables=offload,
        gradient_accumulation_dtype=accumulator_dtype)


CORRECT = {
    "config by ipu.utils.configure_ipu_system, pipeline by ipu.ops.pipelining_ops, tf.half": (
        configure_with_the_module_function, pipeline_through_ipu_ops),
    "a class with __call__, accumulators' type by a callable, defaults said outright": (
        configure_two_ipus, MemoryFittedPipeline()),
    "own optimizer_function, stages in lambdas, outfeed_loss left out": (
        configure_two_ipus, pipelined_with_own_optimizer_and_no_outfeed_loss),
    "legacy config with set_recomputation_options(False), options bound by functools.partial": (
        configure_with_the_legacy_functions,
        functools.partial(build_pipeline, offload=True,
                          accumulator_dtype=tf.as_dtype("float16"))),
    "pipelined_model a lambda, SDK 1.x pipeline_depth=16": (
        configure_two_ipus,
        lambda infeed, outfeed: ipu.pipelining_ops.pipeline(
            [stage1, stage2], pipeline_depth=16, repeat_count=2, infeed_queue=infeed,
            outfeed_queue=outfeed, optimizer_function=optimizer_function, outfeed_loss=True,
            offload_weight_update_variables=True, gradient_accumulation_dtype="float16")),
}


@pytest.mark.parametrize("attempt", CORRECT)
def test_a_correct_program_written_another_way_is_right(attempt):
    feedback = nb12_memory.check_fits_in_memory(*CORRECT[attempt])
    assert feedback.ok and feedback.text.startswith("Right"), feedback.text


# --- wrong attempts -------------------------------------------------------------------------

def configure_recomputation_too_late():
    """allow_recompute set on the config after configure_ipu_system has applied it."""
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.configure_ipu_system()
    config.allow_recompute = True


def configure_for_recomputation():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 2
    config.allow_recompute = True
    config.configure_ipu_system()


def configure_four_ipus():
    config = ipu.config.IPUConfig()
    config.auto_select_ipus = 4
    config.configure_ipu_system()


def summed_loss_stage2(hidden, labels):
    """The notebook's stage2 copied, the loss summed over the micro-batch, not averaged."""
    logits = nb12_memory._dense(nb12_memory._dense(hidden, 32, "dense32"), 10, "logits",
                                activation=None)
    return tf.reduce_sum(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


WRONG = {
    "repeat_count left out: the SDK's default of one pass per run": (
        lambda: (configure_two_ipus, fitted(repeat_count=None)),
        "your pipeline ran 1 passes of 16 micro-batches"),
    "allow_recompute set after configure_ipu_system, the mode given, float32 accumulators": (
        lambda: (configure_recomputation_too_late,
                 fitted(recomputation_mode=RECOMPUTE, gradient_accumulation_dtype=None)),
        "but nothing was recomputed"),
    "recomputation_mode given as a string": (
        lambda: (configure_for_recomputation,
                 fitted(recomputation_mode="RecomputeThenBackpropagate")),
        "takes a member of the enum, not a string"),
    "allow_recompute=True kept with the solution's options (Auto then recomputes)": (
        lambda: (configure_for_recomputation, fitted()),
        "costs time without being needed for the budget"),
    "offloaded activations instead of the optimizer's state": (
        lambda: (configure_two_ipus, fitted(offload_weight_update_variables=None,
                                            offload_activations=True)),
        "do your options not touch yet?"),
    "the loss summed over the micro-batch, not averaged": (
        lambda: (configure_two_ipus, fitted(stages=(stage1, summed_loss_stage2))),
        "times larger"),
    "the stages swapped onto IPUs [1, 0] to move the wide layers off IPU 0": (
        lambda: (configure_two_ipus, fitted(device_mapping=[1, 0])),
        "your pipeline put its stages on IPUs [1, 0]"),
    "four IPUs configured: the pipeline twice, as two replicas": (
        lambda: (configure_four_ipus, fitted()),
        "your program ran 2 replicas of the pipeline, on 4 IPUs"),
    "offload_weight_update_variable misspelt (no final s)": (
        lambda: (configure_two_ipus, fitted(offload_weight_update_variables=None,
                                            offload_weight_update_variable=True)),
        "unexpected keyword argument 'offload_weight_update_variable'"),
}


@pytest.mark.parametrize("attempt", WRONG)
def test_a_wrong_attempt_gets_the_hint_on_its_own_mistake(attempt):
    make, _ = WRONG[attempt]
    feedback = nb12_memory.check_fits_in_memory(*make())
    assert_own_hint(feedback, attempt, WRONG)
    assert "Traceback" not in feedback.text, feedback.text
