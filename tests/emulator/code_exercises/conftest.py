"""The code exercises' tests check what a learner's attempt gets, so they run outside
solutions mode: `make test` sets IPU_LAB_SOLUTIONS=1 for the notebooks, and in that mode a
check would run the exercise's solution instead of the attempt (the tests that want the mode
set it themselves)."""
import pytest

from ipu_emulator.exercises import SOLUTIONS_VARIABLE


@pytest.fixture(autouse=True)
def outside_solutions_mode(monkeypatch):
    monkeypatch.delenv(SOLUTIONS_VARIABLE, raising=False)
