"""The lab's TensorBoard: the ``tensorboard`` command, without loading TensorFlow.

    ipu-lab-tensorboard --logdir logs [any of tensorboard's options]

``%tensorboard`` starts this (the lab's server settings set ``TENSORBOARD_BINARY`` to it:
jupyter/jupyter_server_config.py).  TensorBoard reads event files with its own readers and
protocol buffers; it needs TensorFlow only for file systems beyond the local one (``gs://``,
``s3://``) and for the projector's embeddings read from a checkpoint, which the lab's logs never
hold, yet it imports TensorFlow whenever it finds it installed.  Imported, TensorFlow cost each
TensorBoard about 4 s of CPU before it served (0.8 s without) and 0.6 GB of memory (0.08 GB),
0.24 GB of it the process's own (0.05 GB): on a hub, against the learner's memory limit.
TensorBoard's own test for running without TensorFlow is whether the module
``tensorboard.compat.notf`` can be imported: this command provides it, then runs TensorBoard's
``main``.  The lab's scalars, histograms, distributions and graphs are served the same either
way (docs/tensorboard.md; tests/cli/test_tensorboard_runner.py).
"""
import sys
import types

NO_TENSORFLOW = "tensorboard.compat.notf"


def main() -> None:
    sys.modules.setdefault(NO_TENSORFLOW, types.ModuleType(NO_TENSORFLOW))
    from tensorboard.main import run_main
    sys.argv[0] = "tensorboard"   # its usage and error lines name the command learners know
    run_main()                    # exits with TensorBoard's status


if __name__ == "__main__":
    main()
