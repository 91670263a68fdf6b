"""Stands in for ``tensorflow.contrib`` (gone from TensorFlow 2), holding only ``ipu``."""
