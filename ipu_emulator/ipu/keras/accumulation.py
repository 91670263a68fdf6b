"""The gradient accumulation arguments IPU Keras models take, checked as the SDK does
(``set_gradient_accumulation_options`` and ``set_pipelining_options`` share them)."""


def check_accumulation_arguments(steps, normalize, reduction_method):
    """The checks shared by ``set_gradient_accumulation_options`` and
    ``set_pipelining_options``; returns the reduction method's name."""
    if steps is not None and (not isinstance(steps, int) or isinstance(steps, bool)
                              or steps < 1):
        raise ValueError(
            "Expected `gradient_accumulation_steps_per_replica` to be a positive integer, "
            "but got {} instead.".format(steps))
    method = str(getattr(reduction_method, "name", reduction_method)).lower()
    if method not in ("sum", "mean", "running_mean"):
        raise ValueError("Unknown gradient_accumulation_reduction_method: {}".format(
            reduction_method))
    if normalize and method != "sum":
        raise ValueError("`experimental_normalize_gradients` can only be used with the "
                         "'sum' gradient accumulation reduction method.")
    return method


__all__ = ["check_accumulation_arguments"]
