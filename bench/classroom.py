"""A classroom rehearsal on a real JupyterHub, with faults (issue 25).  `make test` runs it with
3 learners (tests/hub/, through ``main`` in its own process, the strangers' attack rehearsal
first on the same hub); bigger classes by hand:

    .venv/bin/python bench/classroom.py [--learners 3] [--start-window 10] [--think 1]
        [--faults kernel-kill,server-restart,hub-restart] [--no-baseline] [--port 8050] [--work DIR]
        [--tensorflow-learners N]

In the spirit of hubtraf, but running the real lessons.  It starts `make hub` on its own port,
state and homes (build/classroom/ or --work, never a class's build/hub-state or build/hub-homes):
  1. unless --no-baseline, one learner ("solo") runs the two-hour plan's notebooks
     (notebooks/README.md, "Workshop plans": 01, then 04 and 08) alone: the baseline;
  2. N learners log in through the hub's login form, spread evenly over --start-window seconds,
     start their servers through the hub's REST API (a server already running, from an earlier
     sign-in, is theirs to use), and each runs the same notebooks in order (with
     --tensorflow-learners N, only the first N run notebook 01, the others start at 04),
     cell by cell, through their own server's kernel API (a session per notebook, so the kernel
     runs in the notebook's folder; one execute_request per code cell over the kernel's
     websocket, --think seconds between cells; the kernel shut down after each notebook, as the
     notebooks ask), with the exercises solved (IPU_LAB_SOLUTIONS=1, IPU_EMULATOR_DATA=sample,
     set in the kernel's os.environ before the first cell, as `make test` sets them);
  3. the faults a class meets (--faults), one learner each: learner01's kernel gets SIGKILL
     mid-cell; learner02's cell holds more memory than their limit (HUB_MEM_LIMIT, --mem-limit,
     1G), so the kernel's memory cgroup kills it (only where the hub enforces the limit: root on
     Linux; otherwise this fault is left out and the numbers say why); learner03's server is
     stopped mid-cell through the hub's REST API (the Hub Control Panel's Stop My Server).
     Each first saves an edit to the notebook they are in (--strike-in: 01 by default), once
     their first exercise check is in their progress file, and the fault strikes the next cell
     still running after STRIKE_AFTER_S (the out-of-memory one, the next cell).  When all have
     recovered, the hub is restarted as Ctrl-C and `make hub` do, from the next cell of a plan's
     notebook still running after STRIKE_AFTER_S: every server stops.  A learner whose cell ran
     then runs nothing more until their server has gone (a cell can end before the hub has
     stopped it).  Every learner whose kernel or server went away does what a learner would:
     waits for the hub, starts their server if it is not running (the hub's Launch Server
     button, whose progress stream says when it is ready), and runs the notebook again from the
     top.  The last learner also gets three "Not yet" at an exercise of a later notebook (10),
     once the hub restart is over (answers run twice would be more than three), so the
     instructor's progress view has someone stuck;
  4. a sampler reads, every second, each learner's server + kernel processes' resident and
     private memory (from /proc, as bench/hub_smoke.py does), the machine's used memory
     (total - available) and the load average;
  5. reads the class's progress as the instructor does (`python -m ipu_emulator progress`), stops
     the hub as Ctrl-C does, checks no learner's process is left, and checks each learner's
     notebooks, saved edit and progress from before their fault are all still there.
Per learner: login time, server start time, seconds per notebook (and its ratio to the same
notebook run alone), failed cells (with the error name), interruptions (cause, cell, seconds to
recover), kernel deaths nobody caused, peak memory (and, where the hub enforces a memory limit,
the most the learner's memory cgroup was charged, read after each notebook).  Numbers
go to build/classroom/numbers.json
(with --tag, numbers-<tag>.json as well); the exit status is 1 when anything was lost or failed.
"""

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

import psutil
import requests

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hub_smoke as hs  # noqa: E402  (its hub, login, server and /proc helpers)

sys.path.insert(0, os.path.join(hs.REPO, "hub"))
import memory_limit  # noqa: E402  (where the hub puts each learner's memory cgroup)

REPO = hs.REPO
WORK = os.path.join(REPO, "build", "classroom")
PLAN = ["notebooks/01_porting_a_simple_example.ipynb", "notebooks/04_feeds_explorer.ipynb",
        "notebooks/08_pipeline_playground.ipynb"]
TENSORFLOW_NOTEBOOKS = {"notebooks/01_porting_a_simple_example.ipynb"}   # 04 and 08 need none
SETUP = "import os\nos.environ['IPU_LAB_SOLUTIONS'] = '1'\nos.environ['IPU_EMULATOR_DATA'] = 'sample'"
# Three wrong answers at notebook 10's exercise: the learner the progress view should call stuck.
GO_WRONG = ("from ipu_emulator.exercises import REGISTRY, nb10_schedules\n"
            "for answer in REGISTRY['10.chunks-per-ipu'].wrong[:3]:\n"
            "    print(nb10_schedules.check_chunks_per_ipu(answer))")
