"""``python -m ipu_emulator simulate``: JSON facts, text output, errors, the size limit, no
TensorFlow."""
import argparse
import json
import textwrap

import pytest

from ipu_emulator.cli import simulate as simulate_command
from ipu_emulator.sim import pipeline_simulator, schedules
from tests.support.child_python import REPORTER, run_python

# --- through ``python -m ipu_emulator simulate``, in one child process --------------------
#
# Every command line the tests below run, in one child: each runs as ``python -m ipu_emulator``
# would run it (runpy, its own stdout, stderr and exit code), and at the end the child says
# whether anything it did imported TensorFlow.  A test asking for a command line missing here
# fails with a KeyError naming it.

MODEL = ("--model", "tutorial-mlp")
CHILD_COMMAND_LINES = [
    *[("--stages", "4", "--micro-batches", "8", "--schedule", schedule, "--unit-cost", "--json")
      for schedule in ("grouped", "interleaved")],
    (*MODEL, "--splits", "dense128", "dense32", "--batch-size", "32",
     "--gradient-accumulation-count", "12", "--repeat-count", "2", "--replicas", "2",
     "--ipu-version", "ipu2", "--recompute", "--perfetto", "pipeline.json", "--json"),
    ("--stages", "2", "--micro-batches", "4", "--schedule", "1f1b", "--unit-cost"),
    ("--stages", "3", "--micro-batches", "10", "--schedule", "grouped"),
    ("--stages", "4", "--micro-batches", "8", "--json"),
    (*MODEL, "--synthetic-data", "--micro-batches", "16", "--json"),
    (*MODEL, "--synthetic-data", "--json"),
    (*MODEL, "--synthetic-data", "--splits", "dense32", "--schedule", "grouped", "--json"),
    (*MODEL, "--synthetic-data", "--splits", "dense32", "--schedule", "sequential", "--json"),
    (*MODEL, "--synthetic-data", "--splits", "dense32", "--sharded", "--json"),
    (*MODEL, "--splits", "dense32", "--batch-size", "32", "--gradient-accumulation-count", "16",
     "--ipu-version", "ipu2", "--synthetic-data", "--json"),
    *[("--unit-cost", "--schedule", schedule, *ratio, "--json")
      for schedule in ("grouped", "interleaved") for ratio in ((), ("--backward-ratio", "2"))],
    *[(*MODEL, "--micro-batches", "16", *extra, "--json")
      for extra in ((), ("--splits", "dense32"), ("--splits", "dense32", "--host-data"),
                    ("--replicas", "2"), ("--synthetic-data",))],
]

SIMULATE_CHILD = REPORTER + textwrap.dedent("""
    import contextlib, io, json, runpy, sys, traceback
    from ipu_emulator.cli import simulate
    from ipu_emulator.sim import pipeline_simulator, schedules
    from ipu_emulator.__main__ import main
    for args in json.loads(sys.argv[1]):
        out, err = io.StringIO(), io.StringIO()
        sys.argv = ["ipu_emulator", "simulate", *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                runpy.run_module("ipu_emulator", run_name="__main__", alter_sys=True)
                code = 0
            except SystemExit as stop:  # as the interpreter turns it into an exit code
                code = stop.code if isinstance(stop.code, int) else 0 if stop.code is None else 1
                if not isinstance(stop.code, (int, type(None))):
                    print(stop.code, file=sys.stderr)
            except BaseException:
                traceback.print_exc()
                code = 1
        report(json.dumps(args), [code, out.getvalue(), err.getvalue()])
    report("tensorflow imported", "tensorflow" in sys.modules)
""")



class SimulateChild:
    """The child's results: ``run(*args)`` gives a command line's exit code, stdout and
    stderr; ``json(*args)`` its ``--json`` output; ``workdir`` holds the files it wrote."""

    def __init__(self, workdir):
        self.workdir = workdir
        child = run_python(SIMULATE_CHILD, json.dumps(CHILD_COMMAND_LINES), cwd=workdir,
                           timeout=300).check()
        self.results = child.results

    def run(self, *args, check=True):
        key = json.dumps(list(args))
        if key not in self.results:
            raise KeyError(f"{args} was not run: add it to CHILD_COMMAND_LINES")
        code, stdout, stderr = self.results[key]
        if check:
            assert code == 0, stderr
        return argparse.Namespace(returncode=code, stdout=stdout, stderr=stderr)

    def json(self, *args):
        return json.loads(self.run(*args, "--json").stdout)


