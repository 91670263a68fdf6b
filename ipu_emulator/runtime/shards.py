"""Shards: which IPU of a multi-IPU device an op runs on, made real with CPU devices.

On an IPU system ``ipu_shard(k)`` tags ops with an XLA ``OpSharding`` (``MAXIMAL`` on core
``k``) and the compiler places them on the ``k``-th IPU of the TensorFlow device.  The
emulator keeps the same tag (the ``_XlaSharding`` attribute, so tools that read it still
work) and also places each shard on its own TensorFlow CPU device: shard ``k`` of
``/device:IPU:d`` runs on ``/device:CPU:{offset(d) + k}``, where ``offset(d)`` counts the
IPUs of the devices before ``d``.  Tensors crossing shards then really move between devices
(TensorFlow inserts send/receive pairs, as the IPU does with inter-IPU copies).  Replica
``r`` of a replicated pipeline with ``S`` shards runs shard ``k`` on IPU ``r * S + k``
(``replica_devices``), the IPUs the simulator draws that replica on.

A TF1 ``Session`` has only one CPU device unless its ``ConfigProto`` asks for more with
``device_count={'CPU': N}``; ``tf.config.set_logical_device_configuration`` does not reach
sessions.  The tutorial scripts create ``tf.Session()`` themselves, so ``install()`` wraps
``BaseSession.__init__``: a session created after an IPU system with ``N`` IPUs in total was
configured gets ``N`` CPU devices (unless its config already asks for at least that many);
a session created without a config also gets soft placement, and every session runs
without Grappler's rewrites (``graph_rewrites``) on thread pools that do not spin when idle
(``thread_spinning``).
Doing it at session creation rather than at configure time is the only place it can be
done: the device list of a session is fixed when it is created, and it is the one moment
we know both the configuration and the session's own ``ConfigProto``.

Where an op runs follows the SDK's rule (Graphcore's TensorFlow user guide, sharding): an
op takes the sharding of the ``ipu_shard`` scope it is built in, gradient ops included.  So
the gradient ops that ``minimize`` or ``compute_gradients`` build inside ``ipu_shard(1)`` run
on shard 1, whichever shard their forward ops ran on (in the pipelining tutorial's step 2,
the model split at dense32 with the optimizer in the last shard's scope, "the gradients are
calculated entirely on IPU1").  Only two things send a gradient op to its forward op's shard:

* it is built outside every shard scope: TensorFlow marks each op a gradient function
  builds with the forward op as ``_original_op``, and the device function below takes the
  forward op's shard from there;
* ``colocate_gradients_with_ops=True`` (an argument of ``minimize``/``compute_gradients``;
  ``ShardedOptimizer`` sets it): TensorFlow colocates each gradient op with its forward op,
  clearing the device functions while it builds it, so the op gets the forward op's CPU
  device from TensorFlow itself.  The ``ipu_shard`` scope's attribute still tags it with the
  scope's shard, though; ``settle_gradient_tags`` (run when a program is compiled) gives
  such ops the tag of the op they were placed with, so that the tags (``shard_of``,
  ``program_shard_indices``) say where they run, as ``placed_shard`` does.

Pipelines are the exception inside the emulator: their optimizer function is built in the
last stage's ``shard_context``, yet each backward stage runs on its forward stage's IPUs, so
that context asks for ``gradients_follow_forward_ops``.
"""
from __future__ import annotations

import functools
import re
import threading
from typing import Optional

import tensorflow as tf
from tensorflow.python.client import session as tf_session

from ipu_emulator.runtime import configured_system
from ipu_emulator.runtime.graph_rewrites import without_grappler
from ipu_emulator.runtime.thread_spinning import without_spinning
from ipu_emulator.sim import hardware

SHARDING_ATTR = "_XlaSharding"

_state = threading.local()


# --- the sharding tag ----------------------------------------------------------------


def _op_sharding_proto(indices):
    try:
        from tensorflow.compiler.xla import xla_data_pb2
    except ImportError:  # pragma: no cover - older/newer layouts keep the proto elsewhere
        return None
    proto = xla_data_pb2.OpSharding(type=xla_data_pb2.OpSharding.MAXIMAL,
                                    tile_assignment_dimensions=[1],
                                    tile_assignment_devices=list(indices))
    return proto.SerializeToString()


def sharding_attr(indices):
    """The ``_XlaSharding`` attribute value for ``indices`` (MAXIMAL sharding)."""
    from tensorflow.core.framework import attr_value_pb2
    serialized = _op_sharding_proto(indices)
    if serialized is None:
        serialized = ",".join(str(i) for i in indices).encode()
    return attr_value_pb2.AttrValue(s=serialized)


