"""A class of strangers on `make hub`: an attack rehearsal.

`make hub` run as root on Linux (as here) makes each learner a Unix user of their own with a
sign-in code of their own (hub/isolation.py, hub/roster.py).  learner02 works (a saved
notebook edit, an exercise's progress, a running kernel); learner01's kernel then tries what
testers tried against a class (issue 36): become root, read or change learner02's work, forge
their progress, read the hub's state and secrets, read other processes' environments, signal
learner02's kernel and server, the proxy and the hub, leave their own cgroup, open learner02's
server or stop it with their own token, repoint the proxy, start processes without end.  Each
attempt must fail, and learner02's work, progress and kernel must be as they were.  Signing in
as learner02 with learner01's code, or under a name the roster does not hold, must fail too.

Where the hub cannot isolate learners (not root), `make hub` must say so in its banner.

It runs on the classroom rehearsal's hub (conftest.py: one hub for the unit), once the hub is up
and before the class: learner01 and learner02 are two of the rehearsal's learners, whose
servers the class then goes on with.  Needs `make hub-tools`; deselect with -m "not hub"."""
import asyncio
import hashlib
import json
import os
import sys
import time

import pytest
import requests

from tests.support.child_python import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import hub_smoke as hs  # noqa: E402  (bench/hub_smoke.py: start, sign in, run cells)

pytestmark = pytest.mark.hub
ISOLATED = os.geteuid() == 0 and sys.platform.startswith("linux")
NOTEBOOK = "notebooks/00_how_an_ipu_runs_a_program.ipynb"

# learner01's kernel runs this: each attempt prints one JSON line {attempt: what happened}.
ATTACKS = r'''
import glob, json, os, signal, subprocess, urllib.request
STATE, HOMES, PORT, OTHER = {state!r}, {homes!r}, {port}, "learner02"
PIDS = {pids!r}
said = {{}}

def attempt(name, action):
    try:
        said[name] = "done: " + str(action())[:80]
    except Exception as error:
        said[name] = "refused: " + type(error).__name__

attempt("be root", lambda: "uid 0" if os.getuid() == 0 else 1 / 0)
attempt("read learner02's notebook", lambda: open(f"{{HOMES}}/{{OTHER}}/{notebook}").read(10))
attempt("change learner02's notebook", lambda: open(f"{{HOMES}}/{{OTHER}}/{notebook}", "a").write(" "))
attempt("forge learner02's progress", lambda: open(
    f"{{HOMES}}/{{OTHER}}/.ipu-lab/progress.jsonl", "a").write("{{}}\n"))
attempt("list learner02's kernels' connection files", lambda: os.listdir(
    f"{{HOMES}}/{{OTHER}}/.local/share/jupyter/runtime"))
for secret in ("roster.json", "passwords.json", "passwords.dbm", "jupyterhub_cookie_secret",
               "jupyterhub.sqlite", "class-sheet.txt"):
    attempt(f"read the hub's {{secret}}", lambda: open(f"{{STATE}}/{{secret}}", "rb").read(10))

def environments():
    read = [pid for pid in os.listdir("/proc") if pid.isdigit()
            and os.stat(f"/proc/{{pid}}").st_uid != os.getuid() and _readable(pid)]
    return "environments of " + ",".join(read) if read else 1 / 0

def _readable(pid):
    try:
        return bool(open(f"/proc/{{pid}}/environ", "rb").read())
    except OSError:
        return False

attempt("read other processes' environments (tokens)", environments)

def others_processes():
    seen = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{{pid}}").st_uid != os.getuid():
                seen.append(pid)
        except OSError:
            pass   # ended while listed
    return f"{{len(seen)}} processes" if seen else 1 / 0

attempt("see who else runs what (other users' processes)", others_processes)
for name, pid in PIDS.items():
    attempt(f"signal {{name}}", lambda: os.kill(pid, 0) or "allowed")
top = next(path for path in ("/sys/fs/cgroup/memory/cgroup.procs", "/sys/fs/cgroup/cgroup.procs")
           if os.path.exists(path))
attempt("leave my cgroup", lambda: open(top, "w").write(str(os.getpid())))
token = os.environ.get("JUPYTERHUB_API_TOKEN", "")

class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None   # a redirect (to the login page) is an answer of its own: refused

def ask(method, url, headers=None):
    request = urllib.request.Request(url, method=method, headers=headers or {{}})
    try:
        return f"HTTP {{urllib.request.build_opener(NoRedirect).open(request, timeout=10).status}}"
    except urllib.error.HTTPError as error:
        raise PermissionError(error.code)

mine = {{"Authorization": f"token {{token}}"}}
attempt("open learner02's server with my token", lambda: ask(
    "GET", f"http://127.0.0.1:{{PORT}}/user/{{OTHER}}/api/contents", mine))
attempt("stop learner02's server with my token", lambda: ask(
    "DELETE", f"http://127.0.0.1:{{PORT}}/hub/api/users/{{OTHER}}/server", mine))
attempt("repoint the proxy's route to learner02", lambda: ask(
    "POST", f"http://127.0.0.1:{{PORT + 1}}/api/routes/user/{{OTHER}}"))
attempt("gain privileges through a setuid program", lambda: (
    "no_new_privs off" if "NoNewPrivs:\t1" not in open("/proc/self/status").read() else 1 / 0))

def processes_without_end():
    started = []
    try:
        while len(started) < 1000:
            started.append(subprocess.Popen(["sleep", "60"]))
    except OSError:
        pass
    finally:
        for process in started:
            process.kill()
            process.wait()
    return f"{{len(started)}} processes" if len(started) >= 1000 else 1 / 0

attempt("start processes without end", processes_without_end)
print(json.dumps(said))
'''


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def run(url, name, headers, kernel, cells):
    ws = url.replace("http", "ws") + f"/user/{name}/api/kernels/{kernel}/channels"
    return asyncio.run(hs.run_cells(ws, headers, cells, timeout=120))