@pytest.fixture(scope="module")
def cli(tmp_path_factory):
    return SimulateChild(tmp_path_factory.mktemp("simulate_cli"))


@pytest.mark.parametrize("schedule, end", [("grouped", 11), ("interleaved", 8)])
def test_unit_cost_json_gives_the_tutorials_first_backward_end(cli, schedule, end):
    data = cli.json("--stages", "4", "--micro-batches", "8", "--schedule", schedule,
                    "--unit-cost")
    first = [e for e in data["events"]
             if e["kind"] == "backward" and e["stage"] == 0 and e["micro_batch"] == 0]
    assert [e["end"] for e in first] == [end]
    for event in data["events"]:
        assert {"ipu", "stage", "kind", "micro_batch", "start", "end"} <= set(event)
    assert data["metrics"]["makespan"] == 22
    assert (data["clock"], data["time_unit"]) == ("unit time steps", "step")
    assert data["metrics"]["bubble_fraction"] == pytest.approx(3 / 11)
    assert set(data["metrics"]["utilisation"]) == {"0", "1", "2", "3"}
    assert data["metrics"]["peak_in_flight"]["0"] == (7 if schedule == "grouped" else 4)
    assert data["schedule"]["name"] == schedule
    assert data["schedule"]["ipu_actions"][3].startswith("3F0 3B0")
    updates = [e for e in data["events"] if e["kind"] == "weight_update"]
    assert len(updates) == 4 and all(e["micro_batch"] is None for e in updates)


def test_model_json_has_throughput_memory_and_phases(cli):
    data = cli.json(*MODEL, "--splits", "dense128", "dense32",
                    "--batch-size", "32", "--gradient-accumulation-count", "12",
                    "--repeat-count", "2", "--replicas", "2", "--ipu-version", "ipu2",
                    "--recompute", "--perfetto", "pipeline.json")
    metrics = data["metrics"]
    assert (data["clock"], data["time_unit"]) == ("simulated IPU time", "s")
    assert metrics["samples_per_second"] > 0
    assert metrics["effective_batch_size"] == 2 * 32 * 12
    assert set(metrics["peak_memory_bytes"]) == {str(i) for i in range(6)}
    assert metrics["peak_memory_bytes"]["0"] > metrics["peak_memory_bytes"]["2"] > 0
    assert [p["name"] for p in data["phases"]][:4] == ["ramp-up", "main", "ramp-down",
                                                        "weight update"]
    assert any(e["kind"] == "recompute" for e in data["events"])
    chrome = json.loads((cli.workdir / "pipeline.json").read_text())
    assert any(e.get("name") == "Engine::run" for e in chrome["traceEvents"])


def test_text_output_prints_the_schedule_and_the_summary(cli):
    out = cli.run("--stages", "2", "--micro-batches", "4", "--schedule", "1f1b",
                  "--unit-cost").stdout
    assert "1f1b schedule: 2 stages on 2 IPUs" in out
    assert "IPU0: 0F0 0F1 0B0 0F2 0B1 0F3 0B2 0B3 0U" in out
    assert "makespan (unit time steps)" in out and "bubble fraction" in out


def test_invalid_combination_exits_non_zero_with_the_sdk_message(cli):
    result = cli.run("--stages", "3", "--micro-batches", "10", "--schedule", "grouped",
                     check=False)
    assert result.returncode != 0
    assert result.stdout == ""
    assert result.stderr.strip() == (
        "FailedPreconditionError: The number of iterations of the pipeline must be a multiple "
        "of 6, but it is 10. This number might be called `gradient_accumulation_count`, "
        "`gradient_accumulation_steps_per_replica` or `steps_per_execution` depending on the "
        "API used.")


