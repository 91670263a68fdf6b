"""A memory limit per learner for `make hub`, enforced by the Linux kernel's memory cgroups.

JupyterHub's local spawners cannot enforce `Spawner.mem_limit` (they only pass it on as
$MEM_LIMIT).  A hub running as root on Linux can: each learner's server is moved into a memory
cgroup of its own right after it starts, with the limit set, and every kernel the server starts
is born inside it.  A learner who goes over their limit then loses their largest process (their
kernel: Jupyter starts a new one and says "Kernel Restarting"); the other learners keep theirs.

Where it works: cgroup v1's memory hierarchy (the learner's group is made inside the hub's own
memory cgroup), or cgroup v2 when the hub runs in the root cgroup with the memory controller
available.  Anywhere else (not root, no writable cgroup, no memory controller) `reason` says
why and nothing is limited.  Standard library only: the hub's own Python runs it.

    >>> parse_size("1G"), parse_size("512M"), parse_size("2048")
    (1073741824, 536870912, 2048)
"""
import os
import time

UNITS = {"K": 1, "M": 2, "G": 3, "T": 4}
# Processes a learner may hold at once (their server, kernels and what those start): a fork
# bomb stops there, far above what the notebooks need (about 30 with a TensorFlow kernel).
PIDS_MAX = 512


def parse_size(text):
    """Bytes in a Jupyter-style size: a number with K, M, G or T (powers of 1024) or none."""
    text = str(text).strip().upper()
    if text[-1:] in UNITS:
        return int(float(text[:-1]) * 1024 ** UNITS[text[-1]])
    return int(text)


def own_cgroup(hierarchy, proc_cgroup="/proc/self/cgroup"):
    """This process's path in a cgroup v1 hierarchy ("memory"), or in cgroup v2 ("")."""
    with open(proc_cgroup) as f:
        for line in f:
            _id, controllers, path = line.rstrip("\n").split(":", 2)
            if (hierarchy and hierarchy in controllers.split(",")) or (not hierarchy and _id == "0"):
                return path
    return None


def unified_hierarchy(root="/sys/fs/cgroup"):
    """Where cgroup v2 is mounted under ``root`` (``root`` itself, or its ``unified`` beside
    the v1 hierarchies), or None."""
    return next((d for d in (root, os.path.join(root, "unified"))
                 if os.path.isfile(os.path.join(d, "cgroup.controllers"))), None)


