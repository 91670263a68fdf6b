"""Correct programs written another way than the reference solution are judged Right: other
spellings of the API (the legacy configuration functions, `tf.compat.v1` names, keyword or
positional arguments), another order of building, `while_loop` for `repeat`, closures,
lambdas and `functools.partial`, the V1 accumulation optimizer, a hand-written mean across
replicas.  The check compares what each run did with the reference's run, never the text."""
import functools

import pytest
import tensorflow as tf

from ipu_emulator import ipu
from ipu_emulator.code_exercises import (nb01_porting, nb02_loops, nb05_replication,
                                         nb06_accumulation)
from tests.support.code_exercise_checks import outside_solutions_mode  # noqa: F401

v1 = tf.compat.v1


def configure(ipus, legacy=False):
    if legacy:   # the functional API of Graphcore's tutorial 1
        options = ipu.utils.create_ipu_config()
        options = ipu.utils.auto_select_ipus(options, ipus)
        ipu.utils.configure_ipu_system(options)
    else:
        config = ipu.config.IPUConfig()
        config.auto_select_ipus = ipus
        config.configure_ipu_system()


def model_loss(images, labels):
    logits = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(images))
    return v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)


# --- 01: the port --------------------------------------------------------------------------

def port(configure_first=False, legacy=False, fetch="list", run_style="with", step_style="def",
         inputs="tuple", returns="list"):
    def train(images, labels, steps):
        if configure_first:
            configure(1, legacy)
        dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
        next_batch = v1.data.make_one_shot_iterator(
            dataset.batch(32, drop_remainder=True)).get_next()

        def training_step(images, labels, learning_rate=0.05):
            loss = model_loss(images, labels)
            return [loss, v1.train.GradientDescentOptimizer(learning_rate).minimize(loss)]

        step_function = {"def": training_step,
                         "partial": functools.partial(training_step, learning_rate=0.05),
                         "lambda": lambda images, labels: training_step(images, labels)
                         }[step_style]
        given = {"tuple": next_batch, "list": list(next_batch)}[inputs]
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            step = ipu.ipu_compiler.compile(step_function, inputs=given)
        if not configure_first:
            configure(1, legacy)
        losses = []
        session = v1.Session()
        if run_style == "with":
            session.__enter__()
        session.run(v1.global_variables_initializer())
        for _ in range(steps):
            losses.append(session.run(step)[0] if fetch == "index" else session.run(step))
        if run_style == "with":
            session.__exit__(None, None, None)
        else:
            session.close()
        return losses if returns == "list" else tuple(losses)
    return train


PORTS = {
    "the configuration applied before building": port(configure_first=True),
    "the legacy configuration functions": port(legacy=True),
    "the legacy functions, configured first": port(configure_first=True, legacy=True),
    "the loss taken by index": port(fetch="index"),
    "a session opened and closed by hand": port(run_style="close"),
    "the step given as functools.partial": port(step_style="partial"),
    "the step given as a lambda": port(step_style="lambda"),
    "the batch given as a list of two tensors": port(inputs="list"),
    "the losses returned as a tuple": port(returns="tuple"),
}



# --- 02: the loop on the device ------------------------------------------------------------

def looped(kind="repeat", carried=True, configure_in_train=False, start=0.0, feed_name=None,
           compiled_with="no inputs", init_order="infeed first"):
    def train(images, labels, steps):
        if configure_in_train:
            configure(1, legacy=configure_in_train == "legacy")
        dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
        named = {} if feed_name is None else {"feed_name": feed_name}
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(32, drop_remainder=True),
                                                     **named)

        def body(*args):
            *carried_values, images, labels = args
            loss = model_loss(images, labels)
            train_op = v1.train.GradientDescentOptimizer(0.05).minimize(loss)
            if kind == "while_loop":
                [count] = carried_values
                return count + 1, train_op
            return ([carried_values[0] + loss] if carried_values else []) + [train_op]

        def all_steps():
            if kind == "while_loop":
                return ipu.loops.while_loop(lambda count: count < steps, body,
                                            inputs=[tf.constant(0)], infeed_queue=infeed)
            first = tf.constant(0.0) if start == "a tensor" else start
            return ipu.loops.repeat(n=steps, body=body, inputs=[first] if carried else [],
                                    infeed_queue=infeed)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            program = (ipu.ipu_compiler.compile(all_steps, inputs=[])
                       if compiled_with == "no inputs" else
                       ipu.ipu_compiler.compile(lambda: all_steps()))
        with v1.Session() as session:
            first, then = (infeed.initializer, v1.global_variables_initializer())
            if init_order != "infeed first":
                first, then = then, first
            session.run(first)
            session.run(then)
            session.run(program)
    return train


LOOPS = {
    "repeat with a running total": looped(),
    "repeat with nothing carried": looped(carried=False),
    "a while_loop counting the steps": looped(kind="while_loop"),
    "the device configured again inside train": looped(configure_in_train=True),
    "configured again with the legacy functions": looped(configure_in_train="legacy"),
    "the running total started as a tensor": looped(start="a tensor"),
    "the infeed given a feed_name": looped(feed_name="training_infeed"),
    "the loop compiled through a lambda": looped(compiled_with="lambda"),
    "the variables initialized before the infeed": looped(init_order="variables first"),
}



