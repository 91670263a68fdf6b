"""IPU Keras: Keras models built inside an ``IPUStrategy`` scope gain the IPU extensions.

``extensions``    the methods added to those models (``set_gradient_accumulation_options``,
                  ``set_infeed_queue_options``, ...) and the rules ``compile``/``fit`` follow
``data_adapter`` the checks the IPU makes on the data given to ``fit``/``evaluate``/``predict``
"""
from . import data_adapter
from . import extensions

__all__ = ["data_adapter", "extensions"]
