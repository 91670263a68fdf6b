"""Try `make hub` for real (issue 25) and print its numbers.  Not part of `make test`.

    .venv/bin/python bench/hub_smoke.py [--fresh-install] [--port 8040]

It starts `make hub` in the background on its own port, state and homes (build/hub-smoke/,
so it never touches a class's build/hub-state or build/hub-homes), then:
  1. logs two learners in through the hub's login form, gets each an API token, and starts
     their servers through the hub's REST API (time per learner);
  2. checks each sees their own copy of the notebooks, in their own home;
  3. runs the first code cells of notebook 01 (TensorFlow, through the emulator) in one
     learner's kernel over the Jupyter server's kernel API, and checks the kernel is the lab's
     .venv Python;
  4. measures each single-user server's memory (resident, private) and the kernel's;
  5. edits a learner's notebook through the contents API, stops the hub as Ctrl-C does
     (SIGINT to its process group), checks no server is left and the edit is on disk;
  6. starts the hub again, starts that learner's server, and checks the edit survived.
--fresh-install first removes the hub's tools (build/hub-venv, build/hub-singleuser-venv,
build/hub-node) and times their installation.  Numbers go to build/hub-smoke/numbers.json.
"""

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid

import requests

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(REPO, "build", "hub-smoke")
STATE = os.path.join(WORK, "state")
HOMES = os.path.join(WORK, "homes")
LEARNERS = ["alice", "bob"]
MARKER = "edited by alice before the hub restart"
NOTEBOOK = "notebooks/01_porting_a_simple_example.ipynb"
numbers = {}


def log(msg):
    print(f"[hub_smoke {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def check(cond, what):
    if not cond:
        raise SystemExit(f"FAILED: {what}")
    log(f"ok: {what}")


def start_hub(port, tag, names=LEARNERS):
    """`make hub` on ``port``, with ``names`` on its roster (an isolated hub, as root, admits
    them alone, each with a code of their own: ``password_of``)."""
    out = open(os.path.join(WORK, f"hub-{tag}.log"), "w")
    roster_file = os.path.join(WORK, "roster.txt")
    with open(roster_file, "w") as f:
        f.write("\n".join(names) + "\n")
    env = dict(os.environ, IPU_HUB_STATE=STATE, IPU_HUB_HOMES=HOMES, HUB_ROSTER=roster_file)
    t0 = time.monotonic()
    proc = subprocess.Popen(["make", "--no-print-directory", "hub", f"HUB_PORT={port}"], cwd=REPO,
                            env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    while True:
        try:
            if requests.get(url + "/hub/api/", timeout=2).status_code == 200:
                break
        except requests.ConnectionError:
            pass
        if proc.poll() is not None or time.monotonic() - t0 > 120:
            raise SystemExit(f"FAILED: the hub did not start (see {out.name})")
        time.sleep(0.2)
    numbers[f"hub_start_s_{tag}"] = round(time.monotonic() - t0, 2)
    log(f"hub up at {url} in {numbers[f'hub_start_s_{tag}']} s ({tag})")
    return proc, url


def stop_hub(proc, tag):
    """What Ctrl-C in the terminal does: SIGINT to the whole foreground process group.

    The hub returns once each server has stopped; a kernel the server was shutting down can
    take a moment longer to exit, so the learners' processes get 30 s to be gone."""
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    proc.wait(timeout=120)
    numbers[f"hub_stop_s_{tag}"] = round(time.monotonic() - t0, 2)
    log(f"hub stopped in {numbers[f'hub_stop_s_{tag}']} s ({tag})")
    while processes() and time.monotonic() - t0 < 30:
        time.sleep(0.1)
    left = processes()
    numbers[f"learner_processes_gone_s_{tag}"] = round(time.monotonic() - t0, 2)
    check(not left, f"no learner's process is left {numbers[f'learner_processes_gone_s_{tag}']} s "
                    f"after Ctrl-C ({sorted(left.values())})")


def password_of(name):
    """What ``name`` signs in with: their code on an isolated hub's roster, else the class's
    shared password (a rehearsal hub)."""
    roster_file = os.path.join(STATE, "roster.json")
    if os.path.exists(roster_file):
        return json.load(open(roster_file))[name]
    return json.load(open(os.path.join(STATE, "passwords.json")))["learners"]


def login(url, name, password):
    """The login form as a browser fills it, then an API token made with the login cookie."""
    s = requests.Session()
    page = s.get(url + "/hub/login")
    xsrf = re.search(r'name="_xsrf" value="([^"]+)"', page.text).group(1)
    r = s.post(url + "/hub/login", data={"username": name, "password": password, "_xsrf": xsrf},
               allow_redirects=False)
    check(r.status_code == 302, f"{name} logs in through the form (HTTP {r.status_code})")
    r = s.post(url + f"/hub/api/users/{name}/tokens", json={"note": "hub_smoke", "expires_in": 3600},
               headers={"X-XSRFToken": s.cookies.get("_xsrf", xsrf)})
    check(r.status_code == 201, f"{name} gets an API token (HTTP {r.status_code})")
    return {"Authorization": "token " + r.json()["token"]}


def start_server(url, name, headers):
    t0 = time.monotonic()
    r = requests.post(url + f"/hub/api/users/{name}/server", headers=headers)
    check(r.status_code in (201, 202), f"{name}'s server start requested (HTTP {r.status_code})")
    wait_ready(url, name, headers, t0 + 200)
    took = round(time.monotonic() - t0, 2)
    log(f"{name}'s server ready in {took} s")
    return took


def wait_ready(url, name, headers, deadline):
    """Until the hub calls ``name``'s server ready (SystemExit if it failed or is not ready by
    the monotonic ``deadline``).  It reads the spawn's progress stream, as the hub's own spawn
    page does: one request that ends when the server is ready, where asking for the user's
    model every 0.2 s cost the hub more CPU than anything else it did in a rehearsal."""
    while True:
        try:
            with requests.get(url + f"/hub/api/users/{name}/server/progress", headers=headers,
                              stream=True, timeout=max(1.0, deadline - time.monotonic())) as r:
                events = [json.loads(line[len(b"data:"):]) for line in r.iter_lines()
                          if line.startswith(b"data:")]
        except (requests.RequestException, ValueError):
            events = []   # the stream broke off (a loaded hub): ask the user's model below
        if any(event.get("failed") for event in events):
            raise SystemExit(f"FAILED: {name}'s server did not start: {events[-1]}")
        user = requests.get(url + f"/hub/api/users/{name}", headers=headers).json()
        server = user.get("servers", {}).get("")
        if server and server.get("ready"):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"FAILED: {name}'s server not ready in time")
        time.sleep(1)   # not starting yet (the request has not reached the spawner): again


def memory(pid):
    """Resident and private (clean + dirty) memory of one process, in MB."""
    status = open(f"/proc/{pid}/status").read()
    rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))
    rollup = open(f"/proc/{pid}/smaps_rollup").read()
    private = sum(int(v) for v in re.findall(r"Private_(?:Clean|Dirty):\s+(\d+)", rollup))
    return round(rss / 1024, 1), round(private / 1024, 1)


