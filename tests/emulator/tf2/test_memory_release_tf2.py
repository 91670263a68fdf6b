"""TF2: every strategy.run of a program is an engine run for the idle memory release."""
from contextlib import nullcontext

import pytest
import tensorflow as tf

from ipu_emulator.ipu import ipu_strategy
from ipu_emulator.runtime import memory_release

pytestmark = pytest.mark.tf2


def test_every_strategy_run_counts(monkeypatch):
    noted = []
    monkeypatch.setattr(memory_release, "engine_run", lambda: noted.append(1) or nullcontext())
    strategy = ipu_strategy.IPUStrategy()

    @tf.function(jit_compile=True)
    def double(x):
        return 2 * x

    with strategy.scope():
        strategy.run(double, args=[tf.constant(1.0)])
        strategy.run(double, args=[tf.constant(2.0)])
    double(tf.constant(3.0))                  # called outside the strategy: no engine run
    assert len(noted) == 2
