"""``tensorflow.compiler.plugin.poplar``: only its ``ops`` package is provided."""