def processes():
    """{pid: (JUPYTERHUB_USER, cmdline)} of every process started for a learner."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        user = [e[len(b"JUPYTERHUB_USER="):].decode() for e in env if e.startswith(b"JUPYTERHUB_USER=")]
        if user and HOMES in " ".join(e.decode(errors="replace") for e in env):
            found[int(pid)] = (user[0], cmd)
    return found


async def run_cells(ws_url, headers, cells, timeout=240):
    """Run each source in the kernel over its websocket; return (outputs text, errors)."""
    from tornado.httpclient import HTTPRequest
    from tornado.websocket import websocket_connect

    ws = await websocket_connect(HTTPRequest(ws_url, headers=headers))
    texts, errors = [], []
    for source in cells:
        msg_id = uuid.uuid4().hex
        ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "msg_type": "execute_request", "username": "", "session": "s",
                       "version": "5.3"},
            "parent_header": {}, "metadata": {}, "channel": "shell",
            "content": {"code": source, "silent": False, "store_history": True,
                        "user_expressions": {}, "allow_stdin": False, "stop_on_error": True},
        }))
        t0 = time.monotonic()
        # Done when the reply (shell channel) and the kernel's "idle" (iopub, after the cell's
        # last output) have both come: the server forwards the two channels independently, so
        # under load the reply can overtake the cell's own output.
        replied = idle = False
        while not (replied and idle):
            raw = await asyncio.wait_for(ws.read_message(), timeout)
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg["msg_type"], msg["content"]
            if kind == "stream" and content["name"] == "stdout":
                texts.append(content["text"])
            elif kind == "error":
                errors.append(f"{content['ename']}: {content['evalue']}")
            elif kind == "execute_reply":
                replied = True
            elif kind == "status" and content.get("execution_state") == "idle":
                idle = True
        log(f"cell ran in {time.monotonic() - t0:.1f} s: {source.splitlines()[0][:60]!r}")
    ws.close()
    return "".join(texts), errors


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=8040)
    ap.add_argument("--fresh-install", action="store_true")
    args = ap.parse_args()
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)

    if args.fresh_install:
        for d in ("build/hub-venv", "build/hub-singleuser-venv", "build/hub-node"):
            shutil.rmtree(os.path.join(REPO, d), ignore_errors=True)
        t0 = time.monotonic()
        subprocess.run(["make", "--no-print-directory", "build/hub-venv/.installed-stamp",
                        "build/hub-node/node_modules/.bin/configurable-http-proxy"],
                       cwd=REPO, check=True, stdout=subprocess.DEVNULL)
        numbers["install_s"] = round(time.monotonic() - t0, 1)
        log(f"hub installed in {numbers['install_s']} s")

    hub, url = start_hub(args.port, "first")
    try:
        headers = {name: login(url, name, password_of(name)) for name in LEARNERS}
        for name in LEARNERS:
            numbers[f"server_start_s_{name}"] = start_server(url, name, headers[name])

        for name in LEARNERS:
            r = requests.get(url + f"/user/{name}/api/contents/notebooks", headers=headers[name])
            names = sorted(f["name"] for f in r.json()["content"] if f["name"].endswith(".ipynb"))
            check(len(names) == 13, f"{name} sees the 13 notebooks ({len(names)})")
            check(os.path.exists(os.path.join(HOMES, name, NOTEBOOK)), f"{name}'s copy is in {HOMES}/{name}")
            r = requests.get(url + f"/user/{name}/lab", headers=headers[name])
            check(r.status_code == 200 and "jupyterlab" in r.text.lower(), f"{name}'s JupyterLab page loads")
            sigs = os.path.join(HOMES, name, ".local", "share", "jupyter", "nbsignatures.db")
            check(os.path.exists(sigs), f"{name}'s copies are trusted in their own home")
        check(not os.path.samefile(os.path.join(HOMES, "alice", NOTEBOOK), os.path.join(HOMES, "bob", NOTEBOOK)),
              "alice's and bob's copies are different files")

        # A TensorFlow notebook's first code cells, in alice's kernel.
        h = headers["alice"]
        r = requests.post(url + "/user/alice/api/kernels", json={"name": "python3"}, headers=h)
        check(r.status_code == 201, f"alice's kernel starts (HTTP {r.status_code})")
        kernel = r.json()["id"]
        nb = json.load(open(os.path.join(HOMES, "alice", NOTEBOOK)))
        code = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"][:3]
        code.append("import sys, os; print('PYTHON', sys.executable); print('CWD', os.getcwd())")
        ws_url = url.replace("http", "ws") + f"/user/alice/api/kernels/{kernel}/channels"
        t0 = time.monotonic()
        out, errors = asyncio.run(run_cells(ws_url, h, code))
        numbers["notebook01_first_3_cells_s"] = round(time.monotonic() - t0, 1)
        check(not errors, f"notebook 01's first three code cells run in alice's kernel ({errors or 'no error'})")
        check(f"PYTHON {os.path.join(REPO, '.venv', 'bin', 'python')}" in out, "the kernel is the lab's .venv Python")

        procs = processes()
        servers = [cmd for user, cmd in procs.values() if "singleuser.py" in cmd]
        check(len(servers) == 2 and all("cull_idle_timeout=1800" in cmd for cmd in servers),
              "both servers run with the Makefile's kernel culling")
        hub_log = open(os.path.join(WORK, "hub-first.log")).read()
        check("(idle-culler@" in hub_log, "the idle-culler service polls the hub's API")
        for pid, (user, cmd) in sorted(procs.items()):
            role = "server" if "singleuser.py" in cmd else "kernel" if "ipykernel" in cmd else "other"
            rss, private = memory(pid)
            numbers[f"memory_mb_{user}_{role}"] = {"rss": rss, "private": private}
            log(f"{user} {role} pid {pid}: {rss} MB resident, {private} MB private")

        # alice edits her notebook (saved through the contents API, as JupyterLab saves).
        r = requests.get(url + f"/user/alice/api/contents/{NOTEBOOK}", headers=h)
        model = r.json()
        model["content"]["cells"].insert(0, {"cell_type": "markdown", "metadata": {}, "source": MARKER})
        r = requests.put(url + f"/user/alice/api/contents/{NOTEBOOK}", headers=h,
                         json={"type": "notebook", "format": "json", "content": model["content"]})
        check(r.status_code == 200, f"alice saves her edited notebook (HTTP {r.status_code})")
    finally:
        stop_hub(hub, "first")
    check(MARKER in open(os.path.join(HOMES, "alice", NOTEBOOK)).read(), "alice's edit is on disk")

    hub, url = start_hub(args.port, "restart")
    try:
        h = login(url, "alice", password_of("alice"))
        numbers["server_start_s_alice_restart"] = start_server(url, "alice", h)
        r = requests.get(url + f"/user/alice/api/contents/{NOTEBOOK}", headers=h)
        check(MARKER in json.dumps(r.json()["content"]), "alice's edit survived the hub restart")
        r = requests.get(url + "/user/alice/api/contents/notebooks", headers=h)
        check(len([f for f in r.json()["content"] if f["name"].endswith(".ipynb")]) == 13,
              "alice still has the 13 notebooks")
    finally:
        stop_hub(hub, "restart")

    with open(os.path.join(WORK, "numbers.json"), "w") as f:
        json.dump(numbers, f, indent=1)
    print(json.dumps(numbers, indent=1))
    log("PASSED")


if __name__ == "__main__":
    main()
