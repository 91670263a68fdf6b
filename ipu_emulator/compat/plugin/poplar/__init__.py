"""``tensorflow.compiler.plugin.poplar``: its ``ops`` package (the ``gen_*_ops`` modules) and
``driver.trace_pb2`` (the ``IpuTraceEvent`` message of the event trace)."""
