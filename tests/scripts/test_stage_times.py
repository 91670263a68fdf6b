"""scripts/stage_times.py: each stage of `make test` keeps its command's exit status and its
wall time, and the report lists the stages of this run only."""
import importlib.util
import sys

from tests.support.child_python import ROOT

spec = importlib.util.spec_from_file_location("stage_times", ROOT / "scripts" / "stage_times.py")
stage_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stage_times)


def test_a_stage_keeps_its_status_and_the_report_lists_only_this_runs_stages(tmp_path,
                                                                              monkeypatch):
    log = tmp_path / "build" / "stage_times.tsv"
    log.parent.mkdir()
    log.write_text("100.000\tan earlier run\t5.0\t0\n")
    monkeypatch.setattr(stage_times, "LOG", log)

    since = 1000.0
    monkeypatch.setattr(stage_times.time, "time", iter([1000.5, 1003.0, 1010.0]).__next__)
    status = stage_times.main(["run", "sleepy stage", "--", sys.executable, "-c",
                               "raise SystemExit(3)"])

    assert status == 3
    assert stage_times.stages_since(since) == [("sleepy stage", 2.5, 3)]
    report = stage_times.report(since)
    assert "an earlier run" not in report
    assert "sleepy stage" in report and "2.5 s   (exit status 3)" in report
    assert "total, from the start of make" in report and "10.0 s" in report


def test_the_report_names_the_cpu_and_the_ten_slowest_units_of_this_run(tmp_path, monkeypatch):
    from types import SimpleNamespace
    from tests.support.unit_times import UnitTimes
    units_log = tmp_path / "test_units.tsv"
    monkeypatch.setattr(stage_times, "LOG", tmp_path / "stage_times.tsv")
    monkeypatch.setattr(stage_times, "UNITS", units_log)
    times = UnitTimes(lambda nodeid: nodeid.split("::")[0], log=units_log)
    for number in range(12):   # twelve units, unit k's two tests taking k + 1 s in all
        for phase in ("setup", "call"):
            times.pytest_runtest_logreport(SimpleNamespace(
                nodeid=f"tests/test_{number:02}.py::test_a", duration=(number + 1) / 2,
                cpu_seconds=number / 4))
    times.pytest_runtest_logreport(SimpleNamespace(nodeid="tests/test_11.py::test_b",
                                                   duration=3.0, cpu_seconds=2.0))
    times.pytest_sessionfinish(SimpleNamespace(config=SimpleNamespace()))

    report = stage_times.report(since=0.0)
    assert "CPU: " in report
    listed = [line.split() for line in report.splitlines() if line.startswith("  ") and
              "(" in line and "tests)" in line]
    assert [row[5] for row in listed] == [f"tests/test_{n:02}.py" for n in range(11, 1, -1)]
    assert listed[0][:5] == ["15.0", "s", "7.5", "s", "CPU"]   # 2.75 + 2.75 + 2.0
    assert listed[0][6:] == ["(2", "tests)"]
    assert "CPU by layer" in report   # twelve units of 0, 0.5, ... 5.5 s of CPU, +2 s: 35 s
    assert "     35.0 s  100 %  other" in report
    # a units file older than this run is not this run's
    assert "slowest test units" not in stage_times.report(since=units_log.stat().st_mtime + 1)


def test_the_cpu_a_test_uses_travels_on_its_report_with_its_childrens(tmp_path):
    """The process that runs a test measures each phase's CPU, a waited-for child's included
    (about a second: one small pytest run)."""
    import subprocess
    (tmp_path / "conftest.py").write_text(
        "from tests.support.unit_times import UnitTimes\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(UnitTimes(str), 'unit_times')\n"
        "def pytest_runtest_logreport(report):\n"
        "    if report.when == 'call':\n"
        "        print('\\n@cpu', report.nodeid, round(report.cpu_seconds, 2))\n")
    (tmp_path / "test_spending.py").write_text(
        "import subprocess, sys\n"
        "def test_idle():\n    pass\n"
        "def test_busy_child():\n"
        "    spin = 'import time\\nwhile time.process_time() < 0.6: pass'\n"
        "    subprocess.run([sys.executable, '-c', spin], check=True)\n")
    run = subprocess.run([sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider",
                          "-p", "no:xdist", "-p", "no:nbval", "--rootdir", str(tmp_path),
                          str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert run.returncode == 0, run.stdout[-2000:]
    cpu = {line.split()[1].split("::")[1]: float(line.split()[2])
           for line in run.stdout.splitlines() if line.startswith("@cpu")}
    assert cpu["test_idle"] < 0.1 and cpu["test_busy_child"] >= 0.6


def test_a_pytest_xdist_worker_leaves_the_units_to_the_controller(tmp_path):
    from types import SimpleNamespace
    from tests.support.unit_times import UnitTimes
    times = UnitTimes(lambda nodeid: nodeid, log=tmp_path / "test_units.tsv")
    times.pytest_runtest_logreport(SimpleNamespace(nodeid="tests/test_a.py::t", duration=1.0))
    times.pytest_sessionfinish(SimpleNamespace(config=SimpleNamespace(workerinput={})))
    assert not (tmp_path / "test_units.tsv").exists()


def test_the_cpu_model_names_its_widest_vector_instructions(tmp_path):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu avx avx2\n\n"
                       "processor\t: 1\nmodel name\t: AMD EPYC 7B13\nflags\t\t: fpu avx avx2\n")
    assert stage_times.cpu_model(cpuinfo) == "AMD EPYC 7B13, 2 cores, AVX2"


def test_each_unit_counts_towards_one_layer_and_the_shares_add_up():
    rows = [(9.0, "notebooks/03_tf2_infeed_outfeed.ipynb", 40, 6.0), (5.0, "browser", 26, 1.0),
            (4.0, "tests/emulator/code_exercises/test_nb02_loops.py", 9, 3.0),
            (3.0, "tests/emulator/programs/test_compile.py", 9, 2.0),
            (1.0, "ipu_emulator/sim/schedules.py", 4, 0.5), (1.0, "tests/views/test_svg.py", 9, 0.5),
            (0.5, "tests/notebooks/test_kernel_paths.py::test_a", 1, 1.0)]
    shares = dict(stage_times.layer_shares(rows))
    assert shares == {"notebooks run by nbval": 6.0,
                      "JupyterLab and the JupyterLite site in Chromium": 1.0,
                      "code exercises' checks": 3.0, "the emulator under TF1": 2.0,
                      "pure layers (simulator, views, widgets, exercises)": 1.0,
                      "scripts, stored notebooks, kernel paths": 1.0}
    assert [layer for layer, _ in stage_times.layer_shares(rows)][0] == "notebooks run by nbval"
