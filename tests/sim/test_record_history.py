"""The record's history of engine runs: ``last_runs(n)`` is the last n runs, oldest first,
and ``capture()`` collects the runs made inside its block (``ipu_emulator/record.py``).

Runs are added by hand (``add_engine_run``, as the API front does on every ``sess.run``), to
a fresh history per test.
"""
import collections

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ipu_emulator import record
from ipu_emulator.record import ComputeCost, EngineRun


def run_named(name):
    return EngineRun(name, iterations=1, step_cost=ComputeCost(forward_flops=1e6))


@pytest.fixture
def history(monkeypatch):
    """A fresh, empty history (the default limit) for the test; returns a function that adds
    runs named by their order: ``add(3)`` adds runs "0", "1", "2"."""
    monkeypatch.setattr(record, "history", collections.deque(maxlen=record.HISTORY_LIMIT))
    monkeypatch.setattr(record, "_open_captures", [])
    added = []

    def add(count):
        for _ in range(count):
            run = run_named(str(len(added)))
            added.append(run)
            record.add_engine_run(run)
        return added
    return add


def names(program_record):
    return [run.program for run in program_record.runs]


def test_the_last_runs_are_the_newest_oldest_first(history):
    history(5)
    assert names(record.last_runs()) == ["4"]
    assert names(record.last_runs(1)) == ["4"]
    assert names(record.last_runs(2)) == ["3", "4"]
    assert names(record.last_runs(4)) == ["1", "2", "3", "4"]
    assert names(record.last_runs(5)) == ["0", "1", "2", "3", "4"]


def test_asking_for_more_runs_than_were_made_gives_them_all_and_none_gives_none(history):
    assert names(record.last_runs(3)) == []
    history(2)
    assert names(record.last_runs(3)) == ["0", "1"]
    assert names(record.last_runs(0)) == []


@given(made=st.integers(0, 30), count=st.integers(0, 40))
def test_last_runs_is_the_tail_of_the_history_of_the_length_asked(made, count):
    fresh = collections.deque(maxlen=record.HISTORY_LIMIT)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record, "history", fresh)
        runs = [run_named(str(i)) for i in range(made)]
        for run in runs:
            record.add_engine_run(run)
        got = record.last_runs(count).runs
    assert len(got) == min(count, made)
    # The tail: every run after the first made - len(got), in the order they ran.
    assert [int(run.program) for run in got] == list(range(made - len(got), made))


def test_the_history_keeps_the_newest_runs_up_to_its_limit(monkeypatch):
    monkeypatch.setattr(record, "history", collections.deque(maxlen=3))
    for i in range(5):
        record.add_engine_run(run_named(str(i)))
    assert names(record.last_runs(3)) == ["2", "3", "4"]
    assert names(record.last_runs(10)) == ["2", "3", "4"]


def test_a_capture_collects_the_runs_of_its_block_only(history):
    history(2)
    with record.capture() as outer:
        history(1)
        with record.capture() as inner:
            history(2)
        history(1)
    history(1)
    assert names(outer) == ["2", "3", "4", "5"]
    assert names(inner) == ["3", "4"]
    assert outer.engine_runs == 4 and outer.iterations == 4
    assert names(record.last_runs(2)) == ["5", "6"]
