"""hub/isolation.py's account making, in the hub's own environment (build/hub-venv, which has
JupyterHub): the learner's account is made with an absolute home, whatever path the hub was
given (useradd refuses a relative one: a class run with a relative IPU_HUB_HOMES could not
start a single server)."""
import json
import os
import subprocess

import pytest

from tests.hub.test_roster import HUB_PYTHON
from tests.support.child_python import ROOT

MAKE_AN_ACCOUNT = r'''
import json, os, pwd, subprocess, sys
sys.path.insert(0, sys.argv[1])
import isolation

calls, made = [], []
def run(command, **options):
    calls.append(command)
    made.append(True)
    return subprocess.CompletedProcess(command, 0, "", "")
def getpwnam(name):
    if not made:
        raise KeyError(name)
    return pwd.struct_passwd((name, "x", 4242, 4242, "", "", "/usr/sbin/nologin"))
isolation.subprocess.run, isolation.pwd.getpwnam = run, getpwnam
isolation.os.chown = lambda *args: None
isolation.ensure_account("ada", os.path.join("homes", "ada"))
print(json.dumps(calls))
'''

# It runs in the hub's environment, which `make test` builds only with the hub's tests
# (PYTEST_ARGS='-m "not hub"' leaves both out).
pytestmark = pytest.mark.hub


def test_a_learners_account_gets_an_absolute_home_from_a_relative_path(tmp_path):
    ran = subprocess.run([HUB_PYTHON, "-c", MAKE_AN_ACCOUNT, os.path.join(ROOT, "hub")],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    [useradd] = json.loads(ran.stdout)
    home = useradd[useradd.index("--home-dir") + 1]
    assert home == str(tmp_path / "homes" / "ada"), useradd
    assert oct((tmp_path / "homes" / "ada").stat().st_mode & 0o777) == oct(0o700)