# --- 06: accumulation ----------------------------------------------------------------------

def accumulating(wrapper="V2", positional=False, reduction=None, optimizer_made="in the step",
                 configure_again=False):
    def train(images, labels, runs):
        if configure_again:
            configure(1)
        made_once = v1.train.GradientDescentOptimizer(0.01)
        dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(32, drop_remainder=True))

        def training_step(images, labels):
            loss = model_loss(images, labels)
            wrap = {"V2": ipu.optimizers.GradientAccumulationOptimizerV2,
                    "V1": ipu.optimizers.GradientAccumulationOptimizer}[wrapper]
            plain = (made_once if optimizer_made == "once, outside"
                     else v1.train.GradientDescentOptimizer(0.01))
            named = {} if reduction is None else {"reduction_method": reduction}
            optimizer = (wrap(plain, 16, **named) if positional
                         else wrap(plain, num_mini_batches=16, **named))
            return optimizer.minimize(loss)

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            program = ipu.ipu_compiler.compile(
                lambda: ipu.loops.repeat(2 * 16, training_step, infeed_queue=infeed))
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            session.run(infeed.initializer)
            for _ in range(runs):
                session.run(program)
    return train


ACCUMULATIONS = {
    "the V2 wrapper, num_mini_batches by keyword": accumulating(),
    "the V2 wrapper, the count positional": accumulating(positional=True),
    "the V1 wrapper": accumulating(wrapper="V1"),
    "the V1 wrapper, the count positional": accumulating(wrapper="V1", positional=True),
    "the plain optimizer made outside the step": accumulating(optimizer_made="once, outside"),
    "the device configured again inside train": accumulating(configure_again=True),
    "the gradients averaged (MEAN), as the SDK offers": accumulating(
        reduction=ipu.optimizers.GradientAccumulationReductionMethod.MEAN),
    "the gradients averaged as they come (RUNNING_MEAN)": accumulating(reduction="running_mean"),
}



# --- 05: replication -----------------------------------------------------------------------

def replicated(average="optimizer", configure_first=False, legacy=False, named_feeds=True,
               give_back="dequeued"):
    def train(images, labels, steps):
        if configure_first:
            configure(2, legacy)
        dataset = v1.data.Dataset.from_tensor_slices((images, labels)).repeat()
        names = ({"feed_name": "in"}, {"feed_name": "out"}) if named_feeds else ({}, {})
        infeed = ipu.ipu_infeed_queue.IPUInfeedQueue(dataset.batch(32, drop_remainder=True),
                                                     replication_factor=2, **names[0])
        outfeed = ipu.ipu_outfeed_queue.IPUOutfeedQueue(replication_factor=2, **names[1])

        def training_step(images, labels):
            loss = model_loss(images, labels)
            plain = v1.train.GradientDescentOptimizer(0.05)
            if average == "optimizer":
                update = ipu.optimizers.CrossReplicaOptimizer(plain).minimize(loss)
            else:   # the mean (or, wrongly, the sum) across replicas written by hand
                across = {"by hand": ipu.cross_replica_ops.cross_replica_mean,
                          "summed by hand": ipu.cross_replica_ops.cross_replica_sum}[average]
                pairs = plain.compute_gradients(loss)
                update = plain.apply_gradients([(across(grad), var) for grad, var in pairs])
            return outfeed.enqueue(loss), update

        with ipu.scopes.ipu_scope("/device:IPU:0"):
            program = ipu.ipu_compiler.compile(
                lambda: ipu.loops.repeat(steps, training_step, infeed_queue=infeed))
        read = outfeed.dequeue()
        if not configure_first:
            configure(2, legacy)
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            session.run(infeed.initializer)
            session.run(program)
            losses = session.run(read)
        return list(losses) if give_back == "a list" else losses
    return train


REPLICATIONS = {
    "CrossReplicaOptimizer": replicated(),
    "the mean across replicas written by hand": replicated(average="by hand"),
    "the device configured before building": replicated(configure_first=True),
    "the legacy configuration functions": replicated(legacy=True),
    "legacy functions, configured first": replicated(configure_first=True, legacy=True),
    "queues without feed names": replicated(named_feeds=False),
    "the losses returned as a list": replicated(give_back="a list"),
}



ALTERNATIVES = [(check, name, attempt)
                for check, table in ((nb01_porting.check_port, PORTS),
                                     (nb02_loops.check_loop_on_device, LOOPS),
                                     (nb05_replication.check_replicated_training, REPLICATIONS),
                                     (nb06_accumulation.check_accumulating_training,
                                      ACCUMULATIONS))
                for name, attempt in table.items()]


@pytest.mark.parametrize("check,name,attempt", ALTERNATIVES,
                         ids=[f"{check.exercise_name}: {name}" for check, name, _ in ALTERNATIVES])
def test_a_correct_program_written_another_way_is_right(check, name, attempt):
    feedback = check(attempt)
    assert feedback.ok, f"{name}: {feedback.text}"


def test_a_sum_across_replicas_where_the_tutorial_averages_is_caught():
    feedback = nb05_replication.check_replicated_training(replicated(average="summed by hand"))
    assert not feedback.ok and "times larger. CrossReplicaOptimizer applies the mean" in \
        feedback.text, feedback.text
