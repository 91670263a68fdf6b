# The lab's Jupyter server settings, one file for every way of serving it: `make lab` and each
# learner's server under `make hub` find it through JUPYTER_CONFIG_PATH; the hub image installs
# it as /etc/jupyter/jupyter_server_config.py (hub/image/Dockerfile); docs/hosting.md copies it
# for The Littlest JupyterHub.
import os
import shutil
import sys

c = get_config()  # noqa: F821 (Jupyter provides it)

# Kernel culling: a kernel whose notebook was closed without shutting it down holds 0.3-0.5 GB
# of its own, most of a learner's memory limit on a hub (hub/z2jh/values.yaml), so after 30
# idle minutes with no notebook open the server shuts it down.  Kernels with a notebook open
# are never culled (cull_connected stays False).
c.MappingKernelManager.cull_idle_timeout = 1800
c.MappingKernelManager.cull_interval = 300

# `%tensorboard` shows TensorBoard in a frame.  By default the frame points at
# localhost:<port>, the learner's own machine, which holds no TensorBoard when the lab runs
# on a hub, on Binder or behind an SSH tunnel.  Through jupyter-server-proxy (one of the lab's
# packages) the frame asks this server for /proxy/<port>/ instead, wherever the browser is.
# JUPYTERHUB_SERVICE_PREFIX is the server's path on a hub ("/user/<name>/"); kernels inherit
# the variable from the server.
os.environ.setdefault(
    "TENSORBOARD_PROXY_URL",
    os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/") + "proxy/%PORT%/")

# `%tensorboard` starts the lab's TensorBoard, which reads the same event files without
# loading TensorFlow: about 0.8 s of CPU and 0.08 GB instead of 4 s and 0.6 GB
# (ipu_emulator/cli/tensorboard_launcher.py).  The command is the lab package's, found on the
# server's PATH (`make lab` and `make hub` put the environment's bin/ first; the hub image
# installs it in /usr/local/bin) or beside the server's Python; without it TensorBoard's magic
# runs the `tensorboard` command.  A TENSORBOARD_BINARY set before the server starts wins.
_lab_tensorboard = shutil.which("ipu-lab-tensorboard", path=os.pathsep.join(
    [os.environ.get("PATH", ""), os.path.dirname(sys.executable)]))
if _lab_tensorboard:
    os.environ.setdefault("TENSORBOARD_BINARY", _lab_tensorboard)

# TensorFlow's C++ log lines (CUDA probing on a machine with no GPU, XLA's progress): kernels
# inherit level 3, errors included, and the server's log stays readable.  The lines written
# while TensorFlow loads ignore the level; the kernels' own setting keeps them out of learners'
# notebooks (jupyter/ipython_kernel_config.py).  Python's own errors are unaffected.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# jupyter-lsp (a JupyterLab dependency) looks for language servers at every server start,
# running `node` to ask npm where packages live; the lab installs none, so it never finds one.
# Each start of a learner's server skips that search: 0.72 s of CPU against 0.86 s (three
# starts each, this machine, 2026-11-30), which forty learners starting at once share.
c.LanguageServerManager.autodetect = False