def new_kernel(url, name, headers):
    r = requests.post(url + f"/user/{name}/api/kernels", json={"name": "python3"},
                      headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["id"]


def process_of(name, needle):
    """The pid of the process of Unix user ``name`` whose command line holds ``needle``."""
    import pwd
    uid = pwd.getpwnam(name).pw_uid
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
            if os.stat(f"/proc/{pid}").st_uid == uid and needle in cmd:
                return int(pid)
        except OSError:
            continue
    raise LookupError(f"no process of {name} runs {needle}")


def hub_pids(port):
    """The hub's and the proxy's processes (root's), by their command lines."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "configurable-http-proxy" in cmd and f"--port {port}" in cmd:
            found["the proxy"] = int(pid)
        if "jupyterhub -f hub/jupyterhub_config.py" in cmd and "sh -c" not in cmd \
                and os.path.realpath(f"/proc/{pid}/cwd") == os.path.realpath(ROOT):
            found["the hub"] = int(pid)
    return found


def strangers_on_the_hub(room):
    """What learner01 and learner02 meet on the rehearsal's hub (``room``, bench/classroom.py's),
    before the class: every observation the tests below judge, or the error that stopped it."""
    seen = {}
    try:
        _strangers(room.url, room.port, seen)
    except BaseException as error:  # noqa: BLE001 (SystemExit too: hs.check; judged by the tests)
        seen["error"] = f"{type(error).__name__}: {error}"
    return seen


def refused(sign_in):
    try:
        sign_in()
    except SystemExit:   # hs.login's check: the form did not let them in
        return "refused"
    return "signed in"


def _strangers(url, port, seen):
    seen["banner"] = open(os.path.join(hs.WORK, "hub-classroom.log")).read()
    if not ISOLATED:   # what a rehearsal hub gives instead is said in its banner
        return
    seen["learner02 with learner01's code"] = refused(
        lambda: hs.login(url, "learner02", hs.password_of("learner01")))
    seen["mallory, not on the roster"] = refused(
        lambda: hs.login(url, "mallory", "a-password-of-my-own"))
    headers = {name: hs.login(url, name, hs.password_of(name))
               for name in ("learner01", "learner02")}
    seen["learner02 with their own code"] = "signed in"
    for name in headers:   # both servers start side by side, as a class's do
        r = requests.post(url + f"/hub/api/users/{name}/server", headers=headers[name])
        assert r.status_code in (201, 202), r.text
    for name in headers:
        hs.wait_ready(url, name, headers[name], time.monotonic() + 200)
    # learner02 works: a saved edit, an exercise's progress, a running kernel.
    theirs = new_kernel(url, "learner02", headers["learner02"])
    mine = None
    try:
        seen["learner02's work"] = run(url, "learner02", headers["learner02"], theirs, [
            "from ipu_emulator.exercises import nb00_primer as e\n"
            "print(e.check_superstep_cycles(max(e.TILE_CYCLES) + e.SYNC_CYCLES + "
            "e.EXCHANGE_CYCLES).ok)",
            "x = 41"])
        home = os.path.join(hs.HOMES, "learner02")
        files = [os.path.join(home, NOTEBOOK), os.path.join(home, ".ipu-lab", "progress.jsonl")]
        seen["learner02's files before"] = [sha(path) for path in files]
        seen["learner02's home mode"] = oct(os.stat(home).st_mode & 0o777)

        pids = {**hub_pids(port),
                "learner02's server": process_of("jupyter-learner02", "singleuser.py"),
                "learner02's kernel": process_of("jupyter-learner02", f"kernel-{theirs}")}
        seen["targets"] = sorted(pids)
        mine = new_kernel(url, "learner01", headers["learner01"])
        seen["attacks"] = run(url, "learner01", headers["learner01"], mine, [ATTACKS.format(
            state=hs.STATE, homes=hs.HOMES, port=port, pids=pids, notebook=NOTEBOOK)])
        seen["learner02's files after"] = [sha(path) for path in files]
        seen["learner02's kernel after"] = run(url, "learner02", headers["learner02"], theirs,
                                               ["print(x + 1)"])
    finally:   # the class starts with no kernel running (its memory figures are its own)
        for name, kernel in (("learner02", theirs), ("learner01", mine)):
            if kernel:
                requests.delete(url + f"/user/{name}/api/kernels/{kernel}", headers=headers[name])


@pytest.fixture(scope="module")
def hub(class_hub):
    _status, _printed, _numbers, seen = class_hub
    assert "error" not in seen, seen["error"]
    return seen


def test_only_the_roster_signs_in_each_with_their_own_code(hub):
    if not ISOLATED:   # not root: a rehearsal, and the banner says so
        assert "NO ISOLATION, A REHEARSAL ONLY" in hub["banner"]
        return
    assert "isolated: each learner a Unix user of their own" in hub["banner"]
    assert hub["learner02 with learner01's code"] == "refused"
    assert hub["mallory, not on the roster"] == "refused"
    assert hub["learner02 with their own code"] == "signed in"


def test_a_learners_kernel_cannot_reach_another_learner_the_hub_or_the_machine(hub):
    if not ISOLATED:   # what a rehearsal hub gives instead is said in its banner (above)
        assert "NO ISOLATION" in hub["banner"]
        return
    out, errors = hub["learner02's work"]
    assert errors == [] and "True" in out, (out, errors)
    assert hub["learner02's home mode"] == "0o700"
    assert hub["targets"] == sorted(["the hub", "the proxy", "learner02's server",
                                     "learner02's kernel"])
    out, errors = hub["attacks"]
    assert errors == [], errors
    said = json.loads(out.strip().splitlines()[-1])
    print(json.dumps(said, indent=1))
    assert len(said) == 23, said
    assert {attempt: outcome for attempt, outcome in said.items()
            if not outcome.startswith("refused")} == {}

    assert hub["learner02's files after"] == hub["learner02's files before"]
    out, errors = hub["learner02's kernel after"]
    assert (out.strip(), errors) == ("42", []), "learner02's kernel lost its state"