@pytest.mark.parametrize("args, message", [
    (["--stages", "4", "--micro-batches", "8", "--schedule", "interleaved",
      "--device-mapping", "0", "1", "1", "0"],
     "NotImplementedError: The pipelining schedule 'Interleaved' does not currently support"),
    (["--stages", "1", "--schedule", "gpipe"],
     "ValueError: Pipeline requires at least two computational stages."),
    (["--schedule", "fastest"], "Unknown pipeline schedule 'fastest'"),
    (["--model", "tutorial-mlp", "--splits", "nope"], "unknown split layer 'nope'"),
    (["--model", "tutorial-mlp", "--stages", "3"], "--stages 3 disagrees with --splits"),
])
def test_invalid_inputs_report_the_real_message(args, message, capsys):
    assert simulate_command.main(args) == 1
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_simulator_modules_do_not_import_tensorflow(cli):
    # The child imported the simulate command, the simulator's modules and __main__, then ran
    # every command line above (one IPU, pipelines, models, traces): none needed TensorFlow.
    cli.run("--stages", "4", "--micro-batches", "8", "--json")
    assert cli.results["tensorflow imported"] is False


def test_a_model_without_splits_runs_on_one_ipu_and_json_gives_cycles(cli):
    data = cli.json(*MODEL, "--synthetic-data", "--micro-batches", "16")
    assert data["schedule"]["name"] == "single-ipu" and data["schedule"]["num_stages"] == 1
    assert data["schedule"]["ipu_actions"][0].endswith("0F15 0B15 0U")
    assert data["clock_hz"] == 1.33e9                       # ipu2
    assert data["metrics"]["makespan_cycles"] == round(data["metrics"]["makespan"] * 1.33e9)
    event = data["events"][0]
    assert event["end_cycles"] == round(event["end"] * 1.33e9)
    # Synthetic data: nothing crosses the host link, neither the data nor the losses.
    assert [e for e in data["events"] if e["kind"] == "stream_copy"] == []
    real = cli.json(*MODEL, "--micro-batches", "16")
    assert {e["name"] for e in real["events"] if e["kind"] == "stream_copy"} == {
        "StreamCopy infeed (host->IPU)", "StreamCopy outfeed (IPU->host)"}


def test_one_ipu_sharding_and_pipelining_of_one_model_can_be_compared(cli):
    def per_sample(*args):
        return 1 / cli.json(*MODEL, "--synthetic-data", *args)["metrics"]["samples_per_second"]
    single = per_sample()
    pipelined = per_sample("--splits", "dense32", "--schedule", "grouped")
    in_turns = per_sample("--splits", "dense32", "--schedule", "sequential")
    assert pipelined < single < in_turns  # the tutorial's lesson, steps 1 to 3
    # Sharded as step 2 is (every gradient on IPU1, IPU0's activations and weights copied
    # over each mini-batch): Graphcore's trace shows 1.72 times the single IPU's device time.
    sharded = cli.json(*MODEL, "--synthetic-data", "--splits", "dense32", "--sharded")
    assert sharded["title"].startswith("sharded over 2 IPUs: 16 mini-batches")
    assert single < per_sample("--splits", "dense32", "--sharded")
    ipu0 = [e for e in sharded["events"] if e["ipu"] == 0]
    assert not [e for e in ipu0 if e["kind"] == "backward"]     # IPU0 computes no gradient
    assert any(e["kind"] == "exchange" for e in ipu0)           # but sends what they read


def test_the_tutorials_split_loads_ipu0s_forward_pass_as_graphcores_trace_does(cli):
    # Step 3's ramp-up in Graphcore's trace: IPU0's forward of a mini-batch (dense256,
    # dense128, dense64 and the FIFO op) about 17,000 cycles, IPU1's (dense32, logits, the
    # loss) 11,000-13,000; IPU0 / IPU1 about 1.4.  Each within 15 %.
    data = cli.json(*MODEL, "--splits", "dense32", "--batch-size", "32",
                    "--gradient-accumulation-count", "16", "--ipu-version", "ipu2",
                    "--synthetic-data")
    first = {ipu: next(e for e in data["events"] if e["kind"] == "forward" and e["ipu"] == ipu
                       and e["micro_batch"] == 0) for ipu in (0, 1)}
    ipu0, ipu1 = (first[ipu]["end_cycles"] - first[ipu]["start_cycles"] for ipu in (0, 1))
    assert ipu0 / ipu1 == pytest.approx(1.4, rel=0.15)
    assert ipu0 == pytest.approx(17_000, rel=0.15)
    assert 0.85 * 11_000 <= ipu1 <= 1.15 * 13_000


