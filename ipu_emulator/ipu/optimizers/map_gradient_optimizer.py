"""``MapGradientOptimizer``: applies ``gradient_mapping_function(grad, var)`` to every
gradient before the wrapped optimizer uses it (e.g. weight decay added to the gradient)."""
from .ipu_optimizer import IpuOptimizer


class MapGradientOptimizer(IpuOptimizer):
    """Wraps ``wrapped_optimizer``; maps each non-None gradient first."""

    def __init__(self, wrapped_optimizer, gradient_mapping_function,
                 name="MapGradientOptimizer"):
        super().__init__(wrapped_optimizer, name=name)
        self._gradient_mapping_function = gradient_mapping_function

    def compute_gradients(self, loss, var_list=None, **kwargs):  # pylint: disable=arguments-differ
        grads_and_vars = self._opt.compute_gradients(loss, var_list=var_list, **kwargs)
        return [(None if grad is None else self._gradient_mapping_function(grad, var), var)
                for grad, var in grads_and_vars]
