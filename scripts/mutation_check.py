"""How many deliberate bugs in the pure simulator the fast test suite catches.

    .venv/bin/python scripts/mutation_check.py            # every mutation
    .venv/bin/python scripts/mutation_check.py --list     # their names
    .venv/bin/python scripts/mutation_check.py bubble-one-replica zero-bubble-w-late

Each mutation is a named, plausible bug: one edit of one line in ``ipu_emulator/sim`` or
``ipu_emulator/views``.  For each, a copy of the project gets the edit and runs what
``make test-fast`` runs (the pure layers' tests and docstring examples, no TensorFlow); the
mutant is *killed* when that fails.  The unmutated copy must pass first.  A mutation whose
line is no longer in the code is reported as stale, so the list is kept up to date with the
code it mutates.

Named mutations rather than a generated set (mutmut and the like): a full run takes a few
minutes on two cores, and each survivor names a bug worth a test.
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parents[1]
FAST_SUITE = ["--doctest-modules", "ipu_emulator/sim", "ipu_emulator/views",
              "ipu_emulator/record.py", "widgets", "tests/sim", "tests/views", "tests/widgets",
              "tests/cli/test_simulate.py"]


class Mutation(NamedTuple):
    name: str
    path: str
    original: str
    mutated: str


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
]


def run_fast_suite(copy: pathlib.Path) -> bool:
    """True when the fast suite passes in ``copy``; it stops at the first failure."""
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *FAST_SUITE],
        cwd=copy, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(copy), "MPLBACKEND": "Agg",
                       "HOME": str(copy)},
        capture_output=True, text=True, timeout=600)
    return result.returncode == 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="mutations to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutations and stop")
    parser.add_argument("--tests-from", metavar="REV", default=None,
                        help="run the tests as they were at this git revision (a before/after "
                             "score for a change to the tests)")
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
        copy.mkdir()
        for part in ("ipu_emulator", "widgets", "tests", "pyproject.toml"):
            source = ROOT / part
            if source.is_dir():
                shutil.copytree(source, copy / part,
                                ignore=shutil.ignore_patterns("__pycache__", "*.npz"))
            else:
                shutil.copy2(source, copy / part)
        if options.tests_from:
            shutil.rmtree(copy / "tests")
            archive = subprocess.run(["git", "archive", options.tests_from, "tests"], cwd=ROOT,
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(copy)], input=archive, check=True)
        if not run_fast_suite(copy):
            print("The fast suite fails without any mutation: fix that first.")
            return 2
        killed, survived, stale = [], [], []
        for m in chosen:
            target = copy / m.path
            text = target.read_text()
            if text.count(m.original) != 1:
                stale.append(m.name)
                print(f"stale     {m.name}: its line is not (once) in {m.path}")
                continue
            target.write_text(text.replace(m.original, m.mutated))
            started = time.perf_counter()
            caught = not run_fast_suite(copy)
            target.write_text(text)
            (killed if caught else survived).append(m.name)
            print(f"{'killed' if caught else 'SURVIVED':9s} {m.name} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    tried = len(killed) + len(survived)
    print(f"\n{len(killed)} of {tried} mutants killed"
          + (f"; {len(stale)} stale" if stale else "")
          + (f"; survivors: {', '.join(survived)}" if survived else ""))
    return 0 if not survived and not stale else 1


if __name__ == "__main__":
    sys.exit(main())
