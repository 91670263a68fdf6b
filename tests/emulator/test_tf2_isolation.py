"""The TF2 child process: one run, bounded in time, whatever happens to it."""
import os
import subprocess

from tests.support import tf2_isolation


def test_a_hung_child_is_stopped_once_and_every_proxy_fails_at_once(tmp_path, monkeypatch):
    # A child test that would hang for ten minutes, and a grandchild that keeps the child's
    # output open: both must be stopped at the bound.
    (tmp_path / "test_hangs.py").write_text(
        "import subprocess, sys, time\n"
        "def test_hangs():\n"
        "    subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "    print('started', flush=True)\n"
        "    time.sleep(600)\n"
        "def test_never_reached():\n"
        "    pass\n")
    monkeypatch.setenv("IPU_EMULATOR_TF2_TIMEOUT_S", "5")
    launches = []
    real_popen = subprocess.Popen

    def counting_popen(*args, **kwargs):
        launches.append(args)
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(tf2_isolation.subprocess, "Popen", counting_popen)
    runner = tf2_isolation._ChildRun(tmp_path, ["test_hangs.py::test_hangs",
                                                "test_hangs.py::test_never_reached"])
    assert runner.outcome("test_hangs.py::test_hangs") is None
    assert runner.outcome("test_hangs.py::test_never_reached") is None
    assert len(launches) == 1  # the second proxy did not start the child again
    assert "stopped after 5 s (IPU_EMULATOR_TF2_TIMEOUT_S)" in runner.child_output


def test_the_child_reports_each_outcome(tmp_path, monkeypatch):
    (tmp_path / "conftest.py").write_text(
        "import tf2_isolation\n"
        "def pytest_runtest_logreport(report):\n"
        "    tf2_isolation.report_to_parent(report)\n")
    (tmp_path / "test_two.py").write_text(
        "def test_passes():\n    pass\n"
        "def test_fails():\n    assert 1 == 2, 'one is not two'\n")
    here = os.path.dirname(os.path.abspath(tf2_isolation.__file__))
    monkeypatch.setenv("PYTHONPATH", here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    runner = tf2_isolation._ChildRun(tmp_path, ["test_two.py"])
    assert runner.outcome("test_two.py::test_passes") == ("passed", "")
    status, text = runner.outcome("test_two.py::test_fails")
    assert status == "failed" and "one is not two" in text
