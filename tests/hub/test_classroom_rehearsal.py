"""The classroom rehearsal on a real JupyterHub (bench/classroom.py), three learners, with the
faults a class meets: learner01's kernel killed mid-cell, learner02's cell over their memory
limit (where the hub can enforce one: root on Linux with memory cgroups, as on this machine),
learner03's server restarted mid-cell, then the hub restarted while someone's cell runs.  The
class runs the two-hour plan's notebooks with the exercises solved: learner01 all three (01
with TensorFlow, 04, 08), learner02 and learner03 04 and 08 (their faults strike in 08; a
TensorFlow import for each would only repeat learner01's: `--tensorflow-learners 1`).  Nothing
may be lost and the instructor's progress view must say who is where.

The hub is the one the strangers' attack rehearsal (test_strangers.py) ran on before the class
(conftest.py: one hub for the unit).  Needs `make hub-tools` (`make test` runs it first);
deselect with -m "not hub"."""
import os
import sys

import pytest

from tests.support.child_python import ROOT

sys.path.insert(0, os.path.join(ROOT, "hub"))
import memory_limit  # noqa: E402  (hub/memory_limit.py)

pytestmark = pytest.mark.hub

# Each notebook's exercises, and which of the plan's notebooks each learner runs.
EXERCISES = {"01": {"01.port-the-model"}, "04": {"04.break-even"},
             "08": {"08.fewest-in-flight", "08.bubble-below-10-percent"}}
RUNS = {"learner01": ["01", "04", "08"], "learner02": ["04", "08"], "learner03": ["04", "08"]}


@pytest.fixture(scope="module")
def rehearsal(class_hub):
    status, printed, numbers, _strangers = class_hub
    return status, printed[-4000:], numbers


def test_every_learner_ran_the_plan_through_the_faults(rehearsal):
    status, printed, numbers = rehearsal
    assert status == 0, printed
    learners = numbers["per_learner"]
    assert [r["name"] for r in learners] == ["learner01", "learner02", "learner03"]
    for r in learners:
        assert "error" not in r, r["error"]
        assert [nb["notebook"][:2] for nb in r["notebooks"]] == RUNS[r["name"]]
        assert all(not nb["failed_cells"] for nb in r["notebooks"]), r["notebooks"]
    # The class as a whole ran every notebook of the plan.
    assert {nb["notebook"] for r in learners for nb in r["notebooks"]} == set(numbers["plan"])
    assert numbers["all_cells_passed"] and numbers["no_kernel_died_uncaused"]


def memory_limit_here():
    """Whether a hub started here can enforce a memory limit (what its start banner says)."""
    probe = memory_limit.MemoryCgroups(2**30, f"ipu-lab-probe-{os.getpid()}")
    if probe.enforced:
        probe.remove()   # the probe made its (empty) groups: leave nothing behind
    return probe.enforced


def test_each_fault_struck_mid_cell_and_its_learner_ran_on(rehearsal):
    _status, _printed, numbers = rehearsal
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
    _status, _printed, numbers = rehearsal
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
    # (learner01's plan includes notebook 01's TensorFlow kernel.)
    assert learners["learner02"]["peak_charged_mb"] <= 1024
    for name in ("learner01", "learner03"):
        assert 0 < learners[name]["peak_charged_mb"] < 1024, learners[name]
    assert numbers["no_kernel_died_uncaused"]


def test_nothing_was_lost(rehearsal):
    _status, _printed, numbers = rehearsal
    kept = {r["name"]: r["kept"] for r in numbers["per_learner"]}
    # saved_edit: the edit each learner saved before their own fault is on disk; progress:
    # every exercise check noted before each fault (theirs, and the hub restart) is still there.
    assert kept["learner01"] == kept["learner02"] == {"notebooks": True, "saved_edit": True,
                                                      "progress": True}
    assert kept["learner03"] == {"notebooks": True, "progress": True,
                                 **({"saved_edit": True} if memory_limit_here() else {})}
    assert numbers["nothing_lost"] and numbers["no_process_left"]


def test_the_instructor_sees_who_is_where_and_who_is_stuck(rehearsal):
    _status, _printed, numbers = rehearsal
    view = numbers["progress_view"]
    assert sorted(view) == ["learner01", "learner02", "learner03"]
    for name, notebooks in RUNS.items():
        ran = set().union(*(EXERCISES[nb] for nb in notebooks))
        assert ran <= set(view[name]["right"]), view[name]
        # each learner's own: notebook 01's exercise only for the one who ran it
        assert ("01.port-the-model" in view[name]["right"]) == ("01" in notebooks), view[name]
    assert view["learner03"]["status"] == "stuck"
    assert view["learner03"]["current"] == "10.chunks-per-ipu"
    assert view["learner03"]["misses_in_a_row"] == 3
    assert view["learner01"]["status"] == view["learner02"]["status"] == "working"


def test_a_learners_kernel_finds_the_labs_tensorboard(rehearsal):
    """`%tensorboard` runs the lab's TensorBoard (TENSORBOARD_BINARY, from the lab's server
    settings: the hub puts the lab's bin/ on the server's PATH).  Its frame asks the learner's
    own server for TensorBoard (jupyter-server-proxy), under the server's path on the hub, as
    the lab's server settings say; a TensorBoard started from the learner's kernel answers
    there, through the hub, without TensorFlow loaded (0.5 GB less of the learner's memory)."""
    _status, _printed, numbers = rehearsal
    said = next(r for r in numbers["per_learner"] if r["name"] == "learner03")["went_wrong"]
    tensorboard = os.path.join(ROOT, '.venv', 'bin', 'ipu-lab-tensorboard')
    assert f"TENSORBOARD {tensorboard} /user/learner03/proxy/%PORT%/" in said, said
    # A TensorBoard the learner started answered at that path through the hub.
    assert "TENSORBOARD_PROXIED 200 True" in said, said
    assert "TENSORBOARD_WITHOUT_TENSORFLOW True" in said, said
