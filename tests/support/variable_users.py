"""The ops that use a resource variable, seen through TensorFlow's loop and branch plumbing.

A variable read or updated inside an on-device loop reaches its users through ``Enter``,
``Switch`` and ``Identity`` ops that only pass the handle on; tests that ask where a
variable is used (which shard, which pipeline stage) want the ops at the end of that chain.
"""
import tensorflow as tf

_PLUMBING = ("Enter", "Switch", "Identity")


def in_loop(op) -> bool:
    """Whether ``op`` is built inside a loop or a branch (its initialiser is not)."""
    return op._get_control_flow_context() is not None  # pylint: disable=protected-access


def handle_users(handle, loop_only=False):
    """The ops using the variable whose handle is ``handle`` (a tensor), past the plumbing;
    with ``loop_only``, only those inside a loop or branch."""
    found, frontier = [], [handle]
    while frontier:
        tensor = frontier.pop()
        for op in tensor.consumers():
            if op.type in _PLUMBING:
                frontier += [t for t in op.outputs if t.dtype == tf.resource]
            elif not loop_only or in_loop(op):
                found.append(op)
    return found


__all__ = ["handle_users", "in_loop"]
