"""``compile``: turn a Python function into one IPU program.

On an IPU the function is compiled by XLA and Poplar into an executable, and every
``sess.run`` of the result is one execution of it (one ``Engine::run``).  The emulator builds
the same computation into the TensorFlow graph on the CPU, applies the SDK's return
convention, and registers the program so each ``sess.run`` is recorded as an engine run.

    with ipu.scopes.ipu_scope("/device:IPU:0"):
        [loss] = ipu.ipu_compiler.compile(train_step, inputs=[x, y])

Any IPU device scope will do, as in the SDK: ``with tf.device("/device:IPU:0"):`` too.
"""
import contextlib

import tensorflow as tf
from tensorflow.python.util import nest

from ipu_emulator.runtime import float16, programs, replication, shards, variable_creations
from . import scopes

_NOT_PLACED_MESSAGE = (
    "A computation has been compiled, however it was not placed on an IPU device. This "
    "computation will not be executed on an IPU.\nTo execute it on an IPU use the "
    "`ipu_scope` from `tensorflow.python.ipu.scopes`, for example:\n\n"
    "  with ipu_scope('/device:IPU:0'):\n"
    "    result = ipu_compiler.compile(comp, inputs)")


def compile(computation, inputs=None):  # pylint: disable=redefined-builtin
    """Build ``computation(*inputs)`` as an IPU program.

    Returns a list of the computation's output tensors (a one-element list for a single
    tensor), the same nested structure for nested outputs, or a single ``tf.Operation`` when
    the computation returns nothing or only operations.
    """
    if inputs is None:
        inputs = []
    if not isinstance(inputs, (list, tuple)):
        raise TypeError("inputs must be a list")
    if tf.executing_eagerly():
        return _compile_eagerly(computation, inputs)

    flat_inputs = [tf.convert_to_tensor(x) for x in nest.flatten(inputs)]
    packed_inputs = nest.pack_sequence_as(inputs, flat_inputs)
    ordinal = scopes.current_ipu_ordinal()
    placement = contextlib.nullcontext()
    if ordinal is None:
        # A plain ``tf.device("/device:IPU:N")`` scope is an IPU device scope too.
        ordinal = scopes.device_scope_ordinal()
        if ordinal is not None:
            placement = scopes.placed_on_ipu(ordinal)
    creations = variable_creations.VariableCreations()
    with placement, tf.compat.v1.variable_creator_scope(creations.recording_creator()):
        program, result = _build_program(computation, packed_inputs, flat_inputs, ordinal)
    if ordinal is not None:
        program.rebuild = _rebuilder(program, result, _Recipe(
            computation, packed_inputs, flat_inputs, ordinal, creations))
    return result


def _build_program(computation, packed_inputs, flat_inputs, ordinal):
    """Build ``computation`` into the default graph as one registered program."""
    graph = tf.compat.v1.get_default_graph()
    program = programs.CompiledProgram(
        name=programs.new_program_name(), graph=graph,
        device_ordinal=ordinal if ordinal is not None else 0,
        input_tensors=flat_inputs)
    program.cpu_offset = shards.cpu_offset(program.device_ordinal)
    first_new_op = len(graph.get_operations())
    replicated = replication.start(program, ordinal)
    with programs.building(program), replication.building(replicated):
        with tf.compat.v1.variable_scope(tf.compat.v1.get_variable_scope(), use_resource=True):
            outputs = computation(*packed_inputs)
            if replicated is not None:
                outputs = replicated.finish_program(lambda: computation(*packed_inputs), outputs)
    program.new_ops = graph.get_operations()[first_new_op:]
    shards.settle_gradient_tags(program.new_ops)  # colocated gradients: tag where they run
    # float16 ops computed in float32, rounded to float16 where the IPU stores float16
    float16.settle_program(program, programs.pipelines_of(program))

    if ordinal is None and any(op.type != "NoOp" for op in program.new_ops):
        raise Exception(_NOT_PLACED_MESSAGE)  # pylint: disable=broad-exception-raised
    _reject_estimator_spec(outputs)

    result = _apply_return_convention(outputs, program)
    fetchables = _fetchables(result)
    program.output_tensors = [t for t in fetchables if isinstance(t, tf.Tensor)]
    reg = programs.registry(graph)
    for item in fetchables:
        reg.program_by_fetch[item.name] = program
    return program, result


def _fetchables(result):
    return [result] if isinstance(result, tf.Operation) else nest.flatten(result)


class _Recipe:
    """What ``compile`` was called with, and where: enough to build the program again."""

    def __init__(self, computation, packed_inputs, flat_inputs, ordinal, creations):
        graph = tf.compat.v1.get_default_graph()
        self.computation, self.packed_inputs, self.flat_inputs = (
            computation, packed_inputs, flat_inputs)
        self.ordinal, self.creations = ordinal, creations
        self.name_scope = graph.get_name_scope()
        self.variable_scope = tf.compat.v1.get_variable_scope()


