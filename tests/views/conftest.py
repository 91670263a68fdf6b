"""Every figure a views test draws is closed after it, as the notebooks' inline backend does,
so figures never pile up across tests (matplotlib warns past 20 open figures)."""
import sys

import pytest


@pytest.fixture(autouse=True)
def close_figures():
    yield
    if "matplotlib.pyplot" in sys.modules:   # never import matplotlib for an SVG-only test
        sys.modules["matplotlib.pyplot"].close("all")
