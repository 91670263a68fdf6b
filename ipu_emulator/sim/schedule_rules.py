"""Graphcore's rules for a pipeline's configuration, with the SDK's messages.

Which schedules exist and how they are named (``PipelineSchedule`` members, ints, strings),
the device mapping, the ``gradient_accumulation_count`` rules of Graphcore's TensorFlow user
guide on pipelining (a multiple of the compiled pipeline's overlap, at least that overlap),
and Interleaved's one stage per IPU when training.  A configuration the SDK would reject raises
``PipelineConfigurationError`` carrying the SDK's message and exception class name; the
emulated API, the simulator and the widgets all check through here.

Pure Python: no TensorFlow import.
"""
from __future__ import annotations

from typing import List, Set, Tuple

GRAPHCORE_SCHEDULES = ("grouped", "interleaved", "sequential")
COMPARISON_SCHEDULES = ("gpipe", "1f1b", "interleaved-1f1b", "zero-bubble")
SCHEDULE_NAMES = GRAPHCORE_SCHEDULES + COMPARISON_SCHEDULES

# ``PipelineSchedule(IntEnum)``: Grouped=0, Interleaved=1, Sequential=2 (the SDK's
# ``pipelining_ops``).
_PIPELINE_SCHEDULE_ENUM = {0: "grouped", 1: "interleaved", 2: "sequential"}


class PipelineConfigurationError(Exception):
    """A pipeline the Graphcore SDK would reject, with its message and exception class.

    ``sdk_error`` names the TensorFlow exception the SDK raises ("FailedPreconditionError",
    "ValueError", "NotImplementedError", "TypeError") so the TensorFlow front can re-raise
    the exact type while widgets and the CLI just show ``message``.

    >>> try:
    ...     check_gradient_accumulation_count("grouped", num_stages=2, gac=6)
    ... except PipelineConfigurationError as error:
    ...     print(error.sdk_error + ":", error.message.split(",")[0])
    FailedPreconditionError: The number of iterations of the pipeline must be a multiple of 4
    """

    def __init__(self, message: str, sdk_error: str = "ValueError"):
        super().__init__(message)
        self.message = message
        self.sdk_error = sdk_error


def check_device_mapping(num_stages: int, device_mapping=None) -> Tuple[int, ...]:
    """The stage -> IPU list, checked with the SDK's messages (``pipelining_ops.pipeline``'s
    checks of ``device_mapping``).

    >>> check_device_mapping(3)
    (0, 1, 2)
    """
    if not isinstance(num_stages, int) or isinstance(num_stages, bool):
        raise PipelineConfigurationError(
            f"The number of pipeline stages must be an integer, got {num_stages!r}.", "TypeError")
    if num_stages < 2:
        raise PipelineConfigurationError(
            "Pipeline requires at least two computational stages.", "ValueError")
    if device_mapping is None:
        return tuple(range(num_stages))
    if not isinstance(device_mapping, (list, tuple)):
        raise PipelineConfigurationError(
            "device_mapping argument needs to be a list or a tuple.", "TypeError")
    if len(device_mapping) != num_stages:
        raise PipelineConfigurationError(
            "Each stage must be mapped to an IPU: %d mappings != %d stages"
            % (len(device_mapping), num_stages), "ValueError")
    for ipu in device_mapping:
        if not isinstance(ipu, int) or isinstance(ipu, bool) or ipu < 0:
            raise PipelineConfigurationError(
                f"device_mapping entries must be IPU numbers (integers >= 0); got "
                f"{list(device_mapping)}.", "ValueError")
    return tuple(device_mapping)


def check_micro_batches(micro_batches) -> int:
    if not isinstance(micro_batches, int) or isinstance(micro_batches, bool) or micro_batches < 1:
        raise ValueError(f"A pipeline pass needs at least one micro-batch; got "
                         f"micro_batches={micro_batches!r}.")
    return micro_batches


def normalise_schedule_name(schedule) -> str:
    """The canonical name of a schedule given as a name, ``PipelineSchedule`` member or int.

    >>> normalise_schedule_name("PipelineSchedule.Interleaved"), normalise_schedule_name(0)
    ('interleaved', 'grouped')
    >>> normalise_schedule_name("ZB-H1")
    'zero-bubble'
    """
    if isinstance(schedule, int) and not isinstance(schedule, bool) and not hasattr(schedule, "name"):
        if schedule in _PIPELINE_SCHEDULE_ENUM:
            return _PIPELINE_SCHEDULE_ENUM[schedule]
    elif hasattr(schedule, "name") and isinstance(getattr(schedule, "name"), str):
        schedule = schedule.name  # a Schedule, or an enum member such as PipelineSchedule.Grouped
    if isinstance(schedule, str):
        key = schedule.strip().lower().split(".")[-1].replace("_", "-").replace(" ", "-")
        key = _ALIASES.get(key, key)
        if key in SCHEDULE_NAMES:
            return key
    raise PipelineConfigurationError(
        f"Unknown pipeline schedule {schedule!r}; the schedules are: "
        f"{', '.join(SCHEDULE_NAMES)}.", "ValueError")


_ALIASES = {
    "one-f-one-b": "1f1b", "pipedream-flush": "1f1b", "interleaved1f1b": "interleaved-1f1b",
    "interleaved-one-f-one-b": "interleaved-1f1b", "virtual-pipeline": "interleaved-1f1b",
    "zb-h1": "zero-bubble", "zbh1": "zero-bubble", "zb": "zero-bubble",
    "zerobubble": "zero-bubble", "g-pipe": "gpipe",
}


