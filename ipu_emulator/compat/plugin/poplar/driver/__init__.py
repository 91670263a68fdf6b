"""``tensorflow.compiler.plugin.poplar.driver``: only ``trace_pb2`` is provided."""