@pytest.mark.parametrize("args, message", [
    (["--colocate-gradients"],
     "--colocate-gradients places the gradients of shards; give --sharded too."),
    (["--model", "tutorial-mlp", "--sharded"],
     "--sharded cuts a model into shards: give --model and --splits."),
])
def test_sharding_options_need_a_model_cut_into_shards(args, message, capsys):
    assert simulate_command.main(args) == 1
    captured = capsys.readouterr()
    assert captured.err == f"error: {message}\n" and captured.out == ""


# --- sizes below 1 ----------------------------------------------------------------------


def parse(*args):
    parser = argparse.ArgumentParser()
    simulate_command.add_arguments(parser)
    return parser.parse_args(list(args))


@pytest.mark.parametrize("args, message", [
    (["--stages", "0"], "--stages must be at least 1, got 0."),
    (["--stages", "-3", "--schedule", "gpipe"], "--stages must be at least 1, got -3."),
    (["--micro-batches", "0"], "--micro-batches must be at least 1, got 0."),
    (["--gradient-accumulation-count", "-8"],
     "--gradient-accumulation-count must be at least 1, got -8."),
    (["--repeat-count", "0"], "--repeat-count must be at least 1, got 0."),
    (["--replicas", "0"], "--replicas must be at least 1, got 0."),
    (["--model", "tutorial-mlp", "--batch-size", "0"], "--batch-size must be at least 1, got 0."),
    (["--schedule", "interleaved-1f1b", "--stages-per-ipu", "0"],
     "--stages-per-ipu must be at least 1, got 0."),
])
def test_a_size_below_one_names_the_flag_as_typed(args, message, capsys):
    assert simulate_command.main(args) == 1
    captured = capsys.readouterr()
    assert captured.err == f"error: {message}\n" and captured.out == ""


def test_the_sdks_own_rules_keep_their_messages(capsys):
    # One stage is a size the CLI accepts (a model on one IPU), so the SDK's rule answers.
    assert simulate_command.main(["--stages", "1"]) == 1
    assert capsys.readouterr().err == (
        "ValueError: Pipeline requires at least two computational stages.\n")
    assert simulate_command.main(["--stages", "4", "--micro-batches", "4"]) == 1
    assert capsys.readouterr().err.startswith(
        "FailedPreconditionError: The number of iterations of the pipeline must be a multiple "
        "of 8, but it is 4.")


# --- the size limit ----------------------------------------------------------------------


@pytest.mark.parametrize("args", [
    ("--schedule", "grouped", "--stages", "2", "--micro-batches", "4"),
    ("--schedule", "grouped", "--stages", "8", "--micro-batches", "64", "--recompute"),
    ("--schedule", "grouped", "--stages", "4", "--micro-batches", "16", "--inference"),
    ("--schedule", "interleaved", "--stages", "4", "--micro-batches", "32", "--unit-cost"),
    ("--schedule", "interleaved", "--stages", "4", "--micro-batches", "8", "--recompute"),
    ("--schedule", "sequential", "--stages", "8", "--micro-batches", "16", "--recompute"),
    ("--schedule", "gpipe", "--stages", "4", "--micro-batches", "16", "--replicas", "2",
     "--repeat-count", "3"),
    ("--schedule", "1f1b", "--stages", "16", "--micro-batches", "32", "--recompute"),
    ("--schedule", "interleaved-1f1b", "--stages", "8", "--micro-batches", "16"),
    ("--schedule", "zero-bubble", "--stages", "4", "--micro-batches", "16", "--unit-cost"),
    ("--model", "tutorial-mlp", "--micro-batches", "16"),
    ("--model", "tutorial-mlp", "--micro-batches", "4", "--inference"),
    ("--model", "tutorial-mlp", "--splits", "dense128", "dense32", "--micro-batches", "24",
     "--replicas", "2", "--repeat-count", "2"),
    ("--model", "tutorial-mlp", "--splits", "dense128", "dense64", "dense32", "--micro-batches",
     "8", "--schedule", "interleaved", "--synthetic-data"),
    ("--model", "tutorial-mlp", "--splits", "dense128", "dense64", "dense32", "--micro-batches",
     "8", "--schedule", "sequential", "--offload-activations", "--offload-weights"),
    ("--model", "tutorial-mlp", "--splits", "dense32", "--micro-batches", "16", "--schedule",
     "1f1b", "--recompute", "--offload-activations"),
])
def test_the_event_estimate_is_within_a_factor_of_one_and_a_half(args):
    options = parse(*args)
    _, timeline = simulate_command.simulate(options)
    assert 1 / 1.5 <= simulate_command.estimate_events(options) / len(timeline.events) <= 1.5


