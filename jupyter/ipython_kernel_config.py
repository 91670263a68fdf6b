# The lab's IPython kernels, for every way of serving it: `make env` copies this file to
# .venv/etc/ipython/ (where IPython reads a Python environment's own settings), the hub image to
# /etc/ipython/ (hub/image/Dockerfile) and Binder's postBuild to its environment's etc/ipython/.
import atexit
import gc

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
# shutdown, the hub culling it) in Python's last garbage collections over TensorFlow's millions
# of objects; the operating system frees that memory anyway.  Frozen at exit, the collector
# skips them: 0.13 s (bench/exit_cost.py).  Registered here, before IPython and ipykernel
# register theirs, it runs after them, so history, widgets and files are closed as before.
atexit.register(gc.freeze)