class MemoryCgroups:
    """One memory cgroup per learner, inside a group for this hub (``group``)."""

    def __init__(self, limit_bytes, group, root="/sys/fs/cgroup", proc_cgroup="/proc/self/cgroup"):
        self.limit_bytes = limit_bytes
        self.group, self.root, self.proc_cgroup = group, root, proc_cgroup
        self.base, self.version, self.reason = None, None, None
        self.v2_controllers = []   # under cgroup v2: the controllers learners' groups get
        try:
            self._find(root, group, proc_cgroup)
        except OSError as error:
            self.base, self.reason = None, f"cannot make a memory cgroup ({error})"

    def _find(self, root, group, proc_cgroup):
        v1 = os.path.join(root, "memory")
        own = own_cgroup("memory", proc_cgroup)
        if own is not None and os.path.isfile(os.path.join(v1, "memory.limit_in_bytes")):
            self.base, self.version = os.path.join(v1, own.lstrip("/"), group), 1
        else:
            own = own_cgroup("", proc_cgroup)
            v2 = unified_hierarchy(root)
            if v2 is None or own is None:
                self.reason = "this machine has no memory cgroup hierarchy"
                return
            with open(os.path.join(v2, "cgroup.controllers")) as f:
                available = f.read().split()
            if "memory" not in available:
                self.reason = "cgroup v2 here has no memory controller"
                return
            if own != "/":
                # v2 lets a group hand the memory controller to its children only when it holds
                # no process itself, and the hub's own group holds the hub.
                self.reason = "under cgroup v2 the hub must run in the root cgroup"
                return
            self.v2_controllers = [c for c in ("memory", "cpu", "pids") if c in available]
            wanted = " ".join(f"+{c}" for c in self.v2_controllers)
            with open(os.path.join(v2, "cgroup.subtree_control"), "w") as f:
                f.write(wanted)
            self.base, self.version = os.path.join(v2, group), 2
        os.makedirs(self.base, exist_ok=True)
        if self.version == 2:
            with open(os.path.join(self.base, "cgroup.subtree_control"), "w") as f:
                f.write(wanted)

    @property
    def enforced(self):
        return self.base is not None

    def path(self, learner):
        return os.path.join(self.base, learner)

    def confine(self, pid, learner):
        """Put process ``pid`` (a learner's server, before it starts any kernel) in the
        learner's group, with the limit; and, where the machine has those controllers, in a
        group with an equal CPU share (one learner's many busy processes weigh as much as
        another's one) and at most ``PIDS_MAX`` processes (``shared_limits``)."""
        group = self.path(learner)
        os.makedirs(group, exist_ok=True)
        limit_file = "memory.limit_in_bytes" if self.version == 1 else "memory.max"
        with open(os.path.join(group, limit_file), "w") as f:
            f.write(str(self.limit_bytes))
        with open(os.path.join(group, "cgroup.procs"), "w") as f:
            f.write(str(pid))
        for limits, values in self.shared_limits(learner):
            os.makedirs(limits, exist_ok=True)
            for name, value in values.items():
                with open(os.path.join(limits, name), "w") as f:
                    f.write(str(value))
            if limits != group:
                with open(os.path.join(limits, "cgroup.procs"), "w") as f:
                    f.write(str(pid))

    def shared_limits(self, learner):
        """(group, {file: value}) for the CPU share and the process count the learner's group
        gets where the controllers exist: under cgroup v2 in the learner's memory group, under
        v1 in a group of the same name in the cpu and pids hierarchies."""
        if self.version == 2:
            controllers = self.v2_controllers
            values = {**({"cpu.weight": 100} if "cpu" in controllers else {}),
                      **({"pids.max": PIDS_MAX} if "pids" in controllers else {})}
            return [(self.path(learner), values)] if values else []
        found = []
        for hierarchy, values in (("cpu", {"cpu.shares": 1024}), ("pids", {"pids.max": PIDS_MAX})):
            own = own_cgroup(hierarchy, self.proc_cgroup)
            top = os.path.join(self.root, hierarchy)
            # (the root group of a v1 hierarchy has no pids.max: its cgroup.procs says it is there)
            if own is not None and os.path.isfile(os.path.join(top, "cgroup.procs")):
                found.append((os.path.join(top, own.lstrip("/"), self.group, learner), values))
        return found

    def release(self, learner, wait_s=5.0):
        """Remove the learner's group once its processes are gone (a kernel can outlive its
        server by a moment); a group still busy after ``wait_s`` is left for the next start."""
        deadline = time.monotonic() + wait_s
        groups = {self.path(learner), *(limits for limits, _ in self.shared_limits(learner))}
        for group in groups:
            while os.path.isdir(group):
                try:
                    os.rmdir(group)
                except OSError:
                    if time.monotonic() > deadline:
                        return False
                    time.sleep(0.1)
        return True

    def remove(self):
        """Remove the hub's own groups, once every learner's is released: its memory group and,
        under cgroup v1, the groups of the same name the learners' CPU shares and process
        limits went into (``shared_limits``).  A group still in use is left, the others are
        removed, then the first such OSError is raised."""
        if not self.enforced:
            return
        own_groups = {os.path.dirname(limits) for limits, _ in self.shared_limits("any learner")}
        in_use = None
        for group in sorted(own_groups | {self.base}):
            try:
                if os.path.isdir(group):
                    os.rmdir(group)
            except OSError as error:
                in_use = in_use or error
        if in_use is not None:
            raise in_use

    def limit_hits(self, learner):
        """How often the learner's group refused memory: cgroup v1's failcnt, v2's oom_kill
        count (OSError when the group is gone)."""
        with open(os.path.join(self.path(learner),
                               "memory.failcnt" if self.version == 1 else "memory.events")) as f:
            text = f.read()
        if self.version == 1:
            return int(text)
        return int(dict(line.split() for line in text.splitlines()).get("oom_kill", 0))

    def peak_bytes(self, learner):
        """The most memory the learner's group has been charged since it was made (its server's
        last start): what the limit is measured against, shared pages counted once per machine."""
        peak_file = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        with open(os.path.join(self.path(learner), peak_file)) as f:
            return int(f.read())
