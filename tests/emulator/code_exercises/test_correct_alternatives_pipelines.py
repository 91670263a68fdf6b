"""Correct programs of the model-parallel exercises (07, 09, 11, 12) written another way than
the reference solution are judged Right: other layer spellings, the V1 wrapper or an averaging
reduction, positional arguments, the legacy configuration functions, stage functions made by
closures, `functools.partial` or a class, options spelled otherwise.  The checks compare
what each run did with the reference's run, never the text."""
import functools

import numpy as np
import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import (nb07_sharding, nb09_pipelining, nb11_configurable_stages,
                                         nb12_memory)
from tests.support.code_exercise_checks import outside_solutions_mode  # noqa: F401

v1 = tf.compat.v1


# --- 07: the step in two shards ------------------------------------------------------------

def sharded(flatten="reshape", wrapper="V2", reduction=None, scope_names=True, shard="scopes",
            dense="keras"):
    def layer(width, activations):
        if dense == "v1 layers":
            return v1.layers.dense(activations, width, activation=tf.nn.relu)
        return tf.keras.layers.Dense(width, activation="relu")(activations)

    def training_step(learning_rate, images, labels):
        with ipu.scopes.ipu_shard(0) if shard == "scopes" else ipu.scopes.ipu_shard(index=0):
            with v1.variable_scope("flatten"):
                activations = (tf.reshape(images, [-1, 784]) if flatten == "reshape"
                               else tf.keras.layers.Flatten()(images))
            for name, width in (("dense256", 256), ("dense128", 128), ("dense64", 64)):
                with v1.variable_scope(name):
                    activations = layer(width, activations)
        with ipu.scopes.ipu_shard(1):
            loss = nb07_sharding.last_layers(activations, labels)
            wrap = {"V2": ipu.optimizers.GradientAccumulationOptimizerV2,
                    "V1": ipu.optimizers.GradientAccumulationOptimizer}[wrapper]
            named = {} if reduction is None else {"reduction_method": reduction}
            with (v1.variable_scope("optimizer") if scope_names else _no_scope()):
                train_op = wrap(v1.train.GradientDescentOptimizer(learning_rate), 16,
                                **named).minimize(loss)
        return learning_rate, train_op
    return training_step


class _no_scope:   # pylint: disable=invalid-name  (used as a context manager, like a scope)
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


SHARDED = {
    "Keras's Flatten layer for the reshape": sharded(flatten="layer"),
    "the ReLU named as a string": sharded(),
    "the V1 wrapper": sharded(wrapper="V1"),
    "the gradients averaged (MEAN)": sharded(reduction="mean"),
    "the optimizer outside a variable scope": sharded(scope_names=False),
    "the shard index by keyword": sharded(shard="keyword"),
    "tf.compat.v1.layers.dense for the first layers": sharded(dense="v1 layers"),
    "the gradients averaged as they come (RUNNING_MEAN)": sharded(reduction="running_mean"),
    "Flatten, V1, outside a variable scope": sharded(flatten="layer", wrapper="V1",
                                                     scope_names=False),
}


# --- 09: the pipeline ----------------------------------------------------------------------

def pipelined(optimizer="sgd", order="keywords", reduction=None, learning_rate_from="inputs"):
    def pipelined_model(learning_rate, infeed, outfeed):
        def optimizer_function(lr, loss):
            made = {"sgd": lambda: v1.train.GradientDescentOptimizer(lr),
                    "rmsprop": lambda: v1.train.RMSPropOptimizer(0.001)}[optimizer]()
            return ipu.pipelining_ops.OptimizerFunctionOutput(made, loss)

        named = {} if reduction is None else {"reduction_method": reduction}
        stages = [nb09_pipelining.tutorial_stage1, nb09_pipelining.tutorial_stage2]
        if order == "positional":   # the SDK's first two parameters
            return ipu.pipelining_ops.pipeline(
                stages, 16, repeat_count=4, inputs=[learning_rate], infeed_queue=infeed,
                outfeed_queue=outfeed, optimizer_function=optimizer_function,
                outfeed_loss=True, **named)
        return ipu.pipelining_ops.pipeline(
            computational_stages=stages, gradient_accumulation_count=16, repeat_count=4,
            inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
            optimizer_function=optimizer_function, device_mapping=[0, 1],
            pipeline_schedule=ipu.pipelining_ops.PipelineSchedule.Grouped, outfeed_loss=True,
            **named)
    return pipelined_model


PIPELINED = {
    "the arguments positional": pipelined(order="positional"),
    "device_mapping given as [0, 1]": pipelined(),
    "RMSProp, the task leaving the optimizer free": pipelined(optimizer="rmsprop"),
    "the gradients averaged (RUNNING_MEAN)": pipelined(reduction="running_mean"),
}


