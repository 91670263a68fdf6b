"""On-device loops: run a body many times inside one execution of an IPU program.

Without a loop every training step is its own ``sess.run`` and pays the host's per-run
cost.  ``repeat(n, body, ...)`` keeps the whole epoch on the device: the body takes its
previous outputs first, then the next element of an infeed queue.

    def body(total, x, y):                 # loop-carried value first, then infeed
        loss = step(x, y)
        return total + loss
    total = ipu.loops.repeat(100, body, inputs=[0.0], infeed_queue=infeed)

The emulator builds one TensorFlow while loop (``parallel_iterations=1``, as on the IPU)
whose body dequeues from the infeed, and carries a hidden trip counter so each engine run
records how many iterations it really made.  The body is built in the name scope the loop
was called from, not TensorFlow's ``while/``: variables created in it (Keras layers name
theirs after the name scope) get the names the SDK gives them, so a checkpoint saved by a
looped program restores into an unlooped one and back.
"""
import numbers

import tensorflow as tf
from tensorflow.python.util import tf_inspect

from ipu_emulator.runtime import graph_loops, programs, replication


def repeat(n, body, inputs=None, infeed_queue=None, use_while_v1=True):
    """Run ``body`` ``n`` times; same arguments and return convention as ``while_loop``."""
    inputs = _as_input_list(inputs)
    _check_body_arity(body, inputs, infeed_queue)
    return while_loop(lambda *args: True, body, inputs=inputs, infeed_queue=infeed_queue,
                      maximum_iterations=n, use_while_v1=use_while_v1)


def while_loop(condition, body, inputs=None, infeed_queue=None, maximum_iterations=None,
               use_while_v1=True):
    """Run ``body`` while ``condition(*loop_carried)`` holds.

    Returns the loop's ``Operation`` when nothing is carried, the single carried tensor when
    there is one input, else a list of tensors.
    """
    del use_while_v1  # Both TensorFlow while-loop versions give the same numerics here.
    inputs = _as_input_list(inputs)
    _check_body_arity(body, inputs, infeed_queue)
    _check_condition_arity(condition, inputs, infeed_queue)

    carries_dummy = not inputs
    loop_vars = [tf.constant(0, dtype=tf.int32)] if carries_dummy else list(inputs)
    input_types = [] if carries_dummy else [_dtype_of(v) for v in loop_vars]
    outermost = not programs.inside_loop()
    # A replicated program builds every replica's body into this loop (lock step); each
    # replica carries its own values, replica 0's first.
    replicated = replication.loop_build() if outermost else None
    width = len(loop_vars)
    if replicated is not None and not carries_dummy:
        loop_vars = loop_vars * replicated.num_ipus
    static_iterations = (int(maximum_iterations)
                         if isinstance(maximum_iterations, numbers.Integral) else None)
    graph = tf.compat.v1.get_default_graph()
    enclosing_scope = graph.get_name_scope()

    def loop_condition(trip_count, *carried):
        del trip_count
        return condition(*([] if carries_dummy else carried[:width]))

    def one_replica(carried):
        args = [] if carries_dummy else list(carried)
        kwargs = {}
        if infeed_queue is not None:
            args, kwargs = graph_loops.dequeued_arguments(args, infeed_queue)
        outputs = body(*args, **kwargs)
        tensors, operations = _split_body_outputs(outputs)
        output_types = [_dtype_of(t) for t in tensors]
        if output_types != input_types:
            raise TypeError(
                "Mismatch between input types and output types for loop body: %s vs %s."
                % (input_types, output_types))
        return tensors, operations

    def loop_body(trip_count, *carried):
        with graph_loops.enclosing_name_scope(graph, enclosing_scope), \
                programs.loop_body(static_iterations):
            if replicated is None:
                tensors, operations = one_replica(carried)
            else:
                tensors, operations = replicated.step(
                    one_replica, carried, 0 if carries_dummy else width)
            if carries_dummy:
                tensors = [carried[0]]
            with tf.control_dependencies(operations):
                tensors = [_identity(t) for t in tensors]
                next_count = trip_count + 1
            return [next_count] + tensors

    with graph_loops.control_flow_of(graph):
        results = tf.compat.v1.while_loop(
            loop_condition, loop_body, [tf.constant(0, dtype=tf.int32)] + loop_vars,
            maximum_iterations=maximum_iterations, parallel_iterations=1)
    if infeed_queue is not None and not infeed_queue.dequeued:
        raise ValueError("The infeed queue has not been dequeued.")

    trip_count, carried = results[0], list(results[1:1 + width])  # replica 0's values
    program = programs.current_program()
    if program is not None and outermost:
        program.trip_counters.append(trip_count)
    if carries_dummy:
        return carried[0].op
    if len(carried) == 1:
        return carried[0]
    return carried


