"""How the simulated clock compares with Graphcore's real execution traces, on both paths.

Graphcore's pipelining tutorial shows PopVision traces of its MLP (batch 32, 16 mini-batches
per weight update, synthetic data, a Mk2 IPU at 1.33 GHz) for three of its steps.  This
script simulates the same three programs two ways and prints them beside the real figures:

* **recorded**: our tutorial-layout trainer (``tests/layouts/pipelining_tutorial_layout.py``)
  run unmodified through ``python -m ipu_emulator run --tf1``, step 1 (one IPU), step 2
  (sharded over two IPUs at dense32, ``minimize`` in the last shard) and step 3 (two
  pipeline stages, Grouped), each trace written with ``--trace``;
* **CLI**: ``python -m ipu_emulator simulate --model tutorial-mlp`` (one IPU;
  ``--splits dense32 --sharded``; ``--splits dense32 --schedule grouped``), which builds
  the same model from its layers without TensorFlow.

Figures (Graphcore's traces; docs/fidelity.md says which figure calibrates what):

* step 1, one mini-batch: forward about 23,000 cycles, backward with gradient accumulation
  about 27,000, weight update about 6,200;
* step 2: device time per mini-batch about 1.72 times step 1's (86,000 vs 50,000 cycles);
* step 3: a main-phase step about 0.75 times step 1's mini-batch (about 37,500 cycles), and
  IPU1 busy (computing) about 0.6 of it; in the ramp-up, IPU0's forward pass of a mini-batch
  (dense256, dense128, dense64 and the FIFO) about 17,000 cycles and IPU1's (dense32,
  logits, loss) about 11,000-13,000: IPU0 / IPU1 about 1.4.

Each line says whether the figure is within the bounds (15 %, or 0.1 for the busy share) and
how far the two paths are apart (they should agree within 2 %).  Exit status 1 if not.

    .venv/bin/python bench/fidelity.py        (about half a minute)
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ipu_emulator import views  # noqa: E402  (after the path: run from a fresh clone)
from ipu_emulator.cli import simulate as cli  # noqa: E402

LAYOUT = ROOT / "tests" / "layouts" / "pipelining_tutorial_layout.py"
CLOCK_HZ = 1.33e9  # ipu2 (sim/hardware.py)
MINI_BATCHES = 16
REAL_STEP1_CYCLES = {"forward": 23_000, "backward": 27_000, "weight_update": 6_200}
REAL = {"sharded / single": 1.72, "pipelined step / single": 0.75, "IPU1 busy share": 0.6,
        "forward IPU0 / IPU1": 1.4}
RELATIVE_BOUND, SHARE_BOUND, PATHS_BOUND = 0.15, 0.1, 0.02
COMPUTE = ("forward", "backward", "weight_update", "recompute")
CLI_ARGUMENTS = {
    1: ["--model", "tutorial-mlp"],
    2: ["--model", "tutorial-mlp", "--splits", "dense32", "--sharded"],
    3: ["--model", "tutorial-mlp", "--splits", "dense32", "--schedule", "grouped"],
}


def recorded_trace(step: int, workdir: pathlib.Path) -> dict:
    trace = workdir / f"step{step}.json"
    env = dict(os.environ, IPU_EMULATOR_DATA="sample", TF_POPLAR_FLAGS="--use_synthetic_data",
               PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "ipu_emulator", "run", "--tf1", "--seed", "1",
               "--trace", str(trace), str(LAYOUT), "--step", str(step), "--batch-size", "32",
               "--batches-to-accumulate", str(MINI_BATCHES), "--repeat-count", "1",
               "--steps", "1", "--schedule", "Grouped"]
    done = subprocess.run(command, cwd=workdir, env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"step {step} failed:\n{done.stderr[-3000:]}")
    return json.loads(trace.read_text())


def cli_trace(step: int, workdir: pathlib.Path) -> dict:
    parser = cli.argparse.ArgumentParser()
    cli.add_arguments(parser)
    options = parser.parse_args(CLI_ARGUMENTS[step] + [
        "--micro-batches", str(MINI_BATCHES), "--batch-size", "32", "--synthetic-data"])
    _, timeline = cli.simulate(options)
    path = workdir / f"cli{step}.json"
    views.save_chrome_trace(timeline, str(path))
    return json.loads(path.read_text())


def ipu_events(trace: dict):
    lanes = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return [dict(e, lane=lanes[e["tid"]]) for e in trace["traceEvents"]
            if e.get("ph") == "X" and lanes.get(e["tid"], "").startswith("IPU")]


def cycles_per_mini_batch(trace: dict) -> float:
    events = ipu_events(trace)
    span_us = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
    return span_us * 1e-6 * CLOCK_HZ / MINI_BATCHES


def step1_cycles(trace: dict) -> dict:
    events = [e for e in ipu_events(trace) if e["cat"] in COMPUTE]
    cycles = {}
    for kind in REAL_STEP1_CYCLES:
        durations = [e["dur"] for e in events if e["cat"] == kind]
        cycles[kind] = durations[0] * 1e-6 * CLOCK_HZ if durations else 0.0
    return cycles


def main_phase(trace: dict):
    phases = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "phase"]
    main = next(p for p in phases if p["name"] == "main")
    return main["ts"], main["ts"] + main["dur"]


def main_phase_step_cycles(trace: dict) -> float:
    """A main-phase time step: the main phase over the forward passes IPU0 starts in it."""
    start, end = main_phase(trace)
    steps = sum(1 for e in ipu_events(trace)
                if e["lane"] == "IPU0" and e["cat"] == "forward" and start <= e["ts"] < end)
    return (end - start) * 1e-6 * CLOCK_HZ / steps


def busy_share(trace: dict, lane: str) -> float:
    start, end = main_phase(trace)
    busy = sum(max(0.0, min(end, e["ts"] + e["dur"]) - max(start, e["ts"]))
               for e in ipu_events(trace) if e["lane"] == lane and e["cat"] in COMPUTE)
    return busy / (end - start)


def forward_split(trace: dict) -> float:
    """IPU0's forward pass of the first mini-batch (in the ramp-up) over IPU1's."""
    first = {}
    for e in sorted(ipu_events(trace), key=lambda e: e["ts"]):
        if e["cat"] == "forward":
            first.setdefault(e["lane"], e["dur"])
    return first["IPU0"] / first["IPU1"]


def figures(traces: dict) -> dict:
    single = cycles_per_mini_batch(traces[1])
    found = {f"step 1 {kind}": cycles for kind, cycles in step1_cycles(traces[1]).items()}
    found["sharded / single"] = cycles_per_mini_batch(traces[2]) / single
    found["pipelined step / single"] = main_phase_step_cycles(traces[3]) / single
    found["IPU1 busy share"] = busy_share(traces[3], "IPU1")
    found["IPU0 busy share"] = busy_share(traces[3], "IPU0")
    found["forward IPU0 / IPU1"] = forward_split(traces[3])
    return found


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(tmp)
        recorded = figures({step: recorded_trace(step, workdir) for step in (1, 2, 3)})
        from_cli = figures({step: cli_trace(step, workdir) for step in (1, 2, 3)})
    real = dict(REAL, **{f"step 1 {kind}": c for kind, c in REAL_STEP1_CYCLES.items()})
    print(f"{'figure':26s} {'Graphcore':>10s} {'recorded':>10s} {'CLI':>10s}   "
          f"{'bound':8s} {'paths apart':>11s}")
    failures = 0
    for name, value in recorded.items():
        target, other = real.get(name), from_cli[name]
        share = "share" in name
        apart = abs(other / value - 1) if value else 0.0
        if target is None:
            verdict = "(judgement)"
        else:
            bound = SHARE_BOUND if share else RELATIVE_BOUND
            off = [abs(v - target) if share else abs(v / target - 1) for v in (value, other)]
            verdict = "ok" if max(off) <= bound else "OUT"
            failures += verdict == "OUT"
        failures += apart > PATHS_BOUND
        fmt = (lambda v: f"{v:10.2f}") if share or "/" in name else (lambda v: f"{v:10,.0f}")
        print(f"{name:26s} {fmt(target) if target else ' ' * 10} {fmt(value)} {fmt(other)}   "
              f"{verdict:8s} {apart:10.1%}{'  OUT' if apart > PATHS_BOUND else ''}")
    print("cycles at 1.33 GHz (ipu2); a main-phase step and the sharded mini-batch are "
          "relative to step 1's mini-batch; the forward split is step 3's first mini-batch")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