def _rebuilder(program, result, recipe):
    """``program.rebuild``: build the computation again, where and as ``compile`` built it,
    for the device configured now (runtime/late_compile.py decides when).  The new build is
    handed the variables the first one created, so weights, optimizer state and
    checkpoints stay the user's; outfeeds are enqueued anew and their dequeues rebuilt.
    Returns the new program and ``{old fetch name: new fetch}``."""
    graph = program.graph

    def rebuild():
        taken = [(outfeed, outfeed._take_graph_queue(graph))  # pylint: disable=protected-access
                 for outfeed in program.outfeeds]
        scope = recipe.name_scope
        with graph.as_default(), scopes.ipu_scope("/device:IPU:%d" % recipe.ordinal), \
                graph.name_scope(scope + "/" if scope else None), \
                tf.compat.v1.variable_scope(recipe.variable_scope,
                                            reuse=tf.compat.v1.AUTO_REUSE,
                                            auxiliary_name_scope=False), \
                tf.compat.v1.variable_creator_scope(
                    recipe.creations.replay().reusing_creator()):
            new_program, new_result = _build_program(
                recipe.computation, recipe.packed_inputs, recipe.flat_inputs, recipe.ordinal)
        replaced = {old.name: new
                    for old, new in zip(_fetchables(result), _fetchables(new_result))}
        with graph.as_default():
            for outfeed, old_queue in taken:
                replaced.update(outfeed._rebuild_dequeues(graph, old_queue))  # pylint: disable=protected-access
        new_program.rebuild = _rebuilder(new_program, new_result, recipe)
        return new_program, replaced
    return rebuild


def _compile_eagerly(computation, inputs):
    """Eager mode wraps the computation in a ``tf.function``, as the SDK does."""
    return tf.function(computation)(*inputs)


def _reject_estimator_spec(outputs):
    # Walk the structure by hand: nest.flatten would open the spec (a namedtuple) itself.
    pending = [outputs]
    while pending:
        item = pending.pop()
        if type(item).__name__ in ("EstimatorSpec", "IPUEstimatorSpec"):
            raise ValueError(
                "Your computation output contains an EstimatorSpec or IPUEstimatorSpec "
                "object. When you use an IPUEstimator, it already handles all the xla "
                "compilation and no manual call to compile() is needed.")
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend(item)


def _apply_return_convention(outputs, program):
    if outputs is None:
        return _group_program(program, [])
    if isinstance(outputs, (list, tuple)) and not _is_nested(outputs):
        return _flat_result(list(outputs), program)
    if not isinstance(outputs, (list, tuple, dict)) and not nest.is_nested(outputs):
        return _flat_result([outputs], program)
    return _nested_result(outputs)


def _is_nested(values):
    return any(nest.is_nested(v) for v in values)


def _flat_result(values, program):
    tensors, operations = [], []
    for value in values:
        if isinstance(value, tf.Operation):
            operations.append(value)
            continue
        if operations:
            raise ValueError(
                "XLA computation function must return zero or more Tensor values followed "
                "by zero or more Operations.")
        tensors.append(_to_tensor(value))
    if not tensors:
        return _group_program(program, operations)
    with tf.control_dependencies(operations):
        return [tf.identity(t, name="output_%d" % i) for i, t in enumerate(tensors)]


def _nested_result(outputs):
    for value in nest.flatten(outputs):
        if isinstance(value, tf.Operation):
            raise ValueError(
                "xla.compile does not support Operation as return value in non-flat output "
                "structure. You can set returned Operations as control dependencies of "
                "returned Tensors so Operations are triggered when Tensors are evaluated. "
                'Operation found: "%s"' % value.name)
    flat = [tf.identity(_to_tensor(v), name="output_%d" % i)
            for i, v in enumerate(nest.flatten(outputs))]
    return nest.pack_sequence_as(outputs, flat)


def _to_tensor(value):
    try:
        return tf.convert_to_tensor(value)
    except (TypeError, ValueError) as error:
        raise ValueError(
            "XLA computation function return values must all either be Operations or "
            'convertible to Tensors. Got error: "%s"' % error) from error


def _group_program(program, operations):
    """One op that runs everything the computation built (its sinks at top level)."""
    sinks = _top_level_sinks(program.new_ops)
    return tf.group(*(list(operations) + sinks), name="output_0")


def _top_level_sinks(new_ops):
    """Ops outside any loop whose outputs nothing else in the program consumes.

    Running these runs the whole computation, including side effects such as variable
    updates and outfeed enqueues that no returned tensor depends on.  A variable's own ops
    are not part of the program: its initialiser is lifted out of it and run once, by the
    host's ``global_variables_initializer`` (grouping it in would reset the variable at every
    run), and the read and the is-initialised check TensorFlow makes with every variable
    compute values nobody asked for (grouping them in read every weight at every run, and
    made a control edge per weight from each IPU's device to the one holding the group).
    """
    not_program = _variable_own_ops(new_ops)
    consumed = set()
    for op in new_ops:
        consumed.update(inp.op for inp in op.inputs)
        consumed.update(op.control_inputs)
    return [op for op in new_ops
            if op not in consumed and op not in not_program and op.type != "Const"
            and op._get_control_flow_context() is None]  # pylint: disable=protected-access


def _variable_own_ops(new_ops):
    """The ops TensorFlow makes with each of the graph's variables, the program's or not
    (its initialiser, is-initialised check and value read), and the initialisers of the
    replicas' copies (their initial values feed only them)."""
    if not new_ops:
        return set()
    graph = new_ops[0].graph
    keys = (tf.compat.v1.GraphKeys.GLOBAL_VARIABLES, tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
            tf.compat.v1.GraphKeys.MODEL_VARIABLES)
    own = set()
    for key in keys:
        for variable in graph.get_collection(key):
            # pylint: disable=protected-access  (TensorFlow keeps these on the variable only)
            for made in (getattr(variable, "initializer", None),
                         getattr(variable, "_is_initialized_op", None),   # a tensor
                         getattr(variable, "_graph_element", None)):      # the read, a tensor
                if made is not None:
                    own.add(made if isinstance(made, tf.Operation) else made.op)
    return own | replication.copy_initializers(graph)
