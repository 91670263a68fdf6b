"""Each learner a Unix user of their own, for `make hub` run as root on Linux.

A learner signed in as ``ada`` runs as the Unix account ``jupyter-ada`` (made on their first
start: no password, no login shell; the prefix keeps every name clear of the system's own
accounts, as The Littlest JupyterHub does), in a home only that account can open
(``build/hub-homes/ada``, mode 0700), with a /tmp of their own (a private mount namespace
whose /tmp is ``~/.tmp``; a lab Python installed under a folder closed to other users, such as
/root, or a lab cloned there, is mounted back alone in that namespace).  Their server, kernels and everything those start hold that
account's rights, with umask 077: no other learner's files, no hub state, no other process's
environment or signals; their /proc (mounted again in that namespace with ``hidepid=2``) shows
them their own processes alone, not who else runs what.  The server is started by root as
``unshare --mount`` (the private /tmp), then
``setpriv`` drops to the account, with no new privileges (no setuid program lifts them back),
and execs the server: one process id throughout, which the hub watches and stops as usual.
"""
import os
import pwd
import shlex
import shutil
import stat
import subprocess

from jupyterhub.spawner import LocalProcessSpawner

PREFIX = "jupyter-"
NOLOGIN = "/usr/sbin/nologin"


def account_name(learner):
    return PREFIX + learner


def ensure_account(learner, home):
    """The learner's account (made once) and their private home, owned by it: the pwd entry."""
    home = os.path.abspath(home)   # useradd refuses a relative home (a hub run from the repo)
    account = account_name(learner)
    try:
        entry = pwd.getpwnam(account)
    except KeyError:
        subprocess.run(["useradd", "--home-dir", home, "--no-create-home", "--shell", NOLOGIN,
                        "--user-group", "--comment", f"IPU lab learner {learner}", account],
                       check=True, capture_output=True, text=True)
        entry = pwd.getpwnam(account)
    for folder in (home, os.path.join(home, ".tmp")):
        os.makedirs(folder, exist_ok=True)
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        os.chmod(folder, 0o700)
    return entry


def give_to(entry, path):
    """Make everything under ``path`` (a learner's home) theirs: files the hub copied in."""
    for folder, dirs, files in os.walk(path):
        for name in [folder] + [os.path.join(folder, n) for n in dirs + files]:
            if os.lstat(name).st_uid != entry.pw_uid:
                os.lchown(name, entry.pw_uid, entry.pw_gid)


def unreachable_by_learners(path):
    """The first folder on the way to ``path`` (its real path: symbolic links followed) that
    other users cannot pass (no o+x); None when the learners' accounts can reach it."""
    parts = os.path.realpath(path).split(os.sep)
    for end in range(2, len(parts)):
        folder = os.sep.join(parts[:end])
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return folder
    return None


def python_prefix(python):
    """Where ``python`` (a virtual environment's) keeps the interpreter and standard library."""
    return subprocess.run([python, "-c", "import sys; print(sys.base_prefix)"], check=True,
                          capture_output=True, text=True).stdout.strip()


def reach(paths):
    """Shell lines, run as root in the learner's private mount namespace, that let the
    learner's account reach each of ``paths`` (the lab, its Python, the homes) lying under a
    folder closed to other users (a clone or a pyenv Python under /root): each such folder is
    covered by an empty one, and the paths under it alone are mounted back in their places.
    Nothing for the paths the accounts can reach as they are."""
    closed = {}
    real = sorted(set(map(os.path.realpath, paths)))
    outermost = [path for path in real    # a path inside another comes back with it
                 if not any(path.startswith(other + os.sep) for other in real)]
    for path in outermost:
        folder = unreachable_by_learners(os.path.join(path, "x"))
        if folder is not None:
            closed.setdefault(folder, []).append(path)
    lines = []
    for folder, inside in closed.items():
        staged = [f'"$s{k}"' for k in range(len(inside))]
        lines += [f's{k}="$(mktemp -d)" && mount --bind {shlex.quote(path)} {stage}'
                  for k, (path, stage) in enumerate(zip(inside, staged))]
        lines.append(f"mount -t tmpfs -o mode=0755,size=1m tmpfs {shlex.quote(folder)}")
        lines += [f"mkdir -p {shlex.quote(path)} && mount --move {stage} {shlex.quote(path)} "
                  f"&& rmdir {stage}" for path, stage in zip(inside, staged)]
    return "".join(line + " && " for line in lines)


class IsolatedSpawner(LocalProcessSpawner):
    """LocalProcessSpawner for learners who are Unix users of their own (``jupyter-<name>``),
    each in a private home and /tmp; ``home_root`` holds the homes."""

    home_root = ""
    reachable = ()   # what the learner's account must reach (``reach``): lab, Python, homes
    # A /tmp of their own, unless the lab or the homes live under /tmp (the mount would hide
    # them): then TMPDIR is their ~/.tmp, and the umask keeps their files in /tmp their own.
    private_tmp = True

    @property
    def home_dir(self):
        return os.path.join(self.home_root, self.user.name)

    def account(self):
        return ensure_account(self.user.name, self.home_dir)

    def make_preexec_fn(self, name):
        home = self.home_dir

        def preexec():   # still root here: the command below drops to the learner
            os.chdir(home)
        return preexec

    def user_env(self, env):
        entry = self.account()
        env.update(USER=entry.pw_name, LOGNAME=entry.pw_name, HOME=self.home_dir,
                   SHELL="/bin/bash",
                   TMPDIR="/tmp" if self.private_tmp else os.path.join(self.home_dir, ".tmp"))
        return env

    async def start(self):
        entry = self.account()
        drop = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}",
                "--init-groups", "--no-new-privs", "--"]
        # shell_cmd gets the server's command line as one argument ($1); sh binds the private
        # /tmp, then execs setpriv, which execs the server: the process id stays the hub's.
        # umask 077: what the learner writes, in /tmp or anywhere, is theirs alone to read.
        script = (reach(self.reachable)
                  + ('mount --bind "$0" /tmp && ' if self.private_tmp else '')
                  + "mount -t proc -o hidepid=2 proc /proc && "
                  + "umask 077 && exec " + " ".join(map(shlex.quote, drop))
                  + ' /bin/sh -c "exec $1"')
        self.shell_cmd = ["unshare", "--mount", "--propagation", "private", "--",
                          "/bin/sh", "-c", script, os.path.join(self.home_dir, ".tmp")]
        return await super().start()


def under_tmp(*paths):
    """Whether any of ``paths`` lies under /tmp (a private /tmp would hide it)."""
    return any(os.path.realpath(path).startswith("/tmp/") for path in paths)


def tools_missing():
    """The commands an isolated hub needs that this machine lacks."""
    return [tool for tool in ("useradd", "unshare", "setpriv", "mount") if not shutil.which(tool)]
