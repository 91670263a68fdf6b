"""The opt-in import hook (``install-hook``/``uninstall-hook``) and POPLAR_ENGINE_OPTIONS
reports.  The hook is only ever installed into temporary directories here."""
import json
import os
import sys
import textwrap

import pytest

from ipu_emulator.cli import profiling, shell_wrappers, startup_hook
from ipu_emulator.__main__ import main
from tests.support.child_python import ROOT, child_env, run_python


def test_install_and_uninstall_write_and_remove_one_pth_file(tmp_path, capsys):
    assert main(["install-hook", "--site-dir", str(tmp_path), "--tf1"]) == 0
    pth = tmp_path / startup_hook.PTH_NAME
    assert pth.read_text() == "import ipu_emulator.cli.startup_hook; ipu_emulator.cli.startup_hook.activate(tf1=True)\n"
    assert main(["install-hook", "--site-dir", str(tmp_path)]) == 0  # idempotent rewrite
    assert "tf1=False" in pth.read_text()
    assert main(["uninstall-hook", "--site-dir", str(tmp_path)]) == 0
    assert not pth.exists()
    assert main(["uninstall-hook", "--site-dir", str(tmp_path)]) == 0
    assert "no import hook was installed" in capsys.readouterr().out


def test_install_into_a_missing_directory_fails_cleanly(tmp_path, capsys):
    assert main(["install-hook", "--site-dir", str(tmp_path / "absent")]) == 1
    assert "No such site directory" in capsys.readouterr().err


def test_the_default_site_dir_is_this_environments_site_packages():
    assert os.path.samefile(startup_hook.default_site_dir(),
                            [p for p in sys.path if p.endswith("site-packages")][0])


def test_with_the_hook_plain_python_imports_the_sdk_names_and_writes_reports(tmp_path):
    site_dir, report_dir = tmp_path / "site", tmp_path / "report"
    site_dir.mkdir()
    startup_hook.install_hook(str(site_dir), tf1=True)
    program = textwrap.dedent("""
        import importlib.util, site, sys
        assert importlib.util.find_spec("tensorflow.python.ipu") is None  # stock TensorFlow
        site.addsitedir(sys.argv[1])           # what Python does for site-packages at start-up
        import tensorflow.compat.v1 as tf
        from tensorflow.python import ipu
        from tensorflow.python.ipu.ops import pipelining_ops
        assert ipu.pipelining_ops.pipeline is pipelining_ops.pipeline
        assert not tf.executing_eagerly()      # --tf1: graph mode, as the TF1 SDK had
        cfg = ipu.config.IPUConfig()
        cfg.auto_select_ipus = 1
        cfg.configure_ipu_system()
        x = tf.placeholder(tf.float32, [2])
        with ipu.scopes.ipu_scope("/device:IPU:0"):
            [y] = ipu.ipu_compiler.compile(lambda v: v * 2.0, [x])
        with tf.Session() as sess:
            print("result", sess.run(y, {x: [1.0, 2.0]}).tolist())
    """)
    # A fresh interpreter of its own: the TF1 hook switches TensorFlow to graph mode.
    environment = child_env(PYTHONPATH=ROOT, POPLAR_ENGINE_OPTIONS=json.dumps(
        {"autoReport.all": "true", "autoReport.directory": str(report_dir)}))
    done = run_python(program, site_dir, env=environment).check()
    assert "result [2.0, 4.0]" in done.stdout
    trace = json.loads((report_dir / profiling.TRACE_FILE).read_text())
    assert any(e.get("ph") == "X" and e.get("cat") == "forward" for e in trace["traceEvents"])
    assert "engine runs" in (report_dir / profiling.SUMMARY_FILE).read_text()


def test_with_the_hook_tensorflow_python_keras_is_legacy_keras_and_offline(tmp_path):
    # The hook is active before TensorFlow loads: the name is taken over once it has.
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    startup_hook.install_hook(str(site_dir))
    program = textwrap.dedent("""
        import site, sys
        site.addsitedir(sys.argv[1])
        import tensorflow as tf
        import tf_keras
        from tensorflow.python import keras
        from tensorflow.python.keras import layers
        from tensorflow.python.keras.datasets import mnist
        assert keras is tf_keras and layers.Dense is tf.keras.layers.Dense
        (x, y), _ = mnist.load_data()
        print("mnist", x.shape)
    """)
    # A fresh interpreter of its own: the default (TF2) hook, active before TensorFlow loads.
    done = run_python(program, site_dir, env=child_env(PYTHONPATH=ROOT)).check()
    assert "mnist (24000, 28, 28)" in done.stdout
    assert "bundled sample" in done.stderr


@pytest.mark.parametrize("text, expected", [
    ('{"autoReport.all":"true","autoReport.directory":"./r"}', profiling.ReportRequest("./r")),
    ('{"autoReport.outputExecutionProfile":"true"}', profiling.ReportRequest(".")),
    ('{"autoReport.all":"true","autoReport.executionProfileProgramRunCount":"5"}',
     profiling.ReportRequest(".", 5)),
    ('{"autoReport.all":"false"}', None),
    ('{"debug.instrument":"true"}', None),
    ("", None),
])
def test_poplar_engine_options_are_read_as_poplar_reads_them(text, expected):
    assert profiling.requested({"POPLAR_ENGINE_OPTIONS": text}) == expected


def test_bad_poplar_engine_options_say_what_is_wrong():
    with pytest.raises(ValueError, match="not valid JSON"):
        profiling.requested({"POPLAR_ENGINE_OPTIONS": "{autoReport.all: true"})
    with pytest.raises(ValueError, match="JSON object"):
        profiling.requested({"POPLAR_ENGINE_OPTIONS": '["autoReport.all"]'})


def test_shell_scripts_are_told_apart_from_python_scripts(tmp_path):
    shell = tmp_path / "wrapper"
    shell.write_text("#!/usr/bin/env bash\necho hi\n")
    python = tmp_path / "tool"
    python.write_text("#!/usr/bin/env python3\nprint('hi')\n")
    assert not shell_wrappers.is_python_script(str(shell))
    assert shell_wrappers.is_python_script(str(python))
    assert not shell_wrappers.is_python_script(os.path.join(ROOT, "examples", "profile_step3.sh"))
