"""The command line: ``python -m ipu_emulator run|simulate|install-hook``.

``runner``          ``run [--tf1] script.py``: an unmodified Graphcore script on the emulator
``import_aliases``  makes ``tensorflow.python.ipu`` (and the SDK's other import paths) resolve here
``startup_hook``    the opt-in ``.pth`` hook that gives every ``python3`` of an environment those paths
``shell_wrappers``  ``run wrapper.sh``: ``python3`` inside a shell script runs through the runner
``profiling``       ``POPLAR_ENGINE_OPTIONS`` reports: the simulated trace of a script's engine runs
``simulate``        ``simulate``: a pipeline schedule on a model, without TensorFlow

The top layer: it may import every other layer.
"""
