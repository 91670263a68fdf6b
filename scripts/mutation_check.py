"""How many deliberate bugs in the pure layers the fast test suite catches.

    .venv/bin/python scripts/mutation_check.py            # every mutation
    .venv/bin/python scripts/mutation_check.py --list     # their names
    .venv/bin/python scripts/mutation_check.py bubble-one-replica zero-bubble-w-late
    .venv/bin/python scripts/mutation_check.py --killers joined-runs-not-shifted

Each mutation is a named, plausible bug: one edit of one line (or a few) in the pure layers
(``ipu_emulator/sim``, ``ipu_emulator/views``, the record, the exercises).  For each, a copy
of the project gets the edit and runs what ``make test-fast`` runs: the import contracts
(``lint-imports``) and ``pytest --doctest-modules`` over the paths of ``tests/fast_suite.txt``
(the list the Makefile reads too).  A bug outside the pure layers (the TensorFlow-side
runtime), which the fast suite never imports, names the tests that must catch it instead.
The mutant is *killed* when that fails, or when it runs past the time limit (a bug that makes
a search loop forever), or past the memory limit.  The unmutated copy must pass first.  A
mutation whose line is no longer in the code is reported as stale, so the list is kept up to
date with the code it mutates.  ``--killers`` runs the whole suite against each mutant,
without stopping at the first failure, and names every test that fails: a mutant killed by
one test only is a bug one test away from surviving.

Named mutations rather than a generated set (mutmut and the like): a full run takes a few
minutes on two cores, and each survivor names a bug worth a test.
"""
from __future__ import annotations

import argparse
import os
import pathlib
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import List, NamedTuple, Optional, Tuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
FAST_SUITE_LIST = "tests/fast_suite.txt"
# pytest's options for the fast suite, as `make test-fast` gives them (the Makefile's
# FAST_OPTIONS, but in one process): the grids' sample, not every case.
PYTEST_OPTIONS = ["-p", "no:cacheprovider", "-p", "no:nbval", "--doctest-modules", "-m", "not grid"]
# A mutant's suite is stopped after this many times the unmutated suite's wall time (at
# least MIN_TIME_LIMIT seconds) and counts as killed: a bug that makes a search run forever.
TIME_LIMIT_FACTOR = 4
MIN_TIME_LIMIT = 60.0
# Address space of the suite's process: a bug that makes a search allocate without end fails
# with MemoryError instead of taking the machine's memory (one such run reached 9 GB).
MEMORY_LIMIT_BYTES = 6 * 2**30


def fast_suite(root: pathlib.Path = ROOT) -> List[str]:
    """The paths of ``tests/fast_suite.txt``: what `make test-fast` runs."""
    lines = (line.split("#", 1)[0].strip()
             for line in (root / FAST_SUITE_LIST).read_text().splitlines())
    return [line for line in lines if line]


class Mutation(NamedTuple):
    name: str
    path: str
    original: str
    mutated: str
    # The test paths run against it instead of the fast suite (a bug in the runtime, which
    # needs TensorFlow); empty: the fast suite.
    tests: Tuple[str, ...] = ()


