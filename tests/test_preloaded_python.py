"""tests/support/preloaded_python.py: a child forked from the preloaded server behaves as a
fresh ``python -m module`` (or ``python -c code``) would (arguments, working directory,
environment, sys.path, output, exit code, exit handlers, a time limit), only with TensorFlow
imported already.
One server for the module (its TensorFlow import: about 3 s of CPU, once)."""
import json
import subprocess
import sys
import textwrap
import time

import pytest

from tests.support.child_python import ROOT, child_env
from tests.support.preloaded_python import PreloadedPython

PROBE = textwrap.dedent("""\
    import atexit, json, os, sys, threading, time
    print(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "path0": sys.path[0],
                      "path1": sys.path[1], "setting": os.environ.get("PROBE_SETTING"),
                      "main": __name__, "tensorflow_loaded": "tensorflow" in sys.modules}))
    print("to stderr", file=sys.stderr)
    # a thread still working when the module ends: the interpreter waits for it
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread done"))).start()
    atexit.register(lambda: print("atexit ran", flush=True))
    if "raise" in sys.argv:
        raise ValueError("the probe raised")
    sys.exit(int(sys.argv[1]))
    """)


@pytest.fixture(scope="module")
def server():
    preloaded = PreloadedPython(str(ROOT), child_env())
    yield preloaded
    preloaded.close()


@pytest.fixture
def probe_dir(tmp_path):
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "elsewhere").mkdir()
    return tmp_path


def fresh(args, cwd, env, command=("-m", "probe")):
    done = subprocess.run([sys.executable, *command, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("form", ["-m", "-c"])
def test_a_forked_child_behaves_as_a_fresh_one(server, probe_dir, form):
    env = child_env(PROBE_SETTING="seen", PYTHONPATH=probe_dir / "elsewhere")
    assert server.can_run(env)
    args = ["3", "an argument"]
    if form == "-m":      # python -m probe
        forked = server.run_module("probe", args, probe_dir, env, timeout=60)
        new = fresh(args, probe_dir, env)
    else:                 # python -c <the probe's code>
        forked = server.run_code(PROBE, args, probe_dir, env, timeout=60)
        new = fresh(args, probe_dir, env, command=("-c", PROBE))
    said = [json.loads(out.splitlines()[0]) for _, out, _ in (forked, new)]
    # the only difference allowed: TensorFlow is imported already in the fork
    assert said[0].pop("tensorflow_loaded") is True and said[1].pop("tensorflow_loaded") is False
    assert said[0] == said[1] == {"argv": args, "cwd": str(probe_dir),
                                  "path0": str(probe_dir) if form == "-m" else "",
                                  "path1": str(probe_dir / "elsewhere"),
                                  "setting": "seen", "main": "__main__"}
    for returncode, out, err in (forked, new):
        assert returncode == 3
        assert out.splitlines()[1:] == ["thread done", "atexit ran"]
        assert err.strip() == "to stderr"


def test_an_exception_ends_it_with_1_and_the_traceback_on_stderr(server, probe_dir):
    returncode, out, err = server.run_module("probe", ["0", "raise"], probe_dir, child_env(),
                                             timeout=60)
    assert returncode == 1 and "ValueError: the probe raised" in err and "Traceback" in err
    assert fresh(["0", "raise"], probe_dir, child_env())[0] == 1


def test_a_child_over_its_time_is_stopped_with_what_it_started(server, tmp_path):
    marker = tmp_path / "grandchild.pid"
    (tmp_path / "sleeper.py").write_text(textwrap.dedent(f"""\
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
        open({str(marker)!r}, "w").write(str(child.pid))
        time.sleep(120)
        """))
    started = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired):
        server.run_module("sleeper", [], tmp_path, child_env(), timeout=5)
    assert time.monotonic() - started < 30
    grandchild = int(marker.read_text())
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = open(f"/proc/{grandchild}/stat").read().split()[2]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail("the timed-out child's own child still runs")
    # the server serves the next child as before
    (tmp_path / "quick.py").write_text("print('next')")
    assert server.run_module("quick", [], tmp_path, child_env(), timeout=60)[:2] == (0, "next\n")


def test_a_setting_read_at_start_up_asks_for_a_new_process(server):
    assert not server.can_run(child_env(TF_ENABLE_ONEDNN_OPTS="0"))
    assert not server.can_run(child_env(PYTHONHASHSEED="1"))
    assert server.can_run(child_env(IPU_EMULATOR_DATA="full", PYTHONPATH="/somewhere"))