# What `%tensorboard` would start and where its frame would point (docs/tensorboard.md): the
# lab's server settings name the lab's TensorBoard (found on the PATH the hub gives the server,
# the lab's bin/ first) and the frame's proxy path.
WHICH_TENSORBOARD = ("import os\nprint('TENSORBOARD', os.environ.get('TENSORBOARD_BINARY'), "
                     "os.environ.get('TENSORBOARD_PROXY_URL'))")
# Then a TensorBoard started as `%tensorboard` starts it, fetched from the hub's public URL at
# the path its frame would use (through the hub's proxy, the learner's server and its
# jupyter-server-proxy), with the learner's own token, and stopped again.
TENSORBOARD_THROUGH_THE_HUB = """\
import datetime, json, os, signal, tempfile, urllib.request
from tensorboard import manager
logs = tempfile.mkdtemp()
started = manager.start(["--logdir", logs, "--port", "0"], timeout=datetime.timedelta(seconds=90))
try:
    path = os.environ["TENSORBOARD_PROXY_URL"].replace("%PORT%", str(started.info.port))
    request = urllib.request.Request(
        "{hub}" + path + "data/environment",
        headers={{"Authorization": "token " + os.environ["JUPYTERHUB_API_TOKEN"]}})
    with urllib.request.urlopen(request, timeout=60) as answer:
        print("TENSORBOARD_PROXIED", answer.status, json.load(answer)["data_location"] == logs)
    with open(f"/proc/{{started.info.pid}}/maps") as mapped:
        print("TENSORBOARD_WITHOUT_TENSORFLOW", "libtensorflow" not in mapped.read())
finally:
    os.kill(started.info.pid, signal.SIGTERM)
"""
LEARNER_FAULTS = ("kernel-kill", "out-of-memory", "server-restart")  # one learner each, in order
FAULTS = LEARNER_FAULTS + ("hub-restart",)                           # the last: the whole class
# The out-of-memory fault: the learner's cell holds this much more than their memory limit.
OVER_THE_LIMIT = 256 * 2**20
CELL_TIMEOUT = 600
# A fault strikes a cell still running this long after it started (notebook 01's training and
# simulation cells run for longer on this machine; a quicker cell passes it on to the next);
# --strike-after changes it (notebook 08's cells are quicker).
STRIKE_AFTER_S = 0.25
RECOVERY_TIMEOUT = 300
MAX_RUNS = 5   # runs of one notebook before a learner gives up
DELETE_RETRY_S = 60   # how long a refused DELETE is tried again (a kernel's restart)
EDIT_MARKER = "Saved by {name} just before the {fault}."