# --- gradient accumulation count (the backend's check, at the first run) ---------------

_GAC_SUFFIX = ("This number might be called `gradient_accumulation_count`, "
               "`gradient_accumulation_steps_per_replica` or `steps_per_execution` depending "
               "on the API used.")


def pipeline_overlap(schedule, num_stages: int, training: bool = True,
                     device_mapping=None) -> int:
    """How many micro-batches one unrolled cycle of the compiled pipeline holds (the SDK's
    ``|ScheduleOffsets(schedule, M)|``); the gradient accumulation count must be a multiple.

    ``M`` is the forward stages' IPUs followed, when training, by the backward stages' IPUs
    in reverse.  Grouped: ``len(M)`` (``2N`` training, ``N`` inference).  Interleaved: the
    rotations of ``M`` that can run side by side without using one IPU twice in the same
    slot, chosen greedily from rotation 0 (``N`` for distinct IPUs).  Sequential: 1.  The
    comparison schedules compile to no such cycle: 1.

    >>> [pipeline_overlap(s, 4) for s in ("grouped", "interleaved", "sequential")]
    [8, 4, 1]
    >>> pipeline_overlap("grouped", 4, training=False)
    4
    """
    name = normalise_schedule_name(schedule)
    mapping = list(check_device_mapping(num_stages, device_mapping))
    slots = mapping + (mapping[::-1] if training else [])
    if name == "grouped":
        return len(slots)
    if name == "interleaved":
        return len(_non_overlapping_rotations(slots))
    return 1


def _non_overlapping_rotations(slots: List[int]) -> List[int]:
    """Greedy ``ScheduleOffsets`` for Interleaved: rotation ``r`` joins if no slot position
    would then hold the same IPU twice (one IPU cannot run two stages in one slot)."""
    length = len(slots)
    taken: Set[Tuple[int, int]] = {(position, ipu) for position, ipu in enumerate(slots)}
    offsets = [0]
    for r in range(1, length):
        rotated = [(position, slots[(position + r) % length]) for position in range(length)]
        if not any(slot in taken for slot in rotated):
            offsets.append(r)
            taken.update(rotated)
    return offsets


def check_gradient_accumulation_count(schedule, num_stages: int, gac, training: bool = True,
                                      device_mapping=None) -> int:
    """Apply the SDK's rules for ``gradient_accumulation_count``; return the overlap.

    Python-side (ValueError): it must be given and not negative.  Compile time
    (FailedPreconditionError, on the first run): ``gac % overlap == 0`` (checked first, so 0
    passes it) and ``gac >= overlap``, with the SDK's messages verbatim.

    >>> check_gradient_accumulation_count("interleaved", 4, 8)
    4
    >>> try:
    ...     check_gradient_accumulation_count("grouped", 3, 10, training=False)
    ... except PipelineConfigurationError as error:
    ...     print(error.message.split(".")[0])
    The number of iterations of the pipeline must be a multiple of 3, but it is 10
    """
    if gac is None:
        raise PipelineConfigurationError("gradient_accumulation_count must be specified.",
                                         "ValueError")
    if not isinstance(gac, int) or isinstance(gac, bool):
        raise PipelineConfigurationError(
            f"gradient_accumulation_count must be an integer, got {gac!r}.", "TypeError")
    if gac < 0:
        raise PipelineConfigurationError("gradient_accumulation_count must be >= 0.",
                                         "ValueError")
    overlap = pipeline_overlap(schedule, num_stages, training, device_mapping)
    if gac % overlap != 0:
        raise PipelineConfigurationError(
            f"The number of iterations of the pipeline must be a multiple of {overlap}, but it "
            f"is {gac}. {_GAC_SUFFIX}", "FailedPreconditionError")
    if gac < overlap:
        raise PipelineConfigurationError(
            f"The number of iterations of the pipeline must be at least {overlap}, but it is "
            f"{gac}. {_GAC_SUFFIX}", "FailedPreconditionError")
    return overlap


# pipelining_ops and IPU Keras raise it too (their device mappings take other forms).
INTERLEAVED_SHARED_IPU_MESSAGE = (
    "The pipelining schedule 'Interleaved' does not currently support multiple pipeline "
    "stages on the same device for training graphs. Please use a different pipeline "
    "schedule.")


def check_interleaved_mapping(num_stages: int, device_mapping=None, training: bool = True):
    """The SDK's Python-side check of an Interleaved pipeline: training may not put two
    stages on one IPU (``NotImplementedError``).  Returns the checked device mapping."""
    mapping = check_device_mapping(num_stages, device_mapping)
    if training and len(set(mapping)) != len(mapping):
        raise PipelineConfigurationError(INTERLEAVED_SHARED_IPU_MESSAGE, "NotImplementedError")
    return mapping


__all__ = ["GRAPHCORE_SCHEDULES", "COMPARISON_SCHEDULES", "SCHEDULE_NAMES",
           "PipelineConfigurationError", "check_device_mapping", "normalise_schedule_name",
           "pipeline_overlap", "check_gradient_accumulation_count", "check_interleaved_mapping",
           "INTERLEAVED_SHARED_IPU_MESSAGE"]