def shard_of(op):
    """The (first) shard index an op is tagged with, or None when it has no tag."""
    if op is None:
        return None
    try:
        value = op.get_attr(SHARDING_ATTR)
    except ValueError:
        return None
    try:
        from tensorflow.compiler.xla import xla_data_pb2
        proto = xla_data_pb2.OpSharding()
        proto.ParseFromString(value)
        devices = list(proto.tile_assignment_devices)
    except Exception:  # pylint: disable=broad-except
        devices = [int(x) for x in value.decode().split(",") if x]
    return devices[0] if devices else None


def normalise_indices(index):
    """``ipu_shard`` takes an int or an iterable of ints."""
    if isinstance(index, (bool, str, bytes)):
        raise TypeError("ipu_shard index must be an integer or a list of integers")
    if isinstance(index, int):
        return [index]
    try:
        indices = [int(i) for i in index]
    except (TypeError, ValueError) as error:
        raise TypeError("ipu_shard index must be an integer or a list of integers") from error
    return indices


def current_shard_indices():
    stack = getattr(_state, "shards", None)
    return stack[-1] if stack else None


class _Pushed:
    """A context that pushes ``value`` on this thread's stack ``_state.<stack>`` while it
    is entered (the innermost entry is the stack's last item)."""

    def __init__(self, stack, value):
        self._stack, self._value = stack, value

    def __enter__(self):
        stack = getattr(_state, self._stack, None)
        if stack is None:
            stack = []
            setattr(_state, self._stack, stack)
        stack.append(self._value)
        return self

    def __exit__(self, *exc):
        getattr(_state, self._stack).pop()
        return False


class shard_context(_Pushed):  # pylint: disable=invalid-name
    """Ops created inside are tagged with ``indices`` (used by ``ipu_shard`` and pipelines).

    Gradient ops built inside take ``indices`` too (the SDK's ``ipu_shard``), unless
    ``gradients_follow_forward_ops``: then a gradient op whose forward op is tagged takes the
    forward op's shard (a pipeline's backward stages run where their forward stages do)."""

    def __init__(self, indices, gradients_follow_forward_ops=False):
        self.indices = list(indices)
        self.gradients_follow_forward_ops = bool(gradients_follow_forward_ops)
        self._rule = _Pushed("gradient_rules", self.gradients_follow_forward_ops)
        super().__init__("shards", self.indices)

    def __enter__(self):
        self._rule.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        return self._rule.__exit__(*exc)


def _gradients_follow_forward_ops():
    """True when the innermost shard context sends gradient ops to their forward op's shard."""
    stack = getattr(_state, "gradient_rules", None)
    return bool(stack and stack[-1])


class replica_devices(_Pushed):  # pylint: disable=invalid-name
    """Ops placed inside run on the IPUs of one replica: shard ``k`` goes to IPU
    ``first_ipu + k`` of the device (replica ``r`` of a program with ``S`` shards starts at
    ``r * S``, the layout of the SDK's replicas and of the simulator's lanes).  The sharding
    tag stays ``k``: every replica is the same sharded program."""

    def __init__(self, first_ipu):
        self.first_ipu = int(first_ipu)
        super().__init__("replica_ipus", self.first_ipu)


def _replica_first_ipu():
    stack = getattr(_state, "replica_ipus", None)
    return stack[-1] if stack else 0


def replica_device(device):
    """``device`` (a CPU device standing for an IPU of replica 0) moved to the same IPU of
    the replica being built: where that replica's copy of a variable lives."""
    first_ipu = _replica_first_ipu()
    match = _CPU_DEVICE.search(device or "")
    if not first_ipu or not match:
        return device
    return device[:match.start(1)] + str(int(match.group(1)) + first_ipu)


# --- placement ---------------------------------------------------------------------


def cpu_offset(ordinal):
    """Index of the first CPU device that stands for ``/device:IPU:{ordinal}`` (0 before
    the system is configured: then only the first device's layout is known)."""
    if not configured_system.is_configured():
        return 0
    offset = 0
    for device in configured_system.current().devices:
        if device.ordinal < ordinal:
            offset += device.num_ipus
    return offset


def cpu_device(ordinal, shard):
    """The CPU device standing for IPU ``shard`` of ``/device:IPU:{ordinal}``.

    A shard beyond the device's IPUs is a compile error the backend reports at the
    program's first run (``check_first_run``); until then its ops share the device's IPUs
    (``shard % num_ipus``) so that, for example, the variable initialisers still run.
    Before the system is configured the device's size is unknown (scripts often build
    first and configure just before opening the session, which is fine on an IPU system
    because the program is compiled at its first run), so each shard gets its own device;
    sessions are then given as many CPU devices as the graph's ops name
    (``required_cpu_devices``).
    """
    if not configured_system.is_configured():
        return "/device:CPU:%d" % shard
    try:
        size = configured_system.device(ordinal).num_ipus
    except Exception:  # pylint: disable=broad-except  (unknown ordinal: reported at run)
        size = 1
    return "/device:CPU:%d" % (cpu_offset(ordinal) + shard % max(1, size))


