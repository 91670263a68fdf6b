"""The JupyterLab tests in headless Chromium: a package, so that its JupyterLab, browser and
shared page (conftest.py) close after its last test rather than at the end of the worker's
session, where an idle JupyterLab page would keep Chromium busy."""