MUTATIONS = [
    # The three bugs of issue 11's review.
    Mutation("bubble-one-replica", "ipu_emulator/sim/timeline.py",
             "capacity = makespan * len(compute)",
             "capacity = makespan * max(1, len(compute) // 2)"),
    Mutation("bubble-from-ipu0", "ipu_emulator/sim/timeline.py",
             "bubble = (capacity - sum(compute.values())) / capacity",
             "bubble = 1 - compute[min(compute)] / makespan"),
    Mutation("interleaved-1f1b-extra-warmup", "ipu_emulator/sim/schedules.py",
             "warmup = min(total, 2 * (ipus - p - 1) + (chunks - 1) * len(rounds[0]))",
             "warmup = min(total, 2 * (ipus - p - 1) + (chunks - 1) * len(rounds[0]) + 1)"),
    # Schedules.
    Mutation("grouped-backward-a-step-late", "ipu_emulator/sim/schedules.py",
             "backwards[m + 2 * n - 2 - k].append(B(k, m))",
             "backwards[m + 2 * n - 1 - k].append(B(k, m))"),
    Mutation("1f1b-one-more-warmup", "ipu_emulator/sim/schedules.py",
             "warmup = min(num_stages - stage - 1, micro_batches)",
             "warmup = min(num_stages - stage, micro_batches)"),
    Mutation("zero-bubble-w-late", "ipu_emulator/sim/schedules.py",
             "        if m >= stage:\n            order.append(W(stage, m - stage))",
             "        if m > stage:\n            order.append(W(stage, m - stage - 1))"),
    Mutation("accumulation-count-overlap-allowed", "ipu_emulator/sim/schedule_rules.py",
             "if gac < overlap:", "if gac < overlap - 1:"),
    # Costs and hardware.
    Mutation("dense-forgets-bias", "ipu_emulator/sim/model_layers.py",
             "return self._core_flops(input_shape) + self._elementwise_passes()[0] * outputs",
             "return self._core_flops(input_shape)"),
    Mutation("shared-tensor-kept-twice", "ipu_emulator/sim/cost_model.py",
             "saved.update(cost.saved)  # a tensor kept by two layers is stored once",
             "saved.update({f'{cost.name}:{k}': v for k, v in cost.saved})"),
    Mutation("ipu2-fp32-peak", "ipu_emulator/sim/hardware.py",
             "peak_fp32_flops=62.5 * TERA,  # cambrian-ai.com",
             "peak_fp32_flops=65.5 * TERA,  # cambrian-ai.com"),
    # Timelines and metrics.
    Mutation("host-time-counted-on-ipus", "ipu_emulator/sim/timeline.py",
             "        if e.ipu is None:\n            host_time += e.end - e.start",
             "        if e.ipu is None or e.kind == 'stream_copy':\n"
             "            host_time += e.end - e.start"),
    Mutation("recompute-not-compute", "ipu_emulator/sim/timeline.py",
             'COMPUTE_KINDS = frozenset({"forward", "backward", "weight_update", "recompute"})',
             'COMPUTE_KINDS = frozenset({"forward", "backward", "weight_update"})'),
    Mutation("joined-runs-not-shifted", "ipu_emulator/sim/recorded_runs.py",
             "events = [replace(e, start=e.start + offset, end=e.end + offset,",
             "events = [replace(e, start=e.start, end=e.end,"),
    # Views.
    Mutation("summary-utilisation-per-mille", "ipu_emulator/views/summary.py",
             'f"{100 * m.utilisation[ipu]:.2f} %"', 'f"{1000 * m.utilisation[ipu]:.2f} %"'),
    Mutation("milliseconds-threshold", "ipu_emulator/views/style.py",
             "if seconds >= 1e-3:", "if seconds >= 1e-4:"),
    # Issue 21: the three bugs that survived the fast suite ...
    Mutation("sharded-accumulation-extra-pass", "ipu_emulator/sim/recorded_runs.py",
             "repeat_count=run.iterations // accumulated,",
             "repeat_count=(run.iterations + accumulated) // accumulated,"),
    Mutation("engine-accumulation-extra-update", "ipu_emulator/sim/timeline.py",
             "weight_update=(k + 1) % max(1, run.gradient_accumulation_count) == 0)",
             "weight_update=k % max(1, run.gradient_accumulation_count) == 0\n"
             "                      or k == run.iterations - 1)"),
    Mutation("last-runs-before-the-last", "ipu_emulator/record.py",
             "runs = list(history)[-count:] if count > 0 else []",
             "runs = list(history)[:-count] if count > 0 else []"),
    # ... the three that only one test caught ...
    Mutation("interleaved-1f1b-first-ipu-warmup", "ipu_emulator/sim/schedules.py",
             "warmup = min(total, 2 * (ipus - p - 1) + (chunks - 1) * len(rounds[0]))",
             "warmup = min(total, 2 * (ipus - p - 1) + (chunks - 1) * len(rounds[0])"
             " + (p == 0))"),
    Mutation("compute-rounded-to-cycles", "ipu_emulator/sim/timeline.py",
             "    return op_cycles / target.clock_hz + max(\n"
             "        (flops - half_flops) / target.achievable_fp32_flops\n"
             "        + half_flops / target.achievable_fp16_flops,\n"
             "        bytes_accessed / target.sram_bandwidth_bytes_per_s,\n"
             "    )",
             "    return round(op_cycles + target.clock_hz * max(\n"
             "        (flops - half_flops) / target.achievable_fp32_flops\n"
             "        + half_flops / target.achievable_fp16_flops,\n"
             "        bytes_accessed / target.sram_bandwidth_bytes_per_s,\n"
             "    )) / target.clock_hz"),
    Mutation("float16-products-at-the-float32-rate", "ipu_emulator/sim/timeline.py",
             "        + half_flops / target.achievable_fp16_flops,",
             "        + half_flops / target.achievable_fp32_flops,"),
    Mutation("joined-runs-metrics-of-the-last-run", "ipu_emulator/sim/recorded_runs.py",
             "iterations=sum(t.metrics.iterations for t in timelines),",
             "iterations=timelines[-1].metrics.iterations,"),
    # ... and four that made the exercises' searches (smallest_whole_number) run forever
    # before they were bounded: a budget the broken simulator never meets.
    Mutation("bubble-averaged-twice", "ipu_emulator/sim/timeline.py",
             "bubble = (capacity - sum(compute.values())) / capacity",
             "bubble = (capacity - sum(compute.values()) / len(compute)) / capacity"),
    Mutation("1f1b-no-warmup", "ipu_emulator/sim/schedules.py",
             "warmup = min(num_stages - stage - 1, micro_batches)",
             "warmup = min(num_stages - num_stages, micro_batches)"),
    Mutation("feeds-a-launch-per-step", "ipu_emulator/sim/feeds.py",
             "total, launching = total + count * run_total, launching + count * run_launching",
             "total, launching = total + count * run_total, launching + steps * run_launching"),
    Mutation("engine-run-launched-per-iteration", "ipu_emulator/sim/timeline.py",
             "        ready = ipus_start\n",
             "        ready = ipus_start = launch_engine_run(builder, host, engine_run,\n"
             "                                               builder.horizon())\n"),
    # Issue 38: two that survived every test.  A program without an on-device loop copies
    # its infeed's element in once, with its inputs (128 B became 0) ...
    Mutation("infeed-bytes-without-a-loop-dropped", "ipu_emulator/runtime/session_run.py",
             "input_bytes=input_bytes + (0 if in_loop else infeed_bytes),",
             "input_bytes=input_bytes + (0 if in_loop else 0),",
             tests=("tests/emulator/programs/test_session_run.py",)),
    # ... and text up to a point smaller than the tick labels is still too small to read.
    Mutation("legibility-size-tolerance-one-point", "ipu_emulator/views/legibility.py",
             "SIZE_TOLERANCE = 0.05   # points (matplotlib) or pixels (SVG)",
             "SIZE_TOLERANCE = 1.0   # points (matplotlib) or pixels (SVG)"),
]


