"""Start a learner's single-user server on the lab's own .venv Python (hub/jupyterhub_config.py).

The server needs the `jupyterhub` package (its hub login and activity reports) and the lab's
JupyterLab, TensorFlow and emulator.  `make hub` keeps the lab's .venv untouched: JupyterHub
and the few packages it needs that .venv lacks live in build/hub-singleuser-venv, whose
site-packages this launcher appends *after* .venv's own (so every package .venv has wins).
The kernels the server starts run .venv's Python without them.

    .venv/bin/python hub/singleuser.py OVERLAY_SITE_PACKAGES [jupyterhub-singleuser args...]
"""

import site
import sys

if __name__ == "__main__":
    site.addsitedir(sys.argv.pop(1))
    from jupyterhub.singleuser import main

    sys.exit(main())
