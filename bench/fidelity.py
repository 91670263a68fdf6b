"""How the simulated clock compares with Graphcore's real execution traces.

Runs our tutorial-layout MNIST trainer (``tests/layouts/pipelining_tutorial_layout.py``: the
pipelining tutorial's MLP, batch 32, 16 mini-batches per weight update, one engine run,
synthetic data as the tutorial's ``profile.sh`` asks for) as step 1 (one IPU), step 2
(sharded over two IPUs, split at dense32) and step 3 (two pipeline stages, Grouped, split
at dense32), through the runner on ipu2, and prints from each simulated trace:

* step 1: the forward, backward (with gradient accumulation) and weight-update cycles of one
  mini-batch, against the tutorial's step-1 PopVision trace (about 23,000, 27,000 and
  6,200 cycles on a Mk2 IPU);
* the device time per mini-batch of steps 2 and 3 relative to step 1;
* each IPU's share of busy (compute) time in the pipeline's main phase.

    .venv/bin/python bench/fidelity.py        (about half a minute)
"""
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
LAYOUT = ROOT / "tests" / "layouts" / "pipelining_tutorial_layout.py"
CLOCK_HZ = 1.33e9  # ipu2 (sim/hardware.py)
MINI_BATCHES = 16
PUBLISHED_STEP1_CYCLES = {"forward": 23_000, "backward": 27_000, "weight_update": 6_200}
COMPUTE = ("forward", "backward", "weight_update", "recompute")


def simulated_trace(step: int, workdir: pathlib.Path) -> dict:
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


def ipu_events(trace: dict):
    lanes = {e["tid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    return [dict(e, lane=lanes[e["tid"]]) for e in trace["traceEvents"]
            if e.get("ph") == "X" and lanes.get(e["tid"], "").startswith("IPU")]


def device_seconds_per_mini_batch(trace: dict) -> float:
    events = ipu_events(trace)
    span_us = max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)
    return span_us * 1e-6 / MINI_BATCHES


def step1_cycles(trace: dict) -> dict:
    events = [e for e in ipu_events(trace) if e["cat"] in COMPUTE]
    first = [e for e in events if e["args"].get("iteration") in (0, None)]
    cycles = {}
    for kind in PUBLISHED_STEP1_CYCLES:
        chosen = first if kind != "weight_update" else events
        durations = [e["dur"] for e in chosen if e["cat"] == kind]
        cycles[kind] = durations[0] * 1e-6 * CLOCK_HZ if durations else 0.0
    return cycles


def main_phase_busy_shares(trace: dict) -> dict:
    phases = [e for e in trace["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "phase"]
    main = next(p for p in phases if p["name"] == "main")
    start, end = main["ts"], main["ts"] + main["dur"]
    shares = {}
    for e in ipu_events(trace):
        if e["cat"] in COMPUTE:
            overlap = max(0.0, min(end, e["ts"] + e["dur"]) - max(start, e["ts"]))
            shares[e["lane"]] = shares.get(e["lane"], 0.0) + overlap / (end - start)
    return dict(sorted(shares.items()))


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(tmp)
        traces = {step: simulated_trace(step, workdir) for step in (1, 2, 3)}
    print("Step 1, one IPU, one mini-batch of 32 (ipu2 cycles at 1.33 GHz; simulated vs "
          "Graphcore's trace):")
    for kind, cycles in step1_cycles(traces[1]).items():
        published = PUBLISHED_STEP1_CYCLES[kind]
        print(f"  {kind:14s} {cycles:9,.0f}   published about {published:6,}   "
              f"{cycles / published - 1:+.0%}")
    single = device_seconds_per_mini_batch(traces[1])
    print("Device time per mini-batch (simulated IPU time), relative to one IPU:")
    for step, label in ((1, "step 1, one IPU"), (2, "step 2, sharded (2 IPUs)"),
                        (3, "step 3, pipelined (2 stages, Grouped)")):
        seconds = device_seconds_per_mini_batch(traces[step])
        print(f"  {label:38s} {seconds * 1e6:8.1f} us   {seconds / single:5.2f}x")
    print("Pipeline main phase, each IPU's busy share:",
          ", ".join(f"{lane} {share:.0%}" for lane, share in
                    main_phase_busy_shares(traces[3]).items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
