"""The course: every exercise of the lab, in the order a learner meets them.

Plain data, so that the progress command (``python -m ipu_emulator progress``) needs neither
TensorFlow nor the exercises' code to list the course; a test checks that it names exactly the
registered exercises (``exercises.REGISTRY`` and ``code_exercises.CODE_REGISTRY``), in
notebook order.  A new exercise is added here, where its notebook puts it.
"""

COURSE = (
    "00.superstep-cycles",
    "01.port-the-model",
    "02.loop-on-device",
    "03.outfeed-loop",
    "03.keras-steps-per-execution",
    "04.break-even",
    "05.replicate",
    "05.all-reduce-bytes",
    "06.accumulate",
    "06.accumulation-count",
    "07.shard-the-step",
    "08.fewest-in-flight",
    "08.bubble-below-10-percent",
    "09.pipeline-the-model",
    "09.faster-schedule",
    "09.textbook-bubble",
    "10.chunks-per-ipu",
    "11.stages-from-splits",
    "11.four-stages",
    "12.fit-in-memory",
)

__all__ = ["COURSE"]
