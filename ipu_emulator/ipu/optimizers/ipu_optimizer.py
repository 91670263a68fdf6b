"""``IpuOptimizer``: the base of the IPU optimizer wrappers.

A wrapper holds another TF1 optimizer and changes one thing about it (how gradients are
combined before the update); everything else (``compute_gradients``, slots, variables) is
the wrapped optimizer's.
"""
import tensorflow as tf


class IpuOptimizer(tf.compat.v1.train.Optimizer):
    """Delegates to ``opt``; subclasses override ``apply_gradients``."""

    def __init__(self, opt, name=None):
        super().__init__(use_locking=False, name=name or type(self).__name__)
        self._opt = opt

    def compute_gradients(self, loss, var_list=None, **kwargs):  # pylint: disable=arguments-differ
        return self._opt.compute_gradients(loss, var_list=var_list, **kwargs)

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        return self._opt.apply_gradients(grads_and_vars, global_step, name)

    def get_slot(self, *args, **kwargs):
        return self._opt.get_slot(*args, **kwargs)

    def get_slot_names(self, *args, **kwargs):
        return self._opt.get_slot_names(*args, **kwargs)

    def variables(self):
        return self._opt.variables()
