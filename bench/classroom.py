"""A classroom rehearsal on a real JupyterHub (issue 25, part 2).  Not part of `make test`.

    .venv/bin/python bench/classroom.py [--learners 3] [--start-window 10] [--think 1] [--port 8050]

In the spirit of hubtraf, but running the real lessons.  It starts `make hub` on its own port,
state and homes (build/classroom/, never a class's build/hub-state or build/hub-homes), then:
  1. one learner ("solo") logs in, starts a server and runs the two-hour plan's notebooks
     (notebooks/README.md, "Workshop plans": 01, then 04 and 08) alone: the baseline;
  2. N learners log in through the hub's login form, spread evenly over --start-window seconds,
     start their servers through the hub's REST API, and each runs the same notebooks in order,
     cell by cell, through their own server's kernel API (a session per notebook, so the kernel
     runs in the notebook's folder; one execute_request per code cell over the kernel's
     websocket, --think seconds between cells; the kernel shut down after each notebook, as the
     notebooks ask), with the exercises solved (IPU_LAB_SOLUTIONS=1, IPU_EMULATOR_DATA=sample,
     set in the kernel's os.environ before the first cell, as `make test` sets them);
  3. a sampler reads, every second, each learner's server + kernel processes' resident and
     private memory (from /proc, as bench/hub_smoke.py does), the machine's used memory
     (total - available) and the load average;
  4. stops the hub as Ctrl-C does, checks no learner's process is left, and checks each
     learner's notebooks are still in their home.
Per learner: login time, server start time, seconds per notebook (and its ratio to the same
notebook run alone), failed cells (with the error name), whether a kernel died, peak memory.
Numbers go to build/classroom/numbers.json (with --tag, numbers-<tag>.json as well).
"""

import argparse
import asyncio
import json
import os
import shutil
import sys
import threading
import time
import uuid

import psutil
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hub_smoke as hs  # noqa: E402  (its hub, login, server and /proc helpers)

REPO = hs.REPO
WORK = os.path.join(REPO, "build", "classroom")
PLAN = ["notebooks/01_porting_a_simple_example.ipynb", "notebooks/04_feeds_explorer.ipynb",
        "notebooks/08_pipeline_playground.ipynb"]
SETUP = ("import os\nos.environ['IPU_LAB_SOLUTIONS'] = '1'\nos.environ['IPU_EMULATOR_DATA'] = 'sample'\n"
         "print('PID', os.getpid())")
CELL_TIMEOUT = 600


def log(msg):
    print(f"[classroom {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Sampler(threading.Thread):
    """Every second: memory per learner (server + kernels) and for the machine, and the load."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.peak = {}  # learner -> {"rss": MB, "private": MB}
        self.machine_peak_used_mb = 0.0
        self.machine_used_at_start_mb = (psutil.virtual_memory().total - psutil.virtual_memory().available) / 2**20
        self.load_peak_1min = 0.0
        self.cpu = []

    def run(self):
        psutil.cpu_percent()
        while not self.stop.wait(1.0):
            per = {}
            for pid, (user, _cmd) in hs.processes().items():
                try:
                    rss, private = hs.memory(pid)
                except (OSError, AttributeError):
                    continue
                acc = per.setdefault(user, [0.0, 0.0])
                acc[0] += rss
                acc[1] += private
            for user, (rss, private) in per.items():
                p = self.peak.setdefault(user, {"rss": 0.0, "private": 0.0})
                p["rss"] = round(max(p["rss"], rss), 1)
                p["private"] = round(max(p["private"], private), 1)
            vm = psutil.virtual_memory()
            self.machine_peak_used_mb = max(self.machine_peak_used_mb, (vm.total - vm.available) / 2**20)
            self.load_peak_1min = max(self.load_peak_1min, os.getloadavg()[0])
            self.cpu.append(psutil.cpu_percent())


async def run_notebook(url, name, headers, path, think):
    """Run one notebook's code cells in a fresh kernel; return its record."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    rec = {"notebook": os.path.basename(path), "failed_cells": [], "kernel_died": False}
    base = url + f"/user/{name}/api"
    nb = json.load(open(os.path.join(hs.HOMES, name, path)))
    cells = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
    rec["code_cells"] = len(cells)
    t0 = time.monotonic()
    r = requests.post(base + "/sessions", headers=headers,
                      json={"path": path, "type": "notebook", "name": os.path.basename(path),
                            "kernel": {"name": "python3"}})
    r.raise_for_status()
    session, kernel = r.json()["id"], r.json()["kernel"]["id"]
    ws = await websocket_connect(HTTPRequest(
        url.replace("http", "ws", 1) + f"/user/{name}/api/kernels/{kernel}/channels", headers=headers))
    run_s = 0.0
    try:
        for i, source in enumerate([SETUP] + cells):
            if i > 1 and think:
                await asyncio.sleep(think)
            msg_id = uuid.uuid4().hex
            ws.write_message(json.dumps({
                "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": name,
                           "session": uuid.uuid4().hex, "version": "5.3"},
                "parent_header": {}, "metadata": {}, "channel": "shell",
                "content": {"code": source, "silent": False, "store_history": True,
                            "user_expressions": {}, "allow_stdin": False, "stop_on_error": False},
            }))
            c0 = time.monotonic()
            while True:
                try:
                    raw = await asyncio.wait_for(ws.read_message(), CELL_TIMEOUT)
                except asyncio.TimeoutError:
                    raw = "timeout"
                if raw is None or raw == "timeout":
                    rec["kernel_died"] = True
                    rec["failed_cells"].append({"cell": i, "error": "websocket closed" if raw is None else "timeout"})
                    break
                msg = json.loads(raw)
                kind, content = msg.get("msg_type"), msg.get("content", {})
                if kind == "status" and content.get("execution_state") in ("dead", "restarting"):
                    rec["kernel_died"] = True
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                if kind == "error":
                    rec["failed_cells"].append({"cell": i, "error": content["ename"],
                                                "value": content["evalue"][:200]})
                elif kind == "execute_reply":
                    break
            run_s += time.monotonic() - c0
            if rec["kernel_died"]:
                break
    finally:
        ws.close()
        rec["seconds"] = round(time.monotonic() - t0, 1)  # wall time, thinking included
        rec["kernel_seconds"] = round(run_s, 1)  # time cells took to run, thinking left out
        requests.delete(base + f"/sessions/{session}", headers=headers)
        requests.delete(base + f"/kernels/{kernel}", headers=headers)
    return rec