@pytest.mark.parametrize("args, message", [
    (["--stages", "2000", "--micro-batches", "100000"],
     "this request would simulate about 600,000,000 events (about 2 hours here); the limit is "
     "1,000,000 events."),
    (["--stages", "2000", "--micro-batches", "100000", "--json"],
     "this request would simulate about 600,000,000 events (about 5 hours here); the limit is "
     "1,000,000 events."),
    (["--stages", "8", "--micro-batches", "1024", "--unit-cost", "--replicas", "64",
      "--repeat-count", "2"],
     "this request would simulate about 2,100,000 events (about 21 seconds here); the limit is "
     "1,000,000 events."),
    (["--stages", "8", "--micro-batches", "65536", "--unit-cost"],  # just over: exact count
     "this request would simulate about 1,048,584 events (about 10 seconds here); the limit is "
     "1,000,000 events."),
    (["--stages", str(10 ** 10), "--micro-batches", str(10 ** 10)],
     "this request would simulate about 400,000,000,000,000,000,000 events (more than a year "
     "here); the limit is 1,000,000 events."),
])
def test_an_oversized_request_is_refused_before_anything_is_built(args, message, monkeypatch,
                                                                  capsys):
    def not_called(*args, **kwargs):
        raise AssertionError("an oversized request must be refused before any work")
    monkeypatch.setattr(simulate_command, "stage_costs_for", not_called)
    monkeypatch.setattr(schedules, "build_checked_schedule", not_called)
    monkeypatch.setattr(pipeline_simulator, "simulate_pipeline", not_called)
    assert simulate_command.main(args) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"error: {message} Use fewer stages, micro-batches, repeats or "
                            "replicas.\n")


def test_a_request_at_the_limit_is_accepted():
    # 8 unit stages x 62,496 micro-batches: 8 x 62,496 x 2 actions + 8 updates = 999,944.
    options = parse("--stages", "8", "--micro-batches", "62496", "--unit-cost")
    assert simulate_command.check_request_size(options) == 999_944
    with pytest.raises(simulate_command.RequestTooLargeError):
        simulate_command.check_request_size(
            parse("--stages", "8", "--micro-batches", "62504", "--unit-cost"))


def test_the_limit_is_named_in_the_help_and_the_docstring(capsys):
    from ipu_emulator.__main__ import main
    with pytest.raises(SystemExit):
        main(["simulate", "--help"])
    limit = f"{simulate_command.MAX_EVENTS:,}"
    assert f"MAX_EVENTS = {limit}" in " ".join(capsys.readouterr().out.split())
    assert f"``MAX_EVENTS`` ({limit} events" in simulate_command.__doc__


# --- the schedule's steps and the makespan -----------------------------------------------


def unit_cost_makespan(schedule, passes):
    """Each step lasts as long as its busiest IPU's actions one after another (one time step
    each); weight updates take none."""
    per_pass = sum(max([sum(1 for a in step if a.kind != "U" and schedule.ipu_of(a.stage) == ipu)
                        for ipu in range(schedule.num_ipus)])
                   for step in schedule.steps)
    return passes * per_pass


@pytest.mark.parametrize("schedule", ["grouped", "interleaved", "sequential"])
@pytest.mark.parametrize("extra", [(), ("--recompute",), ("--inference",),
                                   ("--repeat-count", "2"),
                                   ("--device-mapping", "0", "1", "1", "0", "--inference")])