def required_cpu_devices(graph=None):
    """CPU devices a session needs: one per IPU of the configured system, and at least as
    many as the IPU programs of ``graph`` were placed on (built before configuring)."""
    configured = 0
    if configured_system.is_configured():
        configured = sum(device.num_ipus for device in configured_system.current().devices)
    return max(1, configured, _highest_program_cpu(graph) + 1)


def _highest_program_cpu(graph):
    """Highest CPU device index an op of the graph's compiled programs is placed on."""
    from . import programs
    registry = programs.existing_registry(graph) if graph is not None else None
    if registry is None:
        return -1
    highest = -1
    programs_in_graph = {id(p): p for p in registry.program_by_fetch.values()}.values()
    for program in programs_in_graph:
        for op in program.new_ops:
            match = _CPU_DEVICE.search(op.device or "")
            if match:
                highest = max(highest, int(match.group(1)))
    return highest


def device_function(ordinal):
    """Device function of ``ipu_scope('/device:IPU:{ordinal}')``: tag and place each op."""

    def place(op):
        # The shard scope an op is built in decides, gradient ops included (the SDK's rule);
        # outside every shard scope (or in a pipeline's optimizer function) a gradient op
        # takes its forward op's shard.
        indices = current_shard_indices()
        if indices is None or _gradients_follow_forward_ops():
            forward_shard = shard_of(getattr(op, "_original_op", None))
            if forward_shard is not None:
                indices = [forward_shard]
        first_ipu = _replica_first_ipu()
        if indices is None:
            return cpu_device(ordinal, first_ipu)
        op._set_attr(SHARDING_ATTR, sharding_attr(indices))  # pylint: disable=protected-access
        return cpu_device(ordinal, first_ipu + indices[0])

    return place


# --- sessions ----------------------------------------------------------------------

_original_init = tf_session.BaseSession.__init__


def _config_with_cpus(config, needed):
    if config is None:
        # Soft placement: a session made before the IPU system was configured still runs
        # host-side ops (initialisers) placed for more IPUs; programs that need the missing
        # devices are refused with a plain message (``model_parallel.check_session``).
        config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
    if needed <= 1:
        return config
    if config.device_count.get("CPU", 1) >= needed:
        return config
    patched = tf.compat.v1.ConfigProto()
    patched.CopyFrom(config)
    patched.device_count["CPU"] = needed
    return patched


@functools.wraps(_original_init)
def _init(self, target="", graph=None, config=None):
    needed = required_cpu_devices(graph if graph is not None
                                  else tf.compat.v1.get_default_graph())
    config = without_grappler(_config_with_cpus(config, needed))
    _original_init(self, target, graph, without_spinning(config))


def install():
    """Give sessions one CPU device per configured IPU (idempotent)."""
    if getattr(tf_session.BaseSession.__init__, "_ipu_emulator_shards", False):
        return
    tf_session.BaseSession.__init__ = _init
    tf_session.BaseSession.__init__._ipu_emulator_shards = True  # pylint: disable=protected-access


def session_cpu_devices(session):
    """How many CPU devices a session has (cached on the session)."""
    count = getattr(session, "_ipu_emulator_cpu_devices", None)
    if count is None:
        count = sum(1 for d in session.list_devices() if d.device_type == "CPU")
        session._ipu_emulator_cpu_devices = count  # pylint: disable=protected-access
    return count


# --- what a compiled program uses --------------------------------------------------

_CPU_DEVICE = re.compile(r"/device:CPU:(\d+)$")


def placed_shard(op, ordinal=0):
    """The shard an op runs on: its tag, else its CPU device (ops colocated with a variable,
    such as optimizer updates, skip device functions but take the variable's device), else
    the shard of the resource it reads.  None for untagged host-side plumbing."""
    colocated = _colocated_op(op)
    if colocated is not None:
        return placed_shard(colocated, ordinal)
    variable = _variable_read_or_written(op)
    if variable is not None:
        # TensorFlow's placer runs an op on a resource variable where the variable lives.
        return placed_shard(variable, ordinal)
    shard = shard_of(op)
    if shard is not None:
        return shard
    match = _CPU_DEVICE.search(op.device or "")
    if match:
        return int(match.group(1)) - cpu_offset(ordinal)
    for tensor in op.inputs:
        if tensor.dtype == tf.resource and tensor.op is not op:
            source = tensor.op
            if source.type in ("VarHandleOp",) or shard_of(source) is not None or source.device:
                return placed_shard(source, ordinal)
    return None


