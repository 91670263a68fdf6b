# JupyterHub configuration for `make hub` (hub/hub.mk, hub/README.md): this lab on this
# machine for a class (as root: each learner isolated) or a rehearsal.  Everything it writes
# lives under build/:
#   build/hub-state/           the hub's database, cookie secret, proxy pid, the passwords and
#                              (isolated) the roster and class sheet: root's alone
#   build/hub-homes/<name>/    each learner's home: their own notebooks/ (copied on first login)
# Settings come from the environment (hub/hub.mk passes them): HUB_IP, HUB_PORT, HUB_ADMIN,
# HUB_ROSTER or HUB_LEARNERS, HUB_ISOLATION, HUB_PASSWORD (a rehearsal's), HUB_CULL_SERVERS,
# HUB_MEM_LIMIT;
# IPU_HUB_STATE and IPU_HUB_HOMES move the two folders (bench/hub_smoke.py uses its own).
import glob
import json
import os
import secrets
import shutil
import socket
import sys

c = get_config()  # noqa: F821 (JupyterHub provides it)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Absolute, whatever the environment gives: a learner's home is their Unix account's home.
BUILD = os.path.abspath(os.environ.get("IPU_HUB_BUILD", os.path.join(REPO, "build")))
STATE = os.path.abspath(os.environ.get("IPU_HUB_STATE", os.path.join(BUILD, "hub-state")))
HOMES = os.path.abspath(os.environ.get("IPU_HUB_HOMES", os.path.join(BUILD, "hub-homes")))
LAB_VENV = os.path.abspath(os.environ.get("IPU_HUB_LAB_VENV", os.path.join(REPO, ".venv")))
OVERLAY = os.path.join(BUILD, "hub-singleuser-venv")
PROXY = os.path.join(BUILD, "hub-node", "node_modules", ".bin", "configurable-http-proxy")
os.makedirs(STATE, exist_ok=True)
os.makedirs(HOMES, exist_ok=True)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

# --- isolated (a class of strangers) or a rehearsal ---------------------------------------
# As root on Linux, each learner is a Unix user of their own with a login of their own
# (hub/isolation.py, hub/roster.py); HUB_ISOLATION=off keeps the rehearsal mode, where every
# server runs as the user who ran `make hub` (root, then: any learner is root on the machine).
ISOLATED = (os.getuid() == 0 and sys.platform.startswith("linux")
            and os.environ.get("HUB_ISOLATION", "on").lower() != "off")
if ISOLATED:
    import isolation  # noqa: E402  (hub/isolation.py)
    import roster  # noqa: E402  (hub/roster.py)

    missing = isolation.tools_missing()
    if missing:
        sys.exit(f"make hub: learners cannot be isolated here: this machine lacks "
                 f"{', '.join(missing)}. HUB_ISOLATION=off starts a rehearsal without "
                 f"isolation instead.")
    # The hub's state (database, cookie secret, passwords, roster) is root's alone; the homes'
    # folder lets each learner reach their own home, and list none.
    os.chmod(STATE, 0o700)
    os.chmod(HOMES, 0o711)

# --- where it listens -------------------------------------------------------------------
# 127.0.0.1 by default (a rehearsal); HUB_IP=0.0.0.0 lets the class's machines in.
IP = os.environ.get("HUB_IP", "127.0.0.1")
PORT = int(os.environ.get("HUB_PORT", "8000"))
c.JupyterHub.bind_url = f"http://{IP}:{PORT}"
# The proxy's API and the hub itself listen on 127.0.0.1 only, at JupyterHub's usual offsets
# from the public port (8001 and 8081 for 8000), so a second hub on another port can run.
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PORT + 1}"
c.JupyterHub.hub_port = PORT + 81
c.JupyterHub.db_url = "sqlite:///" + os.path.join(STATE, "jupyterhub.sqlite")
c.JupyterHub.cookie_secret_file = os.path.join(STATE, "jupyterhub_cookie_secret")
c.ConfigurableHTTPProxy.command = [PROXY]
c.ConfigurableHTTPProxy.pid_file = os.path.join(STATE, "jupyterhub-proxy.pid")

