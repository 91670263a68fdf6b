"""``ipu.functional_ops``: ``outlined_function`` asks Poplar to compile a function's body
once and call it from every use (saving code memory).  The values are the function's own,
so the emulator calls it directly.  Also exported as ``ipu.outlined_function``."""
import functools


def outlined_function(func=None, unique_sharding=False, keep_input_layouts=None, name=None):
    """Decorator: ``@outlined_function`` or ``@outlined_function(name=...)``."""
    del unique_sharding, keep_input_layouts, name  # layout and placement hints only

    def decorated(inner_func):
        @functools.wraps(inner_func)
        def wrapper(*args, **kwargs):
            return inner_func(*args, **kwargs)
        return wrapper

    return decorated(func) if func is not None else decorated


# SDK 1.x-2.x name of the same decorator.
function = outlined_function

__all__ = ["outlined_function", "function"]
