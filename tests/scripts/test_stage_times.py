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
