"""The lab's JupyterLab defaults (jupyter/lab/overrides.json, installed by `make env` where
JupyterLab reads them, for `make lab` and every learner's server on `make hub`): each setting
names a real plugin and a value its schema allows, and the environment has them."""
import json
from pathlib import Path

from tests.support.child_python import ROOT

OVERRIDES = Path(ROOT) / "jupyter" / "lab" / "overrides.json"
LAB = Path(ROOT) / ".venv" / "share" / "jupyter" / "lab"


def allowed(schema, value):
    if "oneOf" in schema:
        return any(option.get("const") == value for option in schema["oneOf"])
    kinds = {"boolean": bool, "number": (int, float), "string": str, "object": dict}
    return isinstance(value, kinds[schema["type"]])


def test_each_setting_names_a_plugin_and_a_value_its_schema_allows():
    for plugin, values in json.loads(OVERRIDES.read_text()).items():
        package, name = plugin.split(":")
        schema = json.loads((LAB / "schemas" / package / f"{name}.json").read_text())
        for key, value in values.items():
            assert key in schema["properties"], (plugin, key)
            assert allowed(schema["properties"][key], value), (plugin, key, value)


def test_the_environment_has_them():
    assert json.loads((LAB / "settings" / "overrides.json").read_text()) == \
        json.loads(OVERRIDES.read_text())


def test_the_environment_has_the_labs_extension_as_written():
    """`make env` copies jupyter/lab/extensions/ipu-lab-cell-edits where JupyterLab finds
    prebuilt extensions (tests/browser/test_cell_edits.py runs it)."""
    written = Path(ROOT) / "jupyter" / "lab" / "extensions" / "ipu-lab-cell-edits"
    installed = Path(ROOT) / ".venv" / "share" / "jupyter" / "labextensions" / written.name
    files = sorted(path.relative_to(written) for path in written.rglob("*") if path.is_file())
    assert files == [Path("package.json"), Path("static/remoteEntry.js")]
    for name in files:
        assert (installed / name).read_bytes() == (written / name).read_bytes(), name
    build = json.loads((written / "package.json").read_text())["jupyterlab"]["_build"]
    assert (written / build["load"]).is_file()


KERNEL_CONFIG = Path(ROOT) / "jupyter" / "ipython_kernel_config.py"
FIRST_TENSORFLOW_CELL = (
    "import warnings\n"
    "import tensorflow as tf\n"
    "print('sum', float(tf.reduce_sum(tf.ones(3))))\n"
    "warnings.warn('a warning of the learner')")
# Appended to the cell: once the kernel is leaving (an exit handler registered after the
# config's, so it runs before the config's freeze and IPython's own handler), each full
# collection writes what it finds: [objects frozen, objects it walks].  What the callback
# uses is bound to it: IPython's exit handler empties the names of the notebook first.
NOTE_EXIT_COLLECTIONS = """
import atexit as _atexit, gc as _gc, json as _json
_leaving = []
def _note(phase, info, leaving=_leaving, gc=_gc, json=_json, file=open({path!r}, "w")):
    if leaving and phase == "start" and info["generation"] == 2:
        try:
            file.write(json.dumps([gc.get_freeze_count(), len(gc.get_objects())]) + "\\n")
            file.flush()
        except (OSError, ValueError):   # closed during the interpreter's own end
            pass
_gc.callbacks.append(_note)
_atexit.register(_leaving.append, True)
"""


def test_a_kernel_of_the_lab_shows_tensorflows_start_up_lines_nowhere_and_exits_quickly(tmp_path):
    """A kernel of the lab's environment runs a first TensorFlow cell: its output holds what
    Python printed and warned, and none of the lines TensorFlow's C++ code writes while it loads
    (they go to the server's log: jupyter/ipython_kernel_config.py).  Shut down as JupyterLab
    does it (a shutdown request, then waiting 5 s), it leaves by itself, and its last garbage
    collections (IPython's exit handler collects) walk none of TensorFlow's objects: the config
    froze them first.  Without the freeze those collections walk every object the kernel holds
    and cost 1.3-1.7 s of CPU, 0.1-0.2 s frozen (bench/exit_cost.py times both).  About 3 s."""
    assert (Path(ROOT) / ".venv" / "etc" / "ipython" / KERNEL_CONFIG.name).read_bytes() == \
        KERNEL_CONFIG.read_bytes()
    collections = tmp_path / "exit_collections.jsonl"
    text = run_and_shut_down(
        FIRST_TENSORFLOW_CELL + "\nprint('names left by the config:', "
        "[name for name in ('_exit', '_gc') if name in dir()])"
        + NOTE_EXIT_COLLECTIONS.format(path=str(collections)))
    assert "sum 3.0" in text and "a warning of the learner" in text, text
    assert "names left by the config: []" in text, text
    for noise in ("absl::InitializeLog", "I0000", "E0000", "oneDNN", "cuda"):
        assert noise not in text, text
    found = [json.loads(line) for line in collections.read_text().splitlines()]
    assert found, "no full garbage collection ran while the kernel left"
    for frozen, walked in found:
        # TensorFlow's import alone leaves about 280,000 objects.
        assert frozen > 200_000 and walked < frozen // 10, \
            f"a collection at exit walked {walked} objects ({frozen} frozen)"


def run_and_shut_down(cell: str) -> str:
    """What a new lab kernel shows for `cell`; the kernel is then asked to leave and given
    5 s (jupyter_client's and JupyterLab's patience), and must leave by itself."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", startup_timeout=120)
    manager.shutdown_wait_time = 5.0
    shown = []
    try:
        client.execute_interactive(cell, timeout=120, output_hook=lambda message:
                                   shown.append(message["content"].get("text", "")))
    finally:
        client.stop_channels()
        kernel = manager.provisioner.process
        manager.shutdown_kernel(now=False)
    assert kernel.returncode == 0, f"the kernel did not leave by itself: {kernel.returncode}"
    return "".join(shown)