# --- 11: stages from splits ----------------------------------------------------------------

def from_splits(style="closure", resource=True, schedule="Grouped"):
    def pipeline_for_splits(layers, splits, learning_rate, infeed, outfeed):
        names = [layer.name for layer in layers]
        cuts = [0] + [names.index(split) for split in splits] + [len(layers)]
        pieces = [layers[a:b] for a, b in zip(cuts, cuts[1:])]

        def run_piece(k, piece, *args):
            for layer in piece:
                with v1.variable_scope(f"stage{k}_{layer.name}", use_resource=resource):
                    args = layer.function(*args)
            return args

        class Stage:   # a callable object per piece
            def __init__(self, k, piece):
                self.k, self.piece = k, piece

            def __call__(self, *args):
                return run_piece(self.k, self.piece, *args)

        if style == "closure":
            stages = [(lambda k, piece: lambda *args: run_piece(k, piece, *args))(k, piece)
                      for k, piece in enumerate(pieces)]
        elif style == "default arguments":
            stages = [lambda *args, k=k, piece=piece: run_piece(k, piece, *args)
                      for k, piece in enumerate(pieces)]
        elif style == "partial":
            stages = [functools.partial(run_piece, k, piece) for k, piece in enumerate(pieces)]
        elif style == "generator":
            stages = list(functools.partial(run_piece, k, piece)
                          for k, piece in zip(range(len(pieces)), pieces))
        else:
            stages = [Stage(k, piece) for k, piece in enumerate(pieces)]
        return ipu.pipelining_ops.pipeline(
            stages, 16, inputs=[learning_rate], infeed_queue=infeed, outfeed_queue=outfeed,
            optimizer_function=nb11_configurable_stages.optimizer_function,
            pipeline_schedule=getattr(ipu.pipelining_ops.PipelineSchedule, schedule),
            outfeed_loss=True)
    return pipeline_for_splits


FROM_SPLITS = {
    "stages made by a closure": from_splits("closure"),
    "stages bound by default arguments": from_splits("default arguments"),
    "stages as functools.partial": from_splits("partial"),
    "stages as callable objects": from_splits("class"),
    "stages from a generator": from_splits("generator"),
    "the scopes without use_resource (resource variables anyway)": from_splits(resource=False),
}


# --- 12: memory options --------------------------------------------------------------------

def configure(legacy=False):
    def configure_ipus():
        if legacy:
            options = ipu.utils.create_ipu_config()
            options = ipu.utils.auto_select_ipus(options, 2)
            ipu.utils.configure_ipu_system(options)
        else:
            config = ipu.config.IPUConfig()
            config.auto_select_ipus = 2
            config.configure_ipu_system()
    return configure_ipus


def fitted(dtype=tf.float16, **more):
    def pipelined_model(infeed, outfeed):
        options = dict(offload_weight_update_variables=True, gradient_accumulation_dtype=dtype,
                       **more)
        return ipu.pipelining_ops.pipeline(
            [nb12_memory.stage1, nb12_memory.stage2], 16, repeat_count=2,
            infeed_queue=infeed, outfeed_queue=outfeed,
            optimizer_function=nb12_memory.optimizer_function, outfeed_loss=True, **options)
    return pipelined_model


FITTED = {
    "the legacy configuration functions": (configure(legacy=True), fitted()),
    "the accumulators' type as NumPy's float16": (configure(), fitted(dtype=np.float16)),
    "offload_activations=False said outright": (configure(), fitted(offload_activations=False)),
    "the options passed as a dict": (configure(), fitted(**{})),
    "offload_activations=None said outright": (configure(), fitted(offload_activations=None)),
    "the accumulators' type as the string 'float16'": (configure(), fitted(dtype="float16")),
    "recomputation_mode Auto, the system not allowing it": (
        configure(), fitted(recomputation_mode=ipu.pipelining_ops.RecomputationMode.Auto)),
}


ALTERNATIVES = [(check, name, attempt)
                for check, table in ((nb07_sharding.check_sharded_step, SHARDED),
                                     (nb09_pipelining.check_pipelined_model, PIPELINED),
                                     (nb11_configurable_stages.check_configurable_pipeline,
                                      FROM_SPLITS),
                                     (nb12_memory.check_fits_in_memory, FITTED))
                for name, attempt in table.items()]


@pytest.mark.parametrize("check,name,attempt", ALTERNATIVES,
                         ids=[f"{check.exercise_name}: {name}" for check, name, _ in ALTERNATIVES])
def test_a_correct_program_written_another_way_is_right(check, name, attempt):
    feedback = check(*attempt) if isinstance(attempt, tuple) else check(attempt)
    assert feedback.ok, f"{name}: {feedback.text}"
