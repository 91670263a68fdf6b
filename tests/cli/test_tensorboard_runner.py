"""TensorBoard in the lab (issue 26): an unmodified TF2 IPU Keras script that logs with
``tf.keras.callbacks.TensorBoard(histogram_freq=1)`` and ``tf.summary.scalar``, with
asynchronous callbacks, runs through ``python -m ipu_emulator run`` and writes its event files;
TensorBoard, started the way the ``%tensorboard`` magic starts it in the lab (the lab's
TensorBoard, without TensorFlow), serves them offline: its HTTP API lists the run's scalars,
histograms and graph.  One child runs the script, one TensorBoard serves its logs."""
import datetime
import json
import os
import re
import signal
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.support.child_python import ROOT, run_emulator

LAYOUT = ROOT / "tests" / "layouts" / "keras_tensorboard_layout.py"


def logged_tags(run_dir):
    """Every tag the event files of one run directory hold, by kind."""
    from tensorboard.backend.event_processing import event_accumulator
    accumulator = event_accumulator.EventAccumulator(
        str(run_dir), size_guidance={event_accumulator.TENSORS: 0})
    accumulator.Reload()
    return accumulator


def test_keras_tensorboard_logs_open_in_tensorboard(tmp_path, monkeypatch):
    result = run_emulator("run", LAYOUT, "--logdir", "logs", "--epochs", "2",
                          cwd=tmp_path).check()
    match = re.search(r"Logged to logs: loss ([0-9.]+) -> ([0-9.]+)", result.stdout)
    assert match, result.stdout[-2000:]
    assert float(match.group(2)) < float(match.group(1))
    assert "TBNotInstalledError" not in result.stderr

    # The Keras callback: one epoch_loss per epoch, and a histogram of every weight.
    train = logged_tags(tmp_path / "logs" / "train")
    tags = train.Tags()["tensors"]
    assert {"epoch_loss", "epoch_accuracy"} <= set(tags)
    assert len(train.Tensors("epoch_loss")) == 2
    assert {"dense/kernel_0/histogram", "dense_1/bias_0/histogram"} <= set(tags)
    # tf.summary.scalar from a callback: the batch loss (2 epochs of 32 batches, 8 per
    # execution), at every batch as the SDK's asynchronous callbacks are called, or at the
    # last batch of each execution where they are not honoured.
    custom = logged_tags(tmp_path / "logs" / "custom")
    batch_losses = custom.Tensors("batch_loss")
    assert [event.step for event in batch_losses] in (list(range(8, 65, 8)),
                                                       list(range(1, 65)))
    from tensorboard.util import tensor_util
    assert 0 < float(tensor_util.make_ndarray(batch_losses[-1].tensor_proto)) < float(
        match.group(1))

    # What `%load_ext tensorboard` then `%tensorboard --logdir logs` runs in the lab: the lab's
    # TensorBoard, which the lab's server settings name in TENSORBOARD_BINARY
    # (tests/scripts/test_make_lab.py checks a kernel of `make lab` gets it).
    from tensorboard import manager
    monkeypatch.setenv("TENSORBOARD_BINARY", str(Path(sys.executable).parent
                                                 / "ipu-lab-tensorboard"))
    started = manager.start(["--logdir", str(tmp_path / "logs"), "--port", "0"],
                            timeout=datetime.timedelta(seconds=90))
    assert isinstance(started, manager.StartLaunched), started
    try:
        def served(path):
            url = "http://localhost:%d/data/plugin/%s" % (started.info.port, path)
            with urllib.request.urlopen(url, timeout=30) as response:
                return json.load(response)
        scalars, histograms = served("scalars/tags"), served("histograms/tags")
        graphs = served("graphs/info")
        losses = served("scalars/scalars?run=train&tag=epoch_loss")
        with open(f"/proc/{started.info.pid}/maps", encoding="utf-8") as mapped:
            loaded_tensorflow = "libtensorflow" in mapped.read()
    finally:
        os.kill(started.info.pid, signal.SIGTERM)
    assert {"epoch_loss", "epoch_accuracy"} <= set(scalars["train"])
    assert set(scalars["custom"]) == {"batch_loss", "learning_rate"}
    assert [step for _time, step, _value in losses] == [0, 1]
    assert [value for _time, _step, value in losses] == pytest.approx(
        [float(tensor_util.make_ndarray(event.tensor_proto))
         for event in train.Tensors("epoch_loss")])
    assert {"dense/kernel_0/histogram", "dense_1/bias_0/histogram"} <= set(histograms["train"])
    assert graphs["train"]["tags"]["keras"]["conceptual_graph"]   # the Keras model's graph
    # It read them without TensorFlow (0.8 s of CPU and 0.08 GB, against 4 s and 0.6 GB).
    assert not loaded_tensorflow, "the lab's TensorBoard loaded TensorFlow"
