"""``ipu.sharding``: helpers for reading and spreading the shard tags of ops.

``ipu.scopes.ipu_shard`` tags ops with the ``_XlaSharding`` attribute.  These helpers are the
SDK's small toolbox around that tag (used by its automatic sharding): find an op's tag
through its colocation, list an op's dependencies, and copy tags from forward ops onto the
backward ops and colocated ops that lack one.  In the emulator every op of a program is
already tagged where it runs when the program is compiled (gradient ops with the shard scope
they are built in, or with their forward op's shard when built outside every scope or
colocated with it), so ``propagate_sharding`` usually finds little left to do.
"""
from ipu_emulator.runtime import shards

_XLA_SHARDING = shards.SHARDING_ATTR


def has_attr(o, attr_name):
    """True if the op ``o`` carries the attribute ``attr_name``."""
    return attr_name in o.node_def.attr


def dependencies(roots):
    """Every op the ``roots`` (ops) depend on through data or control edges, roots included."""
    pending, found = list(roots), set()
    while pending:
        op = pending.pop()
        if op in found:
            continue
        found.add(op)
        pending.extend(t.op for t in op.inputs)
        pending.extend(op.control_inputs)
    return found


def get_shard_from_colocation(op):
    """The ``_XlaSharding`` attribute value of an op this one is colocated with, or None."""
    graph = op.graph
    for group in op.colocation_groups():
        try:
            other = graph.get_operation_by_name(group.decode("utf-8")[len("loc:@"):])
        except KeyError:
            continue
        if has_attr(other, _XLA_SHARDING):
            return other.get_attr(_XLA_SHARDING)
    return None


def propagate_sharding(g):
    """Tag untagged ops of graph ``g`` with the shard of their colocated op or, for ops that
    a gradient function built, of the forward op they differentiate."""
    from tensorflow.core.framework import attr_value_pb2
    for op in g.get_operations():
        if has_attr(op, _XLA_SHARDING):
            continue
        value = get_shard_from_colocation(op)
        original = getattr(op, "_original_op", None)
        if value is None and original is not None and has_attr(original, _XLA_SHARDING):
            value = original.get_attr(_XLA_SHARDING)
        if value is not None:
            op._set_attr(_XLA_SHARDING, attr_value_pb2.AttrValue(s=value))  # pylint: disable=protected-access


__all__ = ["has_attr", "dependencies", "get_shard_from_colocation", "propagate_sharding"]