def test_the_steps_note_gives_the_makespan_of_the_steps(schedule, extra):
    options = parse("--stages", "4", "--micro-batches", "16", "--schedule", schedule,
                    "--unit-cost", *extra)
    built, timeline = simulate_command.simulate(options)
    expected = unit_cost_makespan(built, options.repeat_count)
    assert timeline.metrics.makespan == expected
    note = simulate_command.steps_note(built, timeline, options)
    if expected == len(built.steps):
        assert note is None
    else:
        assert note.startswith(f"({len(built.steps)} schedule steps")
        assert note.endswith(f" is {expected} time steps)")


def test_text_output_explains_why_the_steps_and_the_makespan_differ(capsys):
    assert simulate_command.main(["--stages", "4", "--micro-batches", "16", "--schedule",
                                  "grouped", "--unit-cost"]) == 0
    out = capsys.readouterr().out
    assert "training; synchronous, 23 time steps" in out
    assert ("\n(23 schedule steps; a step runs each IPU's actions one after another and weight "
            "updates take no time, so the simulated makespan is 38 time steps)\n") in out
    assert "makespan (unit time steps)                    38" in out

    assert simulate_command.main(["--stages", "4", "--micro-batches", "16", "--schedule",
                                  "sequential", "--unit-cost", "--repeat-count", "2"]) == 0
    assert ("(132 schedule steps per pass; weight updates take no time, so the 2 passes' "
            "simulated makespan is 256 time steps)") in capsys.readouterr().out

    assert simulate_command.main(["--stages", "4", "--micro-batches", "16", "--unit-cost",
                                  "--inference", "--repeat-count", "3"]) == 0
    assert ("(19 schedule steps per pass, so the 3 passes' simulated makespan is 57 time "
            "steps)") in capsys.readouterr().out

    assert simulate_command.main(["--stages", "4", "--micro-batches", "16", "--schedule",
                                  "grouped"]) == 0
    out = capsys.readouterr().out
    assert ("\n(23 schedule steps; each lasts as long as its busiest IPU, plus a sync and any "
            "exchange: see the makespan below)\n") in out
    assert "makespan (simulated IPU time)" in out


@pytest.mark.parametrize("args", [
    ("--schedule", "grouped", "--inference"),  # the steps and the makespan agree
    ("--schedule", "1f1b"),                     # asynchronous: no steps counted
])
def test_no_steps_note_when_nothing_differs(args, capsys):
    assert simulate_command.main(["--stages", "4", "--micro-batches", "16", "--unit-cost",
                                  *args]) == 0
    out = capsys.readouterr().out
    assert "schedule steps" not in out and "schedule: 4 stages" in out


def test_a_longer_backward_in_unit_cost_mode(cli):
    def makespan(schedule, *ratio):
        return cli.json("--unit-cost", "--schedule", schedule, *ratio)["metrics"]["makespan"]
    assert makespan("grouped") == makespan("interleaved") == 38
    assert (makespan("grouped", "--backward-ratio", "2"),
            makespan("interleaved", "--backward-ratio", "2")) == (57, 72)


@pytest.mark.parametrize("args, message", [
    (["--backward-ratio", "0"], "error: --backward-ratio must be above 0, got 0.\n"),
    (["--backward-ratio", "2"], "error: --backward-ratio needs --unit-cost: with real costs "
                                "the model's FLOPs and ops set how long a backward pass takes.\n"),
])
def test_a_backward_ratio_needs_unit_cost_and_a_positive_value(args, message, capsys):
    extra = ["--unit-cost"] if args[1] == "0" else []
    assert simulate_command.main(args + extra) == 1
    assert capsys.readouterr().err == message


def test_pipelines_default_to_synthetic_data_and_one_ipu_to_host_data(cli):
    def copies(*args):
        data = cli.json(*MODEL, "--micro-batches", "16", *args)
        return ([e for e in data["events"] if e["kind"] == "stream_copy"],
                data["title"].endswith(", synthetic data"))
    assert copies("--splits", "dense32") == ([], True)
    with_host, said = copies("--splits", "dense32", "--host-data")
    assert with_host and not said
    assert copies()[0] and copies("--replicas", "2")[0] == []  # one IPU; replicated
    assert copies("--synthetic-data")[0] == []
