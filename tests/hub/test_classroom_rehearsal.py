"""The classroom rehearsal on a real JupyterHub (bench/classroom.py), three learners, with the
faults a class meets: learner01's kernel killed mid-cell, learner02's cell over their memory
limit (where the hub can enforce one: root on Linux with memory cgroups, as on this machine),
learner03's server restarted mid-cell, then the hub restarted while someone's cell runs.  Each learner runs the two-hour plan's notebooks (01, 04, 08)
with the exercises solved; nothing may be lost and the instructor's progress view must say who
is where.  Needs `make hub-tools` (`make test` runs it first); deselect with -m "not hub"."""
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.child_python import ROOT

sys.path.insert(0, os.path.join(ROOT, "hub"))
import memory_limit  # noqa: E402  (hub/memory_limit.py)

pytestmark = pytest.mark.hub

PLAN_EXERCISES = {"01.port-the-model", "04.break-even", "08.fewest-in-flight",
                  "08.bubble-below-10-percent"}


def free_port_block():
    """A port P with P, P+1 (the proxy's API) and P+81 (the hub) all free."""
    for port in range(8100, 8900, 7):
        try:
            for p in (port, port + 1, port + 81):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
    raise RuntimeError("no free block of ports for the hub")


@pytest.fixture(scope="module")
def rehearsal():
    # Under the lab's build/, not pytest's temporary folder (root's alone): on a hub run as
    # root each learner is a Unix user of their own, whose home must be reachable.
    work = Path(ROOT) / "build" / "hub-classroom"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    command = [sys.executable, os.path.join(ROOT, "bench", "classroom.py"), "--learners", "3",
               "--think", "0", "--start-window", "6", "--no-baseline",
               # the faults strike in notebook 08, the quickest to run again (no TensorFlow)
               "--strike-in", "08", "--strike-after", "0.05",
               "--port", str(free_port_block()), "--work", str(work)]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=840)
    numbers_file = work / "numbers.json"
    assert numbers_file.exists(), run.stdout[-4000:] + run.stderr[-4000:]
    return run, json.loads(numbers_file.read_text())


def test_every_learner_ran_the_plan_through_the_faults(rehearsal):
    run, numbers = rehearsal
    assert run.returncode == 0, run.stdout[-4000:]
    learners = numbers["per_learner"]
    assert [r["name"] for r in learners] == ["learner01", "learner02", "learner03"]
    for r in learners:
        assert "error" not in r, r["error"]
        assert [nb["notebook"][:2] for nb in r["notebooks"]] == ["01", "04", "08"]
        assert all(not nb["failed_cells"] for nb in r["notebooks"]), r["notebooks"]
    assert numbers["all_cells_passed"] and numbers["no_kernel_died_uncaused"]


def memory_limit_here():
    """Whether a hub started here can enforce a memory limit (what its start banner says)."""
    probe = memory_limit.MemoryCgroups(2**30, f"ipu-lab-probe-{os.getpid()}")
    if probe.enforced:
        os.rmdir(probe.base)   # the probe made its (empty) group: leave nothing behind
    return probe.enforced


def test_each_fault_struck_mid_cell_and_its_learner_ran_on(rehearsal):
    _run, numbers = rehearsal
    learners = {r["name"]: r for r in numbers["per_learner"]}
    expected = [("learner01", "kernel-kill"), ("learner02", "out-of-memory"),
                ("learner03", "server-restart")]
    if not memory_limit_here():
        expected = [("learner01", "kernel-kill"), ("learner02", "server-restart")]
    for name, fault in expected:
        struck = learners[name]["fault"]
        assert struck["fault"] == fault and struck["recovered"] and struck["cell"] >= 1, struck
        assert fault in [i["cause"] for i in learners[name]["interruptions"]]
    # The hub restart stopped every server while someone's cell ran; each of them ran on.
    busy = numbers["hub_restart"]["busy"]
    assert busy and set(busy) <= set(learners)
    for name in busy:
        assert "hub-restart" in [i["cause"] for i in learners[name]["interruptions"]]
    for r in learners.values():
        assert all(i["cause"] != "unexpected" for i in r["interruptions"]), r["interruptions"]
    assert numbers["every_fault_struck_and_recovered"]


def test_the_memory_limit_killed_only_the_learner_over_it(rehearsal):
    _run, numbers = rehearsal
    limit = numbers["memory_limit"]
    assert limit["enforced"] == memory_limit_here(), limit
    if not limit["enforced"]:
        assert limit["reason"] and "out-of-memory" not in numbers["faults"]
        return
    learners = {r["name"]: r for r in numbers["per_learner"]}
    oom = learners["learner02"]["fault"]
    assert oom["limit_hits_after"] > oom["limit_hits_before"] == 0   # the limit refused memory
    # What each learner's group was charged at most: the one over it at the limit, everyone
    # else under it for the whole plan (notebook 01's TensorFlow kernel included).
    assert learners["learner02"]["peak_charged_mb"] <= 1024
    for name in ("learner01", "learner03"):
        assert 0 < learners[name]["peak_charged_mb"] < 1024, learners[name]
    assert numbers["no_kernel_died_uncaused"]


def test_nothing_was_lost(rehearsal):
    _run, numbers = rehearsal
    kept = {r["name"]: r["kept"] for r in numbers["per_learner"]}
    # saved_edit: the edit each learner saved before their own fault is on disk; progress:
    # every exercise check noted before each fault (theirs, and the hub restart) is still there.
    assert kept["learner01"] == kept["learner02"] == {"notebooks": True, "saved_edit": True,
                                                      "progress": True}
    assert kept["learner03"] == {"notebooks": True, "progress": True,
                                 **({"saved_edit": True} if memory_limit_here() else {})}
    assert numbers["nothing_lost"] and numbers["no_process_left"]


def test_the_instructor_sees_who_is_where_and_who_is_stuck(rehearsal):
    _run, numbers = rehearsal
    view = numbers["progress_view"]
    assert sorted(view) == ["learner01", "learner02", "learner03"]
    for name in ("learner01", "learner02", "learner03"):
        assert PLAN_EXERCISES <= set(view[name]["right"]), view[name]
    assert view["learner03"]["status"] == "stuck"
    assert view["learner03"]["current"] == "10.chunks-per-ipu"
    assert view["learner03"]["misses_in_a_row"] == 3
    assert view["learner01"]["status"] == view["learner02"]["status"] == "working"


def test_a_learners_kernel_finds_the_labs_tensorboard(rehearsal):
    """`%tensorboard` runs the `tensorboard` command: the hub puts the lab's bin/ on PATH.  Its
    frame asks the learner's own server for TensorBoard (jupyter-server-proxy), under the
    server's path on the hub, as the lab's server settings say; a TensorBoard started from
    the learner's kernel answers there, through the hub."""
    _run, numbers = rehearsal
    said = next(r for r in numbers["per_learner"] if r["name"] == "learner03")["went_wrong"]
    tensorboard = os.path.join(ROOT, '.venv', 'bin', 'tensorboard')
    assert f"TENSORBOARD {tensorboard} /user/learner03/proxy/%PORT%/" in said, said
    # A TensorBoard the learner started answered at that path through the hub.
    assert "TENSORBOARD_PROXIED 200 True" in said, said
