"""Words the checks share when they quote what a learner's run did."""
from ipu_emulator.exercises import not_yet



def engine_runs(count: int) -> str:
    """"one engine run", "3 engine runs"."""
    return "one engine run" if count == 1 else f"{count} engine runs"


def steps(count: int) -> str:
    """"one step", "20 steps"."""
    return "one step" if count == 1 else f"{count} steps"


def kind_of(value) -> str:
    """What a function returned, when it is not what the task asks for: "None", "a dict"."""
    return "None" if value is None else f"a {type(value).__name__}"


# Bytes of one sample digit as the checks feed it: 28 x 28 float32 pixels and an int32 label.
DIGIT_BYTES = 28 * 28 * 4 + 4


def images_per_batch(infeed_bytes_per_iteration: int) -> int:
    """How many sample digits each step took from the infeed."""
    return infeed_bytes_per_iteration // DIGIT_BYTES


def other_batch(batch: int, wanted: int, what_ran: str):
    """"Not yet" when the learner's steps took ``batch`` images where the task keeps
    ``wanted``; None when they agree."""
    if batch == wanted:
        return None
    return not_yet(f"{what_ran}, but each step took {batch} images where the starting code's "
                   f"take {wanted}: keep batch({wanted}, drop_remainder=True), so that the "
                   f"program trains on the tutorial's batches.")


__all__ = ["engine_runs", "steps", "kind_of", "DIGIT_BYTES", "images_per_batch", "other_batch"]