def _as_input_list(inputs):
    if inputs is None:
        return []
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    return [x if isinstance(x, tf.TensorArray) else tf.convert_to_tensor(x) for x in inputs]


def _dtype_of(value):
    return value.dtype


def _identity(value):
    if isinstance(value, tf.TensorArray):
        return value.identity()
    return tf.identity(value)


def _split_body_outputs(outputs):
    if outputs is None:
        outputs = []
    elif not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    tensors, operations = [], []
    for value in outputs:
        if isinstance(value, tf.Operation):
            operations.append(value)
        elif operations:
            raise ValueError("IPU loop body must return zero or more Tensor values followed "
                             "by zero or more Operations.")
        elif isinstance(value, tf.TensorArray):
            tensors.append(value)
        else:
            try:
                tensors.append(tf.convert_to_tensor(value))
            except (TypeError, ValueError) as error:
                raise ValueError("IPU loop body must return zero or more Tensor values "
                                 "followed by zero or more Operations.") from error
    return tensors, operations


# --- argument-count checks (the SDK reuses XLA's rules and wording) -------------------

def _arguments_needed(func, supplied):
    """None if ``func`` accepts ``supplied`` positional arguments, else what it needs."""
    try:
        # TensorFlow's tf_inspect.getargspec, which XLA's check_function_argument_count (the
        # SDK's) uses: it counts ``self`` for a bound method and for an object's __call__, so
        # the SDK refuses a method as a loop body (a partial's bound arguments are left out).
        spec = tf_inspect.getargspec(func)
    except TypeError:
        return None  # Builtins and other uninspectable callables: let the call decide.
    names = list(spec.args)
    with_defaults = len(spec.defaults or ())
    least = len(names) - with_defaults
    if supplied < least:
        if with_defaults == 0 and spec.varargs is None:
            return _count_phrase("exactly", len(names))
        return _count_phrase("at least", least)
    if spec.varargs is None and supplied > len(names):
        return _count_phrase("exactly" if with_defaults == 0 else "at most", len(names))
    return None


def _count_phrase(qualifier, count):
    return "%s %d argument%s" % (qualifier, count, "" if count == 1 else "s")


def _input_names(inputs):
    """How the SDK lists the inputs in arity errors: ``str([i.name for i in inputs])``
    (the wording and format come from the TPU training loop the SDK's loops derive from),
    e.g. ``['Const:0']`` rather than the tensors' reprs."""
    return str([i.handle.name if isinstance(i, tf.TensorArray) else i.name for i in inputs])


def _check_body_arity(body, inputs, infeed_queue):
    from_infeed = infeed_queue.number_of_tuple_elements if infeed_queue is not None else 0
    needed = _arguments_needed(body, len(inputs) + from_infeed)
    if needed is None:
        return
    if infeed_queue is None:
        raise TypeError(
            "Supplied loop body function cannot be called with the specified inputs. You "
            "specified %d inputs: %s, but the loop body needs %s."
            % (len(inputs), _input_names(inputs), needed))
    raise TypeError(
        "Supplied loop body function cannot be called with the specified inputs. You "
        "specified %d inputs: %s and %d additional inputs from infeed, but the computation "
        "needs %s." % (len(inputs), _input_names(inputs), from_infeed, needed))


def _check_condition_arity(condition, inputs, infeed_queue):
    needed = _arguments_needed(condition, len(inputs))
    if needed is None:
        return
    message = ("Supplied loop condition function cannot be called with the specified inputs. "
               "You specified %d inputs: %s, but the loop condition needs %s."
               % (len(inputs), _input_names(inputs), needed))
    if infeed_queue is not None:
        message += " Note that infeed is not passed to the loop condition."
    raise TypeError(message)
