"""One JupyterHub for the hub tests: the classroom rehearsal's (bench/classroom.py), with the
strangers' attack rehearsal (test_strangers.py) run on it once it is up, before the class.

Starting a hub, its proxy and the learners' servers is most of what these tests cost, so they
share one: the strangers' learner01 and learner02 are the rehearsal's, their servers and
sign-ins the ones the class then goes on with.  The fixture runs the whole rehearsal (the hub
is stopped again at its end); each test then asserts its part of what happened."""
import io
import json
import os
import shutil
import socket
import sys
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from tests.support.child_python import ROOT

sys.path.insert(0, os.path.join(ROOT, "bench"))
import classroom  # noqa: E402  (bench/classroom.py)


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


@pytest.fixture(scope="session")
def class_hub():
    """(exit status, what the rehearsal printed, its numbers, what the strangers saw)."""
    from tests.hub.test_strangers import strangers_on_the_hub

    # Under the lab's build/, not pytest's temporary folder (root's alone): on a hub run as
    # root each learner is a Unix user of their own, whose home must be reachable.
    work = Path(ROOT) / "build" / "hub-classroom"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    strangers = {}
    printed = io.StringIO()
    argv = ["--learners", "3", "--think", "0", "--start-window", "0", "--no-baseline",
            # the faults strike in notebook 08, the quickest to run again (no TensorFlow) ...
            "--strike-in", "08", "--strike-after", "0.05",
            # ... and learner01 alone runs notebook 01 (TensorFlow): the others start at 04,
            # whose exercise arms their fault for 08's first cell
            "--tensorflow-learners", "1",
            "--port", str(free_port_block()), "--work", str(work)]
    try:
        with redirect_stdout(printed):
            status = classroom.main(argv, before_class=lambda room: strangers.update(
                strangers_on_the_hub(room)))
    finally:   # pytest shows it with the first test's report (each test's message has its end)
        print(printed.getvalue())
    numbers_file = work / "numbers.json"
    assert numbers_file.exists(), printed.getvalue()[-8000:]
    return status, printed.getvalue(), json.loads(numbers_file.read_text()), strangers