def learner(url, password, name, delay, think, out):
    rec = out[name] = {"name": name, "notebooks": []}
    try:
        time.sleep(delay)
        t0 = time.monotonic()
        headers = hs.login(url, name, password)
        rec["login_s"] = round(time.monotonic() - t0, 2)
        rec["server_start_s"] = hs.start_server(url, name, headers)
        for path in PLAN:
            nb = asyncio.run(run_notebook(url, name, headers, path, think))
            rec["notebooks"].append(nb)
            log(f"{name}: {nb['notebook']} in {nb['seconds']} s ({nb['kernel_seconds']} s running), "
                f"{len(nb['failed_cells'])} failed cell(s){', KERNEL DIED' if nb['kernel_died'] else ''}")
    except BaseException as e:  # noqa: BLE001 (a learner's failure is recorded, not fatal)
        rec["error"] = f"{type(e).__name__}: {e}"
        log(f"{name}: {rec['error']}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", type=int, default=3)
    ap.add_argument("--start-window", type=float, default=10.0)
    ap.add_argument("--think", type=float, default=1.0)
    ap.add_argument("--port", type=int, default=8050)
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    for d in ("state", "homes"):  # a fresh hub and fresh homes; numbers-<tag>.json files stay
        shutil.rmtree(os.path.join(WORK, d), ignore_errors=True)
    os.makedirs(WORK, exist_ok=True)
    hs.WORK, hs.STATE, hs.HOMES = WORK, os.path.join(WORK, "state"), os.path.join(WORK, "homes")
    hs.log = log

    numbers = {"learners": args.learners, "start_window_s": args.start_window, "think_s": args.think,
               "plan": [os.path.basename(p) for p in PLAN], "cores": os.cpu_count(),
               "memory_total_gb": round(psutil.virtual_memory().total / 2**30, 1)}
    sampler = Sampler()
    sampler.start()
    hub, url = hs.start_hub(args.port, "classroom")
    names = [f"learner{i:02d}" for i in range(1, args.learners + 1)]
    results = {}
    try:
        password = json.load(open(os.path.join(hs.STATE, "passwords.json")))["learners"]
        log("solo: the plan's notebooks alone, the baseline")
        learner(url, password, "solo", 0, args.think, results)
        solo_peak = dict(sampler.peak.get("solo", {}))
        requests.delete(url + "/hub/api/users/solo/server",
                        headers=hs.login(url, "solo", password))
        time.sleep(3)
        sampler.machine_peak_used_mb = 0.0
        sampler.load_peak_1min = 0.0
        sampler.cpu = []
        log(f"{args.learners} learners over {args.start_window} s")
        t0 = time.monotonic()
        threads = [threading.Thread(target=learner, args=(
            url, password, n, args.start_window * i / max(1, args.learners), args.think, results))
            for i, n in enumerate(names)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        numbers["class_wall_s"] = round(time.monotonic() - t0, 1)
    finally:
        sampler.stop.set()
        sampler.join()
        hs.stop_hub(hub, "classroom")
    numbers["hub_start_s"] = hs.numbers.get("hub_start_s_classroom")
    numbers["hub_stop_s"] = hs.numbers.get("hub_stop_s_classroom")
    numbers["no_process_left"] = True  # stop_hub exits otherwise

    solo = {nb["notebook"]: nb for nb in results["solo"]["notebooks"]}
    results["solo"]["peak_memory_mb"] = solo_peak
    for n in names:
        rec = results[n]
        rec["peak_memory_mb"] = sampler.peak.get(n, {})
        for nb in rec["notebooks"]:
            alone = solo.get(nb["notebook"])
            if alone and alone["kernel_seconds"]:
                nb["vs_alone"] = round(nb["kernel_seconds"] / alone["kernel_seconds"], 2)
        rec["notebooks_kept"] = all(os.path.exists(os.path.join(hs.HOMES, n, p)) for p in PLAN) and \
            len([f for f in os.listdir(os.path.join(hs.HOMES, n, "notebooks")) if f.endswith(".ipynb")]) == 13
    numbers["solo"] = results["solo"]
    numbers["per_learner"] = [results[n] for n in names]
    numbers["machine"] = {
        "used_mb_before": round(sampler.machine_used_at_start_mb),
        "peak_used_mb": round(sampler.machine_peak_used_mb),
        "peak_load_1min": round(sampler.load_peak_1min, 2),
        "mean_cpu_percent": round(sum(sampler.cpu) / max(1, len(sampler.cpu)), 1),
    }
    ok = [results[n] for n in names]
    numbers["all_cells_passed"] = all(not nb["failed_cells"] for r in ok for nb in r["notebooks"]) and \
        all(len(r["notebooks"]) == len(PLAN) and "error" not in r for r in ok)
    numbers["no_kernel_died"] = not any(nb["kernel_died"] for r in ok for nb in r["notebooks"])
    numbers["all_notebooks_kept"] = all(r.get("notebooks_kept") for r in ok)

    # The table.
    short = [os.path.basename(p)[:2] for p in PLAN]
    head = f"{'learner':10} {'login s':>7} {'start s':>7} " + " ".join(
        f"{s + ' s (x alone)':>15}" for s in short) + f" {'failed':>6} {'died':>4} {'peak RSS MB':>11} {'private MB':>10}"
    print(head)
    for r in [results["solo"]] + ok:
        cols = []
        for nb in r["notebooks"]:
            cols.append(f"{nb['kernel_seconds']:>7} ({nb.get('vs_alone', 1.0):>4}x)".rjust(15))
        cols += ["-".rjust(15)] * (len(PLAN) - len(cols))
        failed = sum(len(nb["failed_cells"]) for nb in r["notebooks"])
        died = any(nb["kernel_died"] for nb in r["notebooks"])
        pk = r.get("peak_memory_mb", {})
        print(f"{r['name']:10} {r.get('login_s', '-'):>7} {r.get('server_start_s', '-'):>7} " + " ".join(cols)
              + f" {failed:>6} {'yes' if died else 'no':>4} {pk.get('rss', '-'):>11} {pk.get('private', '-'):>10}")
    m = numbers["machine"]
    print(f"machine: {numbers['cores']} cores, {numbers['memory_total_gb']} GB; used {m['used_mb_before']} MB before, "
          f"peak {m['peak_used_mb']} MB during the class; peak 1-min load {m['peak_load_1min']}, "
          f"mean CPU {m['mean_cpu_percent']} %; class wall time {numbers.get('class_wall_s')} s")
    for r in [results["solo"]] + ok:
        for nb in r["notebooks"]:
            for f in nb["failed_cells"]:
                print(f"  {r['name']} {nb['notebook']} cell {f['cell']}: {f['error']} {f.get('value', '')}")
        if "error" in r:
            print(f"  {r['name']}: {r['error']}")
    print(f"all cells passed: {numbers['all_cells_passed']}; no kernel died: {numbers['no_kernel_died']}; "
          f"every learner's notebooks kept: {numbers['all_notebooks_kept']}; nothing left running: True")
    for fn in ["numbers.json"] + ([f"numbers-{args.tag}.json"] if args.tag else []):
        with open(os.path.join(WORK, fn), "w") as f:
            json.dump(numbers, f, indent=1)
    log(f"numbers in {WORK}/numbers.json")
    if not (numbers["all_cells_passed"] and numbers["no_kernel_died"] and numbers["all_notebooks_kept"]):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
