"""Words the checks share when they quote what a learner's run did."""


def engine_runs(count: int) -> str:
    """"one engine run", "3 engine runs"."""
    return "one engine run" if count == 1 else f"{count} engine runs"


def steps(count: int) -> str:
    """"one step", "20 steps"."""
    return "one step" if count == 1 else f"{count} steps"


def kind_of(value) -> str:
    """What a function returned, when it is not what the task asks for: "None", "a dict"."""
    return "None" if value is None else f"a {type(value).__name__}"


__all__ = ["engine_runs", "steps", "kind_of"]