class SuiteResult(NamedTuple):
    passed: bool
    seconds: float
    outcome: str              # "passed", "failed", "timed out"
    failures: Tuple[str, ...]  # the failing tests' ids (all of them with stop_first=False)


def _limit_memory():  # in the suite's process, before it starts
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def _run(command, copy: pathlib.Path, deadline: Optional[float]):
    """``(returncode or None when stopped at the deadline, stdout)``; the whole process
    group is stopped, so nothing a hung suite started outlives it."""
    env = {"PATH": f"{pathlib.Path(sys.executable).parent}:/usr/bin:/bin",
           "PYTHONPATH": str(copy), "MPLBACKEND": "Agg", "HOME": str(copy)}
    process = subprocess.Popen(command, cwd=copy, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True,
                               preexec_fn=_limit_memory)
    try:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        output, _ = process.communicate(timeout=timeout)
        return process.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        return None, output


def run_fast_suite(copy: pathlib.Path, time_limit: Optional[float] = None,
                   stop_first: bool = True, paths: Tuple[str, ...] = ()) -> SuiteResult:
    """What `make test-fast` runs, in ``copy``: the import contracts, then the fast suite's
    tests and docstring examples, or ``paths``' if given (stopping at the first failure
    with ``stop_first``).  Paths the copy lacks are left out: the tests of an older revision
    (``--tests-from``) may not have every folder of today's list."""
    started = time.monotonic()
    deadline = None if time_limit is None else started + time_limit
    lint = pathlib.Path(sys.executable).parent / "lint-imports"
    steps = ([[str(lint), "--no-cache"]] if lint.exists() else []) + [
        [sys.executable, "-m", "pytest", *(["-x"] if stop_first else []), "-q",
         *PYTEST_OPTIONS,
         *(path for path in (paths or fast_suite(copy)) if (copy / path).exists())]]
    for command in steps:
        code, output = _run(command, copy, deadline)
        seconds = time.monotonic() - started
        failures = tuple(re.findall(r"^(?:FAILED|ERROR) (\S+)", output, re.MULTILINE))
        if code is None:
            return SuiteResult(False, seconds, "timed out", failures)
        if code != 0:
            if not failures:
                failures = (f"{pathlib.Path(command[0]).name} exit {code}: "
                            + " | ".join(output.strip().splitlines()[-3:]),)
            return SuiteResult(False, seconds, "failed", failures)
    return SuiteResult(True, time.monotonic() - started, "passed", ())


