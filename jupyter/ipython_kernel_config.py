# The lab's IPython kernels, for every way of serving it: `make env` copies this file to
# .venv/etc/ipython/ (where IPython reads a Python environment's own settings), the hub image to
# /etc/ipython/ (hub/image/Dockerfile) and Binder's postBuild to its environment's etc/ipython/.
c = get_config()  # noqa: F821 (IPython provides it)

# TensorFlow writes lines from C++ while it loads, before its logging is set up ("WARNING: All
# log messages before absl::InitializeLog() is called...", "I0000 ... oneDNN custom operations
# are on", "Could not find cuda drivers on your machine"), and TF_CPP_MIN_LOG_LEVEL cannot
# silence them (TensorFlow issue 100442).  ipykernel forwards what the process writes to its
# file descriptors into the running cell's output, so a learner's first TensorFlow cell would
# show them in red.  Off, those lines go to the server's log; what Python writes (print,
# warnings, tracebacks) shows in the notebook as before.
c.IPKernelApp.capture_fd_output = False

# A kernel that has loaded TensorFlow spent 1.3-1.7 s of CPU on its way out (a restart, a
# shutdown, the hub culling it) in garbage collections over TensorFlow's millions of objects:
# IPython's own exit handler empties the output cache and calls gc.collect(), then Python's
# finalization collects again.  The operating system frees that memory anyway.  Frozen first,
# the collector skips those objects in both.  The line runs at start-up, after IPython has
# registered its handler, so the freeze runs before it (atexit runs the last registered first);
# names, history and files are cleared and closed as before, and objects in reference cycles are
# left to the operating system (tests/scripts/test_lab_settings.py, bench/exit_cost.py).
c.InteractiveShellApp.exec_lines = [
    "import atexit as _exit, gc as _gc; _exit.register(_gc.freeze); del _exit, _gc"]
