# Every learner's Jupyter server in the image (installed as /etc/jupyter/jupyter_server_config.py,
# which jupyterhub-singleuser reads like any Jupyter server).
c = get_config()  # noqa: F821 (Jupyter provides it)

# Kernel culling, as `make lab` and `make hub` do (the Makefile's CULL_CLOSED_KERNELS): a kernel
# whose notebook was closed without shutting it down holds 0.3-0.5 GB of its own, most of a
# learner's memory limit (hub/z2jh/values.yaml), so after 30 idle minutes with no notebook open
# the server shuts it down.  Kernels with a notebook open are never culled (cull_connected stays
# False).  tests/scripts/test_hosting.py checks these equal the Makefile's.
c.MappingKernelManager.cull_idle_timeout = 1800
c.MappingKernelManager.cull_interval = 300