def copy_project(destination: pathlib.Path, tests_from: Optional[str] = None) -> None:
    """The package, the tests, the pytest settings (pyproject.toml, the root conftest.py) and
    every top-level folder the fast suite names (the widgets)."""
    destination.mkdir()
    parts = dict.fromkeys(["ipu_emulator", "tests", "pyproject.toml", "conftest.py"]
                          + [path.split("/")[0] for path in fast_suite()])
    for part in parts:
        source = ROOT / part
        if not source.exists():
            continue
        if source.is_dir():
            shutil.copytree(source, destination / part,
                            ignore=shutil.ignore_patterns("__pycache__", "*.npz"))
        else:
            shutil.copy2(source, destination / part)
    if tests_from:
        shutil.rmtree(destination / "tests")
        archive = subprocess.run(["git", "archive", tests_from, "tests"], cwd=ROOT,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(destination)], input=archive, check=True)
        if not (destination / FAST_SUITE_LIST).exists():
            shutil.copy2(ROOT / FAST_SUITE_LIST, destination / FAST_SUITE_LIST)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutations and stop")
    parser.add_argument("--tests-from", metavar="REV", default=None,
                        help="run the tests as they were at this git revision (a before/after "
                             "score for a change to the tests)")
    parser.add_argument("--killers", action="store_true",
                        help="run the whole suite against each mutant and name every test "
                             "that fails (slower: no stop at the first failure)")
    parser.add_argument("--time-limit", type=float, default=None, metavar="SECONDS",
                        help=f"stop a mutant's suite after this long and count it killed "
                             f"(default: {TIME_LIMIT_FACTOR} x the unmutated suite's time, at "
                             f"least {MIN_TIME_LIMIT:.0f} s)")
    options = parser.parse_args(argv)
    chosen = [m for m in MUTATIONS if not options.names or m.name in options.names]
    unknown = set(options.names) - {m.name for m in MUTATIONS}
    if unknown:
        parser.error(f"unknown mutation(s): {', '.join(sorted(unknown))}")
    if options.list:
        for m in MUTATIONS:
            print(f"{m.name:36s} {m.path}")
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        copy = pathlib.Path(tmp) / "project"
        copy_project(copy, options.tests_from)
        missing = [path for path in fast_suite(copy) if not (copy / path).exists()]
        if missing:
            print(f"not in the tests run, so left out: {', '.join(missing)}")
        time_limits = {}  # the tests run (() for the fast suite) -> a mutant's time limit
        for tests in dict.fromkeys(m.tests for m in chosen):
            baseline = run_fast_suite(copy, stop_first=not options.killers, paths=tests)
            suite = " ".join(tests) or "the fast suite"
            if not baseline.passed:
                print(f"{suite} fails without any mutation: fix that first.")
                print("\n".join(baseline.failures))
                return 2
            time_limits[tests] = options.time_limit or max(
                MIN_TIME_LIMIT, TIME_LIMIT_FACTOR * baseline.seconds)
            print(f"unmutated, {suite}: passed in {baseline.seconds:.0f} s; each mutant gets "
                  f"{time_limits[tests]:.0f} s", flush=True)
        killed, survived, stale, timed_out = [], [], [], []
        for m in chosen:
            target = copy / m.path
            text = target.read_text()
            if text.count(m.original) != 1:
                stale.append(m.name)
                print(f"stale     {m.name}: its line is not (once) in {m.path}")
                continue
            target.write_text(text.replace(m.original, m.mutated))
            try:
                result = run_fast_suite(copy, time_limits[m.tests],
                                        stop_first=not options.killers, paths=m.tests)
            finally:
                target.write_text(text)
            (survived if result.passed else killed).append(m.name)
            if result.outcome == "timed out":
                timed_out.append(m.name)
            label = {"passed": "SURVIVED", "failed": "killed",
                     "timed out": "killed"}[result.outcome]
            how = " by the time limit" if result.outcome == "timed out" else ""
            print(f"{label:9s} {m.name}{how} ({result.seconds:.0f} s)", flush=True)
            if options.killers:
                print(f"          {len(result.failures)} failing: "
                      + (", ".join(result.failures) or "-"), flush=True)
    tried = len(killed) + len(survived)
    print(f"\n{len(killed)} of {tried} mutants killed"
          + (f" ({len(timed_out)} by the time limit)" if timed_out else "")
          + (f"; {len(stale)} stale" if stale else "")
          + (f"; survivors: {', '.join(survived)}" if survived else ""))
    return 0 if not survived and not stale else 1


if __name__ == "__main__":
    sys.exit(main())
