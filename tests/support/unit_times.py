"""Where `make test`'s time goes, by unit of work (the root conftest.py's units).

The controlling pytest process (the only one, without pytest-xdist) adds up the time of each
test's set-up, call and tear-down under the unit it belongs to, and at the end writes one line
per unit to build/test_units.tsv (seconds, unit, tests), slowest first.
``scripts/stage_times.py report`` prints the ten slowest after the stages, so each run of
`make test` says which units to look at first when the suite grows.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Callable

import pytest

LOG = Path(__file__).resolve().parents[2] / "build" / "test_units.tsv"


class UnitTimes:
    def __init__(self, unit_of: Callable[[str], str], log: Path = LOG):
        self._unit_of = unit_of
        self._log = log
        self._seconds = defaultdict(float)
        self._tests = defaultdict(set)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        unit = self._unit_of(report.nodeid)
        self._seconds[unit] += report.duration
        self._tests[unit].add(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if hasattr(session.config, "workerinput") or not self._seconds:
            return   # a pytest-xdist worker: the controller hears every report
        self._log.parent.mkdir(exist_ok=True)
        slowest = sorted(self._seconds.items(), key=lambda item: -item[1])
        self._log.write_text("".join(f"{seconds:.1f}\t{unit}\t{len(self._tests[unit])}\n"
                                     for unit, seconds in slowest), encoding="utf-8")