_VARIABLE_OPS = frozenset({"ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp",
                           "AssignSubVariableOp"})


def _variable_read_or_written(op):
    """The ``VarHandleOp`` a variable read or assignment works on, through loop plumbing."""
    if op.type not in _VARIABLE_OPS or not op.inputs:
        return None
    source = op.inputs[0].op
    for _ in range(16):
        if source.type == "VarHandleOp":
            return source
        if source.type not in ("Enter", "Identity", "Switch", "Merge") or not source.inputs:
            return None
        source = source.inputs[0].op
    return None


def _colocated_op(op):
    """The op this one is colocated with (optimizer updates: their variable), if another."""
    for group in op.colocation_groups():
        name = group.decode()[len("loc:@"):]
        if name != op.name:
            try:
                return op.graph.get_operation_by_name(name)
            except KeyError:
                return None
    return None


def settle_gradient_tags(ops):
    """Give the gradient ops among ``ops`` that TensorFlow placed itself the tag of the op
    they run with (``ops`` in creation order: a program's new ops).

    ``colocate_gradients_with_ops=True`` builds each gradient op colocated with its forward
    op and with the device functions cleared, so TensorFlow puts it on the forward op's
    device while the enclosing ``ipu_shard`` scope's attribute tags it with the scope's shard
    (and outside every scope it is not tagged at all).  The same happens to what
    ``gate_gradients`` adds around each gradient (identities colocated with it, and a
    ``NoOp`` on its device).  Such an op takes the tag of the op it is colocated with or, a
    ``NoOp``, of the ops it waits for, when it runs on their device; ops the device function
    placed already carry the tag of the device they run on and are left alone."""
    for op in ops:
        if getattr(op, "_original_op", None) is None:
            continue
        value = _tag_of_placement(op)
        if value is not None and _tag_value(op) != value:
            op._set_attr(SHARDING_ATTR, _attr(value))  # pylint: disable=protected-access


def _tag_value(op):
    try:
        return op.get_attr(SHARDING_ATTR)
    except ValueError:
        return None


def _attr(value):
    from tensorflow.core.framework import attr_value_pb2
    return attr_value_pb2.AttrValue(s=value)


def _tag_of_placement(op):
    """The tag of the op(s) TensorFlow placed ``op`` with (on their device), if any."""
    colocated = _colocated_op(op)
    if colocated is not None:
        return _tag_value(colocated) if colocated.device == op.device else None
    deps = op.control_inputs
    if op.type == "NoOp" and deps and all(dep.device == op.device for dep in deps):
        values = {_tag_value(dep) for dep in deps}
        if len(values) == 1:
            return values.pop()
    return None


def program_shard_indices(program):
    """Sorted shard indices the program's ops run on (empty: not sharded).

    The session hook asks this on every run of the program; reading the tag of every op
    each time cost a sizeable share of a short run, so the answer is kept on the program
    (its ops are fixed once compiled; the key notices if the list is ever replaced)."""
    key = (id(program.new_ops), len(program.new_ops))
    cached = getattr(program, "_ipu_emulator_shard_indices", None)
    if cached is not None and cached[0] == key:
        return list(cached[1])
    used = set()
    for op in program.new_ops:
        shard = shard_of(op)
        if shard is not None:
            used.add(shard)
    indices = sorted(used)
    program._ipu_emulator_shard_indices = (key, indices)  # pylint: disable=protected-access
    return list(indices)


def num_shards_for(max_shard_index: Optional[int]) -> int:
    """Shards a program occupies: the next power of two above its highest shard index."""
    return hardware.next_power_of_two(1 if max_shard_index is None else max_shard_index + 1)


def num_shards(program):
    """``next power of two >= max shard index + 1`` (1 when nothing is sharded)."""
    indices = program_shard_indices(program)
    return num_shards_for(max(indices) if indices else None)


def shard_ops(program):
    """The program's ops grouped by shard (untagged plumbing counts as shard 0)."""
    groups = {}
    for op in program.new_ops:
        shard = placed_shard(op, program.device_ordinal)
        groups.setdefault(0 if shard is None else shard, []).append(op)
    return groups


__all__ = ["SHARDING_ATTR", "shard_of", "sharding_attr", "shard_context", "replica_devices",
           "device_function", "settle_gradient_tags",
           "cpu_device", "required_cpu_devices", "install", "program_shard_indices",
           "num_shards"]
