"""Stands in for ``tensorflow.compiler.plugin`` (the Poplar XLA backend of the SDK), so
documentation examples that import ``tensorflow.compiler.plugin.poplar.ops.gen_*_ops``
run.  Only ``poplar.ops`` is provided."""