# --- login: the instructor's password; the learners' codes (isolated) or shared password ----
# Made once and kept in build/hub-state/passwords.json, so a restart keeps them.  Isolated: a
# roster with a code per learner (below).  A rehearsal: one shared password for the learners
# (HUB_PASSWORD sets it, at least 8 characters), with which anyone logs in under any name but
# the instructor's.
ADMIN = os.environ.get("HUB_ADMIN", "instructor")
PASSWORDS = os.path.join(STATE, "passwords.json")
if os.path.exists(PASSWORDS):
    with open(PASSWORDS) as f:
        passwords = json.load(f)
else:
    passwords = {"learners": secrets.token_urlsafe(9), "instructor": secrets.token_urlsafe(30)}
    with open(os.open(PASSWORDS, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        json.dump(passwords, f)
if os.environ.get("HUB_PASSWORD"):
    passwords["learners"] = os.environ["HUB_PASSWORD"]
c.Authenticator.admin_users = {ADMIN}
if ISOLATED:
    # A roster, each name with a code of its own (hub/roster.py), stored as bcrypt hashes in
    # JupyterHub's FirstUseAuthenticator's database before anyone signs in; no other name
    # can sign in.  HUB_ROSTER: a file of names; else HUB_LEARNERS numbered learners (40).
    names = roster.names_from(os.environ.get("HUB_ROSTER"), os.environ.get("HUB_LEARNERS", 40))
    if ADMIN in names:
        sys.exit(f"make hub: the roster names the instructor's login, {ADMIN!r}")
    class_codes = roster.load(STATE, names)
    DBM = os.path.join(STATE, "passwords.dbm")
    roster.seed_passwords(DBM, {**class_codes, ADMIN: passwords["instructor"]})
    c.JupyterHub.authenticator_class = "firstuseauthenticator.FirstUseAuthenticator"
    c.FirstUseAuthenticator.dbm_path = DBM
    c.FirstUseAuthenticator.create_users = False
    c.FirstUseAuthenticator.min_password_length = 8
    c.Authenticator.allowed_users = set(names)
    c.Authenticator.username_pattern = roster.NAME_PATTERN
else:
    c.JupyterHub.authenticator_class = "shared-password"
    c.SharedPasswordAuthenticator.user_password = passwords["learners"]
    c.SharedPasswordAuthenticator.admin_password = passwords["instructor"]
    c.Authenticator.allow_all = True
    # Names become folder names under build/hub-homes/: letters, digits, '.', '_' and '-'.
    c.Authenticator.username_pattern = r"^[a-z0-9][a-z0-9._-]{0,31}$"

# --- each learner's server ----------------------------------------------------------------
# Isolated: hub/isolation.py's spawner, each server a process of the learner's own Unix user,
# home under build/hub-homes/.  A rehearsal: SimpleLocalProcessSpawner, every server a process
# of the user who started the hub (NO ISOLATION: a learner's code can read, change or delete
# anyone's files and stop anyone's kernels).  Neither enforces a memory limit itself
# (Spawner.mem_limit is only passed on as $MEM_LIMIT); hub/memory_limit.py does, where the
# machine lets it (root on Linux with cgroups): HUB_MEM_LIMIT per learner, 1G by default (a
# learner's server and one TensorFlow kernel peaked at 0.82 GB in the rehearsal), 0 for none,
# with an equal CPU share and a process limit.
from jupyterhub.spawner import SimpleLocalProcessSpawner  # noqa: E402

import memory_limit  # noqa: E402  (hub/memory_limit.py)

MEM_LIMIT = os.environ.get("HUB_MEM_LIMIT", "1G").strip()
cgroups = None
if MEM_LIMIT not in ("", "0"):
    cgroups = memory_limit.MemoryCgroups(memory_limit.parse_size(MEM_LIMIT), f"ipu-lab-hub-{PORT}")
    c.Spawner.mem_limit = MEM_LIMIT


class MemoryLimitedSpawner(isolation.IsolatedSpawner if ISOLATED else SimpleLocalProcessSpawner):
    """The learner's server (isolated: as their own Unix user; in a rehearsal: as the hub's),
    with it (and so their kernels) in a memory cgroup of their own when the machine allows
    one, with an equal CPU share and a process limit where it has those controllers."""

    async def start(self):
        url = await super().start()
        if cgroups is not None and cgroups.enforced:
            cgroups.confine(self.pid, self.user.name)
        return url

    async def stop(self, now=False):
        await super().stop(now=now)
        if cgroups is not None and cgroups.enforced:
            import asyncio
            await asyncio.get_running_loop().run_in_executor(None, cgroups.release, self.user.name)


c.JupyterHub.spawner_class = MemoryLimitedSpawner
if ISOLATED:
    MemoryLimitedSpawner.home_root = HOMES
    # What each learner's account must reach, mounted back in their namespace if it lies under
    # a folder closed to others: the lab (its .venv, hub/, the course), the Python the .venv
    # was made from, the homes.
    MemoryLimitedSpawner.reachable = (REPO, LAB_VENV, isolation.python_prefix(
        os.path.join(LAB_VENV, "bin", "python")), HOMES)
    MemoryLimitedSpawner.private_tmp = not isolation.under_tmp(REPO, LAB_VENV, HOMES)
else:
    c.SimpleLocalProcessSpawner.home_dir_template = os.path.join(HOMES, "{username}")
c.Spawner.notebook_dir = os.path.join(HOMES, "{username}")
# The server runs on the lab's .venv Python (TensorFlow, the emulator, JupyterLab and its
# widgets), with `jupyterhub` from build/hub-singleuser-venv appended (hub/singleuser.py).
overlay_site = glob.glob(os.path.join(OVERLAY, "lib", "python3*", "site-packages"))
c.Spawner.cmd = [
    os.path.join(LAB_VENV, "bin", "python"),
    os.path.join(REPO, "hub", "singleuser.py"),
    overlay_site[0] if overlay_site else OVERLAY,
]
c.Spawner.args = ["--allow-root"] if os.getuid() == 0 and not ISOLATED else []
c.Spawner.default_url = "/lab/tree/notebooks/README.md"
# Each exercise check the learner runs is noted in their home (ipu_emulator.exercises.progress),
# where `make progress` reads it for the instructor.  Beside the notebooks, so it survives a
# kernel, server or hub restart; a dot-folder, so it stays out of the learner's file browser.
# The lab's bin/ first on PATH, as `make lab` does: the lab's server settings find the lab's
# TensorBoard there, which `%tensorboard` starts (docs/tensorboard.md).  The lab's server
# settings (kernel culling, TensorBoard through the server's proxy) are make lab's:
# jupyter/jupyter_server_config.py.
c.Spawner.environment = {
    "JUPYTER_CONFIG_PATH": os.path.join(REPO, "jupyter"),
    "IPU_LAB_PROGRESS_FILE": lambda spawner: os.path.join(spawner.home_dir, ".ipu-lab", "progress.jsonl"),
    "PATH": os.path.join(LAB_VENV, "bin") + os.pathsep + os.environ.get("PATH", os.defpath),
}
# A loaded machine starts servers slowly; Zero to JupyterHub allows 300 s.
c.Spawner.start_timeout = 180
c.Spawner.http_timeout = 120


# The image's entry point copies the course the same way (hub/image/start.py); one copy loop
# serves both.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "image"))
from start import copy_missing  # noqa: E402  (hub/image/start.py, standard library only)


async def copy_course(spawner):
    """Give the learner their own notebooks/ (and docs/, which the notebooks link to).

    A notebook is copied only when the learner has no file of that name: their edits are
    never overwritten, and notebooks added to the course later still reach them.  docs/ is
    reference text and is refreshed at every start.  Newly copied notebooks are trusted in the
    learner's own Jupyter data folder, so JupyterLab shows their stored traces at once.
    """
    import asyncio

    home = spawner.home_dir
    if ISOLATED:
        spawner.account()   # their account and private home, made on the first start
    copied = copy_missing(os.path.join(REPO, "notebooks"), os.path.join(home, "notebooks"))
    shutil.copytree(os.path.join(REPO, "docs"), os.path.join(home, "docs"), dirs_exist_ok=True)
    notebooks = [p for p in copied if p.endswith(".ipynb")]
    if notebooks:
        env = dict(os.environ, HOME=home)
        env.pop("JUPYTER_DATA_DIR", None)
        proc = await asyncio.create_subprocess_exec(
            os.path.join(LAB_VENV, "bin", "jupyter"), "trust", *notebooks, env=env,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        )
        await proc.wait()
    if ISOLATED:   # copied and trusted by root: the learner's own from now on
        isolation.give_to(spawner.account(), home)
    spawner.log.info("course for %s: %d new file(s) copied", spawner.user.name, len(copied))


c.Spawner.pre_spawn_hook = copy_course

# --- culling --------------------------------------------------------------------------------
# Kernels: inside each server, as `make lab` does (jupyter/jupyter_server_config.py).  Servers: a
# server with no activity for HUB_CULL_SERVERS seconds (default an hour) is stopped by
# jupyterhub-idle-culler; its files stay, and the learner's next visit starts it again.
CULL_SERVERS = int(os.environ.get("HUB_CULL_SERVERS", "3600"))
c.JupyterHub.services = [
    {
        "name": "idle-culler",
        # SIGINT, which the hub sends its services when it stops, ends the culler at once: as
        # `python -m jupyterhub_idle_culler` it outlived it, and Ctrl-C waited 10 s for the
        # hub's SIGTERM (JupyterHub's interrupt_timeout for services) before the servers stopped.
        "command": [sys.executable, "-c", "import signal; signal.signal(signal.SIGINT, "
                    "signal.SIG_DFL); from jupyterhub_idle_culler import main; main()",
                    f"--timeout={CULL_SERVERS}", f"--cull-every={max(60, CULL_SERVERS // 6)}"],
    }
]
c.JupyterHub.load_roles = [
    {
        "name": "idle-culler",
        "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        "services": ["idle-culler"],
    }
]

# --- what the instructor reads at start ------------------------------------------------------
host = socket.gethostname() if IP in ("", "0.0.0.0") else IP
RED, PLAIN = ("\033[1;31m", "\033[0m") if sys.stdout.isatty() else ("", "")
if ISOLATED:
    login_lines = [
        f"  learners: {len(names)} on the roster, each with a code of their own: the class sheet",
        f"      is {os.path.join(STATE, 'class-sheet.txt')} (readable by root alone)",
        "  isolated: each learner a Unix user of their own (jupyter-<name>), a private home "
        + ("and /tmp," if MemoryLimitedSpawner.private_tmp else "(TMPDIR: the lab is under /tmp),"),
        "      no access to the hub's state or to anyone else's work (hub/README.md)",
    ]
else:
    who = "root: any learner is root on this machine" if os.getuid() == 0 else \
        f"user {os.environ.get('USER', os.getuid())}: any learner can do what it can"
    login_lines = [
        f"  learners: any name (letters, digits, . _ -), password  {passwords['learners']}",
        f"{RED}  NO ISOLATION, A REHEARSAL ONLY: every server runs as {who};",
        "  any learner reads and changes everyone's work and can sign in as anyone",
        f"  (hub/README.md; as root, `make hub` isolates learners unless HUB_ISOLATION=off){PLAIN}",
    ]
print(
    "\n".join([
        "",
        "=" * 72,
        f"  IPU tutorial lab on JupyterHub:  http://{host}:{PORT}/",
        *login_lines,
        f"  instructor (admin, {c.JupyterHub.bind_url}/hub/admin): name '{ADMIN}', password",
        f"      {passwords['instructor']}",
        f"  homes: {HOMES}   (Ctrl-C stops the hub and every server; files stay)",
        "  memory per learner: " + (
            "no limit (HUB_MEM_LIMIT=0)" if cgroups is None else
            f"{MEM_LIMIT}, enforced (memory cgroup v{cgroups.version}, {cgroups.base})"
            if cgroups.enforced else f"no limit: {cgroups.reason}"),
        "=" * 72,
        "",
    ]),
    flush=True,
)