def log(msg):
    print(f"[classroom {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Interrupted(Exception):
    """The learner's kernel or server went away under a running notebook."""


class Sampler(threading.Thread):
    """Every second: memory per learner (server + kernels) and for the machine, and the load."""

    def __init__(self):
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.peak = {}  # learner -> {"rss": MB, "private": MB}
        vm = psutil.virtual_memory()
        self.machine_used_at_start_mb = (vm.total - vm.available) / 2**20
        self.reset()

    def reset(self):
        self.machine_peak_used_mb = 0.0
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


class Classroom:
    """The hub, shared by every learner's thread, and the class-wide fault: a hub restart."""

    def __init__(self, port, mem_limit, names, strike_in="01", strike_after=STRIKE_AFTER_S):
        self.port = port
        self.names = names   # the hub's roster
        self.strike_in = strike_in   # the notebook (its number) the learners' faults strike in
        self.strike_after = strike_after
        self.lock = threading.Lock()
        os.environ["HUB_MEM_LIMIT"] = mem_limit   # read by hub/jupyterhub_config.py
        self.cgroups = memory_limit.MemoryCgroups(memory_limit.parse_size(mem_limit),
                                                  f"ipu-lab-hub-{port}")
        self.hub, self.url = hs.start_hub(port, "classroom", names)
        self.hub_restart = None  # {"start", "end", "busy": [...], "progress": {...}} once done
        self.restart_failure = None  # what stopped the restart, for the main thread to raise
        self.restart_wanted = False  # "hub-restart" among the faults
        self.restart_busy = None     # the learners whose cells ran when it struck, once it has
        self.restart_done = threading.Event()
        self.gate = threading.Lock()   # one striker at a time

    def restart_due(self, learners):
        """Whether the hub restart should strike the next cell still running after
        ``strike_after``: it is among the faults, has not struck, and every learner's own fault
        has struck and been recovered from."""
        return (self.restart_wanted and self.restart_busy is None
                and not any(lrn.fault and not lrn.fault_recovered() for lrn in learners))

    def restart_hub(self, learners, striker):
        """Restart the hub as Ctrl-C and `make hub` do, while ``striker``'s cell runs (and any
        other learner's that has run for ``strike_after``): every server stops with the hub.
        Runs in the striker's thread, where a failed check (SystemExit) would end the thread
        silently: it is kept for ``main``.  Only once: a second striker finds it done."""
        with self.gate:
            if self.restart_busy is not None:
                return
            self.lock.acquire()   # restarting_since() is True from here
            self.restart_busy = [striker.name] + [
                lrn.name for lrn in learners
                if lrn is not striker and lrn.cell_running_for() >= self.strike_after]
        try:
            t0 = time.monotonic()
            progress = {lrn.name: lrn.progress_lines() for lrn in learners}
            log(f"hub restart while {', '.join(self.restart_busy)} run a cell")
            hs.stop_hub(self.hub, "restart")
            self.hub, self.url = hs.start_hub(self.port, "after-restart", self.names)
            self.hub_restart = {"start": t0, "end": time.monotonic(), "busy": self.restart_busy,
                                "progress": progress}
        except BaseException as failure:  # pylint: disable=broad-except
            self.restart_failure = failure
        finally:
            self.lock.release()
            self.restart_done.set()

    def restarting_since(self, t):
        """Whether a hub restart is under way or ended after t: what took a server away."""
        return self.lock.locked() or bool(self.hub_restart and self.hub_restart["end"] >= t)

    def stop(self):
        if self.hub.poll() is None:   # not when a failed restart left it stopped
            hs.stop_hub(self.hub, "classroom")


class Learner:
    def __init__(self, room, name, think, fault=None, go_wrong=False, plan=PLAN):
        self.room, self.name, self.think = room, name, think
        self.fault, self.go_wrong = fault, go_wrong
        self.plan = list(plan)   # the plan's notebooks this learner runs, in order
        self.classmates = [self]   # the whole class (main sets it): for the hub restart
        self.felt_restart = False  # interrupted by the hub restart and recovered
        self.finished = threading.Event()
        # Once armed: {"fault", "notebook", "path", "edit", "progress_lines"}; "cell" once it
        # struck, "recovered" once the learner's server answered again.
        self.fault_state = None
        self.rec = {"name": name, "plan": [os.path.basename(p) for p in self.plan],
                    "notebooks": [], "interruptions": []}
        self.headers = None
        self.cell_started = None  # monotonic time the running cell was sent, None between cells

    def fault_in_progress(self):
        return bool(self.fault_state and "cell" in self.fault_state
                    and not self.fault_state.get("recovered"))

    def fault_recovered(self):
        return bool(self.fault_state and self.fault_state.get("recovered"))

    def cell_running_for(self):
        started = self.cell_started
        return 0.0 if started is None else time.monotonic() - started

    @property
    def home(self):
        return os.path.join(hs.HOMES, self.name)

    def progress_lines(self):
        try:
            with open(os.path.join(self.home, ".ipu-lab", "progress.jsonl")) as f:
                return f.read().splitlines()
        except OSError:
            return []

    def api(self, method, path, **kw):
        """A call to the learner's own server; a server or hub that went away is Interrupted."""
        try:
            r = requests.request(method, self.room.url + f"/user/{self.name}/api" + path,
                                 headers=self.headers, timeout=60, **kw)
        except requests.RequestException as e:
            raise Interrupted(f"{type(e).__name__}") from e
        if r.status_code >= 400:
            raise Interrupted(f"HTTP {r.status_code} from {path}")
        return r

    def hub_api(self, method, path, **kw):
        """A call to the hub's REST API; None while the hub is away (restarting)."""
        try:
            r = requests.request(method, self.room.url + "/hub/api" + path, headers=self.headers,
                                 timeout=30, **kw)
            return r if r.status_code < 500 else None
        except requests.RequestException:
            return None

    def server_answers(self):
        """Whether the learner's own server answers through the proxy (after a hub restart the
        hub can call a server ready a moment before the proxy routes to it)."""
        try:
            return requests.get(self.room.url + f"/user/{self.name}/api/status",
                                headers=self.headers, timeout=30).status_code == 200
        except requests.RequestException:
            return False

    def server(self):
        """The learner's server as the hub sees it ({} when stopped), or None when the hub is away."""
        r = self.hub_api("GET", f"/users/{self.name}")
        if r is None or r.status_code != 200:
            return None
        return r.json().get("servers", {}).get("") or {}

    # --- the plan -------------------------------------------------------------------------
    def run(self, delay):
        try:
            time.sleep(delay)
            t0 = time.monotonic()
            self.headers = hs.login(self.room.url, self.name, hs.password_of(self.name))
            self.rec["login_s"] = round(time.monotonic() - t0, 2)
            server = self.server()
            if server and server.get("ready"):   # started at an earlier sign-in: theirs to use
                self.rec["server_start_s"] = 0.0
            else:
                self.rec["server_start_s"] = hs.start_server(self.room.url, self.name, self.headers)
            for path in self.plan:
                nb = self.run_notebook(path)
                self.rec["notebooks"].append(nb)
                self.note_charged_peak()
                log(f"{self.name}: {nb['notebook']} in {nb['seconds']} s ({nb['kernel_seconds']} s running), "
                    f"{len(nb['failed_cells'])} failed cell(s), {nb['runs']} run(s)"
                    f"{', A KERNEL DIED UNCAUSED' if nb['kernel_died'] else ''}")
            if self.go_wrong:
                self.after_the_restart()
                self.rec["went_wrong"] = asyncio.run(self.run_cells(self.plan[-1], [
                    GO_WRONG, WHICH_TENSORBOARD, TENSORBOARD_THROUGH_THE_HUB.format(hub=self.room.url)], {}))
        except BaseException as e:  # noqa: BLE001 (a learner's failure is recorded, not fatal)
            self.rec["error"] = f"{type(e).__name__}: {e}"
            log(f"{self.name}: {self.rec['error']}")
        finally:
            self.cell_started = None
            self.finished.set()

    def after_the_restart(self):
        """The stuck learner's wrong answers are not a notebook to run again from the top (a
        second run would note more misses than three), so they wait for the hub restart, while
        a classmate can still be struck by it; then get their server back if it took it."""
        if not self.room.restart_wanted:
            return
        others = [lrn for lrn in self.classmates if lrn is not self]
        while not self.room.restart_done.wait(0.2):
            if all(lrn.finished.is_set() for lrn in others) and not self.room.lock.locked():
                return   # nobody left to be struck: the class's numbers say it never struck
        if not self.felt_restart and self.room.hub_restart:
            self.recover(self.plan[-1], "the hub restarted after their last notebook")

    def run_notebook(self, path):
        """Run a notebook's code cells; after an interruption, recover and run it again."""
        t0 = time.monotonic()
        rec = {"notebook": os.path.basename(path), "failed_cells": [], "kernel_died": False,
               "runs": 0, "kernel_seconds": 0.0}
        while True:
            rec["runs"] += 1
            rec["failed_cells"] = []
            try:
                asyncio.run(self.run_cells(path, None, rec))
                break
            except Interrupted as why:
                self.cell_started = None
                if rec["runs"] > MAX_RUNS:
                    raise
                self.recover(path, str(why))
        rec["seconds"] = round(time.monotonic() - t0, 1)  # wall time, thinking and recovery included
        rec["kernel_seconds"] = round(rec["kernel_seconds"], 1)  # the cells' own running time
        return rec

    def recover(self, path, why):
        """What a learner does when their kernel or server went away: reload the page, start
        their server if it is not running (Launch Server), then run the notebook from the top."""
        t0 = time.monotonic()
        ours = self.fault_in_progress()
        cause = self.fault if ours else "hub-restart" if self.room.restarting_since(t0 - 120) else "unexpected"
        while True:
            if time.monotonic() - t0 > RECOVERY_TIMEOUT:
                raise RuntimeError(f"{self.name} could not get their server back in {RECOVERY_TIMEOUT} s")
            server = self.server()
            if server is not None and server.get("ready") and self.server_answers():
                break
            if server == {}:  # stopped: the hub's page starts it
                self.hub_api("POST", f"/users/{self.name}/server")
            if server is not None and server.get("pending") == "spawn" or server == {}:
                try:   # the hub's spawn page: its progress stream ends when the server is ready
                    hs.wait_ready(self.room.url, self.name, self.headers,
                                  min(time.monotonic() + 60, t0 + RECOVERY_TIMEOUT))
                except (SystemExit, requests.RequestException, ValueError):
                    pass   # the hub is away again or the start failed: look again below
            time.sleep(0.5)
        took = round(time.monotonic() - t0, 1)
        if cause == "hub-restart":
            self.felt_restart = True
        if ours:
            self.fault_state["recovered"] = True
            if self.fault == "out-of-memory":
                self.fault_state["limit_hits_after"] = self.limit_hits()
        self.rec["interruptions"].append({"notebook": os.path.basename(path), "cause": cause,
                                          "what": why, "recovered_s": took})
        log(f"{self.name}: {cause} ({why}); server back in {took} s, running {os.path.basename(path)} again")

    async def run_cells(self, path, sources, rec):
        """One run of a notebook (or of ``sources``) in a new session's kernel."""
        from tornado.httpclient import HTTPRequest
        from tornado.websocket import WebSocketClosedError, websocket_connect

        sources_are_the_notebook = sources is None
        if sources is None:
            nb = json.load(open(os.path.join(self.home, path)))
            sources = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]
            rec["code_cells"] = len(sources)
        r = self.api("POST", "/sessions", json={"path": path, "type": "notebook",
                                                "name": os.path.basename(path), "kernel": {"name": "python3"}})
        session, kernel = r.json()["id"], r.json()["kernel"]["id"]
        try:
            ws = await websocket_connect(HTTPRequest(   # a loaded machine is slow to answer
                self.room.url.replace("http", "ws", 1) + f"/user/{self.name}/api/kernels/{kernel}/channels",
                headers=self.headers, connect_timeout=120, request_timeout=120))
        except Exception as e:  # noqa: BLE001 (the server went away between the two calls)
            raise Interrupted(f"websocket: {type(e).__name__}") from e
        outputs = []
        try:
            for i, source in enumerate([SETUP] + sources):
                await self.until_the_restart_takes_the_server(ws)
                if i > 1 and self.think:
                    await asyncio.sleep(self.think)
                # The hub restart strikes a cell of a plan's notebook (run again from the top
                # after it), never the stuck learner's wrong answers (after_the_restart).
                restarting = i > 0 and sources_are_the_notebook and self.room.restart_due(self.classmates)
                armed = bool(self.fault and "cell" not in (self.fault_state or {}) and i > 0
                             and sources_are_the_notebook
                             and os.path.basename(path).startswith(self.room.strike_in)
                             and self.progress_lines())
                if armed and not self.fault_state:
                    self.save_edit(path)
                if armed and self.fault == "out-of-memory":
                    # The learner's cell holds more than their limit (FULL_SIZE = True on a big
                    # data set, say): the kernel's own allocation, no signal from outside.
                    self.strike(path, i, kernel)
                    armed = False
                    source = f"hold = b'x' * {self.room.cgroups.limit_bytes + OVER_THE_LIMIT}\n" + source
                msg_id = uuid.uuid4().hex
                try:
                    ws.write_message(json.dumps({
                        "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": self.name,
                                   "session": uuid.uuid4().hex, "version": "5.3"},
                        "parent_header": {}, "metadata": {}, "channel": "shell",
                        "content": {"code": source, "silent": False, "store_history": True,
                                    "user_expressions": {}, "allow_stdin": False, "stop_on_error": False},
                    }))
                except WebSocketClosedError as e:
                    raise Interrupted("websocket closed") from e
                c0 = self.cell_started = time.monotonic()
                # A cell is done when the kernel has replied on the shell channel and gone idle
                # on IOPub (its outputs and errors come before that; the two channels' messages
                # may arrive in either order).
                replied = idle = False
                while not (replied and idle):
                    # A fault strikes once the cell has run for strike_after, however often
                    # it writes meanwhile (a cell that streams its outputs has no quiet gap).
                    wait = (max(0.0, c0 + self.room.strike_after - time.monotonic())
                            if armed or restarting else CELL_TIMEOUT)
                    try:
                        raw = await asyncio.wait_for(ws.read_message(), wait)
                    except asyncio.TimeoutError:
                        if armed:  # still running: the fault strikes now, mid-cell
                            armed = False
                            await asyncio.get_running_loop().run_in_executor(None, self.strike, path, i, kernel)
                            continue
                        if restarting:  # still running: the hub restarts now, mid-cell
                            restarting = False
                            r0 = time.monotonic()
                            await asyncio.get_running_loop().run_in_executor(
                                None, self.room.restart_hub, self.classmates, self)
                            c0 += time.monotonic() - r0   # the cell's time, not the restart's
                            continue
                        rec.setdefault("failed_cells", []).append({"cell": i, "error": "timeout"})
                        break
                    if raw is None:
                        raise Interrupted("websocket closed")
                    msg = json.loads(raw)
                    kind, content = msg.get("msg_type"), msg.get("content", {})
                    if kind == "status" and content.get("execution_state") in ("dead", "restarting",
                                                                                "autorestarting"):
                        caused = self.fault_in_progress() or self.room.restarting_since(time.monotonic() - 120)
                        if not caused:
                            rec["kernel_died"] = True  # nobody caused this one
                        raise Interrupted(f"kernel {content['execution_state']}")
                    if msg.get("parent_header", {}).get("msg_id") != msg_id:
                        continue
                    if kind == "stream":
                        outputs.append(content.get("text", ""))
                    elif kind == "error":
                        rec.setdefault("failed_cells", []).append(
                            {"cell": i, "error": content["ename"], "value": content["evalue"][:200]})
                    elif kind == "status" and content.get("execution_state") == "idle":
                        idle = True
                    elif kind == "execute_reply":
                        replied = True
                self.cell_started = None
                rec["kernel_seconds"] = rec.get("kernel_seconds", 0.0) + time.monotonic() - c0
            await self.until_the_restart_takes_the_server(ws)
        finally:
            ws.close()
            for url in (f"/sessions/{session}", f"/kernels/{kernel}"):
                self.delete(url)
        return "".join(outputs)

    def delete(self, path):
        """DELETE ``path`` on the learner's server, as closing a notebook does.  A kernel that
        is restarting (the memory limit killed it, and the server started it again) cannot be
        shut down until it is up: jupyter_client answers 500 (InvalidStateError) and keeps
        the session, whose next POST /sessions would hand back that half-shut kernel, which
        never answers.  So a 5xx is tried again until the restart is over."""
        deadline = time.monotonic() + DELETE_RETRY_S
        while True:
            try:
                self.api("DELETE", path)
                return
            except Interrupted as why:   # gone with its server (or 404: already gone)
                if not str(why).startswith("HTTP 5") or time.monotonic() > deadline:
                    return
            time.sleep(0.5)

    async def until_the_restart_takes_the_server(self, ws):
        """A learner whose cell ran when the hub restart struck: the restart stops their server,
        but a cell (or the notebook's last) can end before it does.  Like a learner whose page
        says the server is going away, they run nothing more until it has gone (their kernel's
        websocket closes), then do what the table says (Interrupted: recover, run again)."""
        if self.felt_restart or self.name not in (self.room.restart_busy or ()):
            return
        t0 = time.monotonic()
        while time.monotonic() - t0 < RECOVERY_TIMEOUT:
            try:
                raw = await asyncio.wait_for(ws.read_message(), 5)
            except asyncio.TimeoutError:
                continue
            if raw is None:
                raise Interrupted("websocket closed")
            if json.loads(raw).get("content", {}).get("execution_state") in ("dead", "restarting"):
                raise Interrupted("kernel shut down with the server")
        raise RuntimeError(f"{self.name}'s server was not stopped by the hub restart")

    # --- the faults -----------------------------------------------------------------------
    def save_edit(self, path):
        """The learner saves their notebook (as JupyterLab's Ctrl-S does) before the fault."""
        marker = EDIT_MARKER.format(name=self.name, fault=self.fault)
        model = self.api("GET", f"/contents/{path}").json()
        model["content"]["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "source": marker})
        self.api("PUT", f"/contents/{path}", json={"type": "notebook", "format": "json",
                                                    "content": model["content"]})
        self.fault_state = {"fault": self.fault, "notebook": os.path.basename(path), "edit": marker,
                            "path": path, "progress_lines": self.progress_lines()}

    def strike(self, path, cell, kernel):
        self.fault_state.update(cell=cell)
        log(f"{self.name}: {self.fault} at cell {cell} of {os.path.basename(path)}")
        if self.fault == "kernel-kill":
            pids = [pid for pid, (_user, cmd) in hs.processes().items() if f"kernel-{kernel}" in cmd]
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            self.fault_state["killed"] = len(pids)
        elif self.fault == "server-restart":  # Stop My Server; recover() is the Start button
            self.hub_api("DELETE", f"/users/{self.name}/server")
        elif self.fault == "out-of-memory":   # the cell does it (run_cells); note the group's count
            self.fault_state["limit_hits_before"] = self.limit_hits()

    def note_charged_peak(self):
        """The most memory the learner's cgroup has been charged so far (its server's group is
        made anew at each start, so this is read after every notebook and the largest kept)."""
        if not self.room.cgroups.enforced:
            return
        try:
            peak = round(self.room.cgroups.peak_bytes(self.name) / 2**20, 1)
        except OSError:   # the server is not running just now
            return
        self.rec["peak_charged_mb"] = max(peak, self.rec.get("peak_charged_mb", 0.0))

    def limit_hits(self):
        """How often the learner's memory cgroup refused memory, None if they have none now."""
        try:
            return self.room.cgroups.limit_hits(self.name)
        except OSError:
            return None

    def kept(self):
        """What survived: the course, the saved edit, the progress from before each fault."""
        names = os.listdir(os.path.join(self.home, "notebooks"))
        kept = {"notebooks": all(os.path.exists(os.path.join(self.home, p)) for p in PLAN)
                and len([f for f in names if f.endswith(".ipynb")]) == 13}
        befores = []
        if self.fault_state:
            on_disk = open(os.path.join(self.home, self.fault_state["path"])).read()
            kept["saved_edit"] = self.fault_state["edit"] in on_disk
            befores.append(self.fault_state["progress_lines"])
        if self.room.hub_restart:
            befores.append(self.room.hub_restart["progress"].get(self.name, []))
        now = self.progress_lines()
        kept["progress"] = all(now[:len(before)] == before for before in befores)
        return kept


def class_progress():
    """The instructor's view, as `make progress` prints it (JSON lines)."""
    out = subprocess.run([sys.executable, "-m", "ipu_emulator", "progress", "--json", hs.HOMES],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    return {row["learner"]: row for row in map(json.loads, out.splitlines())}


def main(argv=None, before_class=None):
    """Run the rehearsal; 0 when nothing failed or was lost.  ``before_class(room)``, if given,
    runs once the hub is up, before the solo run and the class (the hub's own tests use it to
    try more on the same hub: tests/hub/)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--learners", type=int, default=3)
    ap.add_argument("--start-window", type=float, default=10.0)
    ap.add_argument("--think", type=float, default=1.0)
    ap.add_argument("--faults", default=",".join(FAULTS),
                    help=f"comma-separated, from {', '.join(FAULTS)} ('' for none)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the solo run")
    ap.add_argument("--strike-in", default="01", choices=[os.path.basename(p)[:2] for p in PLAN],
                    help="the plan's notebook the learners' faults strike in (01: its training "
                         "cells; 08, the quickest to run again, is what make test uses)")
    ap.add_argument("--strike-after", type=float, default=STRIKE_AFTER_S,
                    help="a fault strikes a cell still running this many seconds after it began")
    ap.add_argument("--mem-limit", default="1G",
                    help="each learner's memory limit (HUB_MEM_LIMIT), where the hub can enforce one")
    ap.add_argument("--tensorflow-learners", type=int, default=None, metavar="N",
                    help="only the first N learners run the plan's TensorFlow notebook (01); the "
                         "others start at 04 (default: all).  The class still runs every notebook "
                         "of the plan, and TensorFlow's import, a kernel's costliest step, happens "
                         "N times: make test uses 1")
    ap.add_argument("--port", type=int, default=8050)
    ap.add_argument("--tag", default="")
    ap.add_argument("--work", default=WORK, help="its state, homes, logs and numbers.json")
    args = ap.parse_args(argv)
    faults = [f for f in args.faults.split(",") if f]
    if any(f not in FAULTS for f in faults):
        ap.error(f"--faults: from {', '.join(FAULTS)}")
    if len([f for f in LEARNER_FAULTS if f in faults]) > args.learners:
        ap.error("--faults: one learner each, and there are fewer learners")
    if args.tensorflow_learners is not None and not 1 <= args.tensorflow_learners <= args.learners:
        ap.error("--tensorflow-learners: at least one learner, so that the class runs the whole plan")
    struck_in = next(p for p in PLAN if os.path.basename(p).startswith(args.strike_in))
    if struck_in in TENSORFLOW_NOTEBOOKS and (args.tensorflow_learners or args.learners) < len(
            [f for f in LEARNER_FAULTS if f in faults]):
        ap.error("--strike-in: a learner who skips that notebook could not meet their fault")
    work = os.path.abspath(args.work)
    for d in ("state", "homes"):  # a fresh hub and fresh homes; numbers-<tag>.json files stay
        shutil.rmtree(os.path.join(work, d), ignore_errors=True)
    os.makedirs(work, exist_ok=True)
    hs.WORK, hs.STATE, hs.HOMES = work, os.path.join(work, "state"), os.path.join(work, "homes")
    hs.log = log

    numbers = {"learners": args.learners, "start_window_s": args.start_window, "think_s": args.think,
               "faults": faults, "plan": [os.path.basename(p) for p in PLAN], "cores": os.cpu_count(),
               "memory_total_gb": round(psutil.virtual_memory().total / 2**30, 1)}
    sampler = Sampler()
    sampler.start()
    names = [f"learner{i:02d}" for i in range(1, args.learners + 1)]
    room = Classroom(args.port, args.mem_limit, names + ["solo"], args.strike_in,
                     args.strike_after)
    numbers["strike_in"] = args.strike_in
    numbers["memory_limit"] = {"limit": args.mem_limit, "enforced": room.cgroups.enforced,
                               "reason": room.cgroups.reason}
    if "out-of-memory" in faults and not room.cgroups.enforced:
        log(f"no out-of-memory fault: no memory limit here ({room.cgroups.reason})")
        faults.remove("out-of-memory")
        numbers["faults"] = faults
    learner_faults = [f for f in LEARNER_FAULTS if f in faults]
    with_tensorflow = len(names) if args.tensorflow_learners is None else args.tensorflow_learners
    learners = [Learner(room, n, args.think,
                        fault=learner_faults[i] if i < len(learner_faults) else None,
                        go_wrong=(i == len(names) - 1),
                        plan=PLAN if i < with_tensorflow else
                        [p for p in PLAN if p not in TENSORFLOW_NOTEBOOKS])
                for i, n in enumerate(names)]
    for lrn in learners:
        lrn.classmates = learners
    solo = None
    try:
        if before_class is not None:
            before_class(room)
        if not args.no_baseline:
            log("solo: the plan's notebooks alone, the baseline")
            solo = Learner(room, "solo", args.think)
            solo.run(0)
            solo.rec["peak_memory_mb"] = dict(sampler.peak.get("solo", {}))
            requests.delete(room.url + "/hub/api/users/solo/server", headers=solo.headers)
            time.sleep(3)
            sampler.reset()
        log(f"{args.learners} learners over {args.start_window} s, faults: {', '.join(faults) or 'none'}")
        t0 = time.monotonic()
        room.restart_wanted = "hub-restart" in faults   # the class's, not the solo run's
        threads = [threading.Thread(target=lrn.run, args=(args.start_window * i / max(1, args.learners),))
                   for i, lrn in enumerate(learners)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if room.restart_failure is not None:
            raise room.restart_failure
        numbers["class_wall_s"] = round(time.monotonic() - t0, 1)
        numbers["progress_view"] = class_progress()
    finally:
        sampler.stop.set()
        sampler.join()
        room.stop()
        if room.cgroups.enforced:
            try:
                room.cgroups.remove()   # empty once every learner's group is released
            except OSError:
                pass
    numbers.update({key: value for key, value in hs.numbers.items() if key.startswith("hub_")})
    numbers["no_process_left"] = True  # stop_hub exits otherwise

    alone = {nb["notebook"]: nb for nb in solo.rec["notebooks"]} if solo else {}
    for lrn in learners:
        rec = lrn.rec
        rec["peak_memory_mb"] = sampler.peak.get(lrn.name, {})
        for nb in rec["notebooks"]:
            base = alone.get(nb["notebook"])
            if base and base["kernel_seconds"] and nb["runs"] == 1:
                nb["vs_alone"] = round(nb["kernel_seconds"] / base["kernel_seconds"], 2)
        rec["fault"] = {k: v for k, v in (lrn.fault_state or {}).items()
                        if k in ("fault", "notebook", "cell", "recovered", "limit_hits_before",
                                 "limit_hits_after")} or None
        rec["kept"] = lrn.kept()
    if solo:
        numbers["solo"] = solo.rec
    recs = [lrn.rec for lrn in learners]
    numbers["per_learner"] = recs
    numbers["machine"] = {
        "used_mb_before": round(sampler.machine_used_at_start_mb),
        "peak_used_mb": round(sampler.machine_peak_used_mb),
        "peak_load_1min": round(sampler.load_peak_1min, 2),
        "mean_cpu_percent": round(sum(sampler.cpu) / max(1, len(sampler.cpu)), 1),
    }
    numbers["all_cells_passed"] = all(not nb["failed_cells"] for r in recs for nb in r["notebooks"]) and \
        all([nb["notebook"] for nb in r["notebooks"]] == r["plan"] and "error" not in r for r in recs) \
        and {nb for r in recs for nb in r["plan"]} == {os.path.basename(p) for p in PLAN}
    numbers["no_kernel_died_uncaused"] = not any(nb["kernel_died"] for r in recs for nb in r["notebooks"])
    if room.hub_restart:
        numbers["hub_restart"] = {"busy": room.hub_restart["busy"],
                                  "took_s": round(room.hub_restart["end"] - room.hub_restart["start"], 1)}
    numbers["every_fault_struck_and_recovered"] = all(
        lrn.fault_state and "cell" in lrn.fault_state and lrn.fault_state.get("recovered")
        for lrn in learners if lrn.fault) and (
        "hub-restart" not in faults or bool(room.hub_restart) and all(
            any(i["cause"] == "hub-restart" for i in lrn.rec["interruptions"])
            for lrn in learners if lrn.name in room.hub_restart["busy"]))
    numbers["nothing_lost"] = all(all(r["kept"].values()) for r in recs)
    report(numbers, solo, recs)
    for fn in ["numbers.json"] + ([f"numbers-{args.tag}.json"] if args.tag else []):
        with open(os.path.join(work, fn), "w") as f:
            json.dump(numbers, f, indent=1)
    log(f"numbers in {work}/numbers.json")
    ok = all(numbers[k] for k in ("all_cells_passed", "no_kernel_died_uncaused",
                                  "every_fault_struck_and_recovered", "nothing_lost"))
    return 0 if ok else 1


def report(numbers, solo, recs):
    short = [os.path.basename(p)[:2] for p in PLAN]
    print(f"{'learner':10} {'login s':>7} {'start s':>7} "
          + " ".join(f"{s + ' s (x alone)':>15}" for s in short)
          + f" {'failed':>6} {'peak RSS MB':>11} {'private MB':>10} {'charged MB':>10}  fault")
    for r in ([solo.rec] if solo else []) + recs:
        ran = {nb["notebook"][:2]: nb for nb in r["notebooks"]}   # a learner may skip 01
        cols = [f"{ran[s]['kernel_seconds']:>7} ({ran[s].get('vs_alone', '-'):>4}x)".rjust(15)
                if s in ran else "-".rjust(15) for s in short]
        failed = sum(len(nb["failed_cells"]) for nb in r["notebooks"])
        pk = r.get("peak_memory_mb", {})
        fault = r.get("fault") or {}
        print(f"{r['name']:10} {r.get('login_s', '-'):>7} {r.get('server_start_s', '-'):>7} " + " ".join(cols)
              + f" {failed:>6} {pk.get('rss', '-'):>11} {pk.get('private', '-'):>10} "
              + f"{r.get('peak_charged_mb', '-'):>10}  "
              + (f"{fault.get('fault')} at {fault.get('notebook')} cell {fault.get('cell')}" if fault else ""))
    for r in recs:
        for it in r["interruptions"]:
            print(f"  {r['name']}: {it['cause']} in {it['notebook']} ({it['what']}): back in {it['recovered_s']} s")
        for nb in r["notebooks"]:
            for f in nb["failed_cells"]:
                print(f"  {r['name']} {nb['notebook']} cell {f['cell']}: {f['error']} {f.get('value', '')}")
        if "error" in r:
            print(f"  {r['name']}: {r['error']}")
        print(f"  {r['name']} kept: {r['kept']}")
    m = numbers["machine"]
    print(f"machine: {numbers['cores']} cores, {numbers['memory_total_gb']} GB; used {m['used_mb_before']} MB before, "
          f"peak {m['peak_used_mb']} MB during the class; peak 1-min load {m['peak_load_1min']}, "
          f"mean CPU {m['mean_cpu_percent']} %; class wall time {numbers.get('class_wall_s')} s")
    for name, row in sorted(numbers.get("progress_view", {}).items()):
        print(f"  progress view: {name}: {row['status']}, {len(row['right'])}/{row['exercises']} right, "
              f"at {row['current'] or '-'} ({row['misses_in_a_row']} not yet in a row)")
    if numbers.get("hub_restart"):
        print(f"hub restarted in {numbers['hub_restart']['took_s']} s while "
              f"{', '.join(numbers['hub_restart']['busy'])} ran a cell")
    print(f"all cells passed: {numbers['all_cells_passed']}; no kernel died uncaused: "
          f"{numbers['no_kernel_died_uncaused']}; every fault struck and recovered: "
          f"{numbers['every_fault_struck_and_recovered']}; nothing lost: {numbers['nothing_lost']}; "
          "nothing left running: True")


if __name__ == "__main__":
    sys.exit(main())
