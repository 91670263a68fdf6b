"""Helpers shared by the test folders (imported as ``tests.support.<module>``; the rootdir is
on ``sys.path`` through ``pythonpath`` in pyproject.toml's pytest settings)."""
