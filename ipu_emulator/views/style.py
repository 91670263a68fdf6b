"""What every view of a timeline shares: the colour of each kind, the pipeline-phase shading
and the time units (every time shown names its clock).

    >>> format_seconds(0.0123)
    '12.3 ms'
    >>> pick_time_unit(2e-5), time_unit_scale("ms")
    ('µs', 1000.0)
"""
from __future__ import annotations

from typing import Dict, Tuple

from ipu_emulator.sim.timeline import UNIT_CLOCK, Timeline

# Okabe-Ito palette (distinguishable with the common colour-vision deficiencies).
KIND_COLOURS: Dict[str, str] = {
    "forward": "#0072B2",  # blue
    "backward": "#D55E00",  # vermillion
    "weight_update": "#009E73",  # bluish green
    "recompute": "#CC79A7",  # reddish purple
    "exchange": "#F0E442",  # yellow: far from backward's vermillion
    "sync": "#000000",  # black
    "stream_copy": "#56B4E9",  # sky blue
    "host": "#999999",  # grey
}
OTHER_COLOUR = "#E69F00"  # orange, for kinds a later simulator may add
# The host's Engine::run launches, darker than its other work (preparing data), so a trace
# shows which of the two a feed saves.
HOST_LAUNCH = "host launch"
HOST_LAUNCH_COLOUR = "#555555"


def style_key(event) -> str:
    """How an event is drawn: its kind, or ``HOST_LAUNCH`` for the host's engine-run
    launches."""
    if event.kind == "host" and event.name == "Engine::run":
        return HOST_LAUNCH
    return event.kind


def kind_of(key: str) -> str:
    return "host" if key == HOST_LAUNCH else key


def colour_of(key: str) -> str:
    return HOST_LAUNCH_COLOUR if key == HOST_LAUNCH else KIND_COLOURS.get(key, OTHER_COLOUR)


def legend_name(key: str) -> str:
    if key == HOST_LAUNCH:
        return "host: engine-run launch"
    return "host: other work" if key == "host" else key.replace("_", " ")


# Legend order: the kinds' order, the host's launches before its other work.
STYLE_ORDER = [key for kind in KIND_COLOURS
               for key in ((HOST_LAUNCH, kind) if kind == "host" else (kind,))]


def keys_present(events):
    """The style keys of ``events`` in legend order, unknown ones after."""
    present = {style_key(e) for e in events}
    return [k for k in STYLE_ORDER if k in present] + sorted(present - set(STYLE_ORDER))

# Pipeline phases are shaded behind the IPU lanes, light enough not to hide the bubbles.
# A pass in which no two IPUs ever compute at the same time (the Sequential schedule, or a
# single micro-batch) has no steady state to call "main": the views name it for what it is.
ONE_IPU_AT_A_TIME = "one IPU at a time"
PHASE_COLOURS: Dict[str, str] = {
    "ramp-up": "#56B4E9",
    "main": "#009E73",
    "ramp-down": "#E69F00",
    "weight update": "#CC79A7",
    ONE_IPU_AT_A_TIME: "#999999",
}
PHASE_ALPHA = 0.12
# Where a phase's name does not fit above its shading, its short form is written instead;
# the legend gives both (``phase_legend_name``).
PHASE_SHORT: Dict[str, str] = {
    "ramp-up": "up",
    "main": "main",
    "ramp-down": "down",
    "weight update": "WU",
    ONE_IPU_AT_A_TIME: "1 IPU",
}


def phase_short(name: str) -> str:
    """``phase_short("weight update") == "WU"``; a phase without a short form keeps its name."""
    return PHASE_SHORT.get(name, name)


def phase_legend_name(name: str) -> str:
    """The legend's entry for a phase: ``'ramp-up (up)'``, ``'main'``."""
    short = phase_short(name)
    return name if short == name else f"{name} ({short})"


def drawn_phases(timeline: Timeline):
    """The phases as the views draw them: ``timeline.phases``, except that the ramp-up, main
    and ramp-down of a pass in which no two IPUs compute at the same time become one
    ``ONE_IPU_AT_A_TIME`` phase (what a Sequential pipeline does all along).

    >>> from ipu_emulator.sim.pipeline_simulator import simulate_pipeline, unit_stages
    >>> sequential = simulate_pipeline(unit_stages(2), "sequential", 4, unit_cost=True)
    >>> [name for name, _, _ in drawn_phases(sequential)]
    ['one IPU at a time']
    >>> grouped = simulate_pipeline(unit_stages(2), "grouped", 4, unit_cost=True)
    >>> [name for name, _, _ in drawn_phases(grouped)]
    ['ramp-up', 'main', 'ramp-down']
    """
    phases = list(getattr(timeline, "phases", None) or [])
    if not phases:
        return []
    compute = sorted((e.start, e.end, e.lane) for e in timeline.events
                     if e.ipu is not None and e.kind in PIPELINE_ACTION_KINDS and e.end > e.start)
    result, group = [], []

    def flush():
        if group and not _overlapping(compute, group[0][1], group[-1][2]):
            result.append((ONE_IPU_AT_A_TIME, group[0][1], group[-1][2]))
        else:
            result.extend(group)
        group.clear()

    for phase in phases:
        if phase[0] == "weight update" or (phase[0] == "ramp-up" and group):
            flush()
        if phase[0] == "weight update":
            result.append(phase)
        else:
            group.append(phase)
    flush()
    return result


def _overlapping(compute, start: float, end: float) -> bool:
    """Whether two IPUs compute at the same time between ``start`` and ``end``
    (``compute``: ``(start, end, lane)`` sorted by start)."""
    from bisect import bisect_left

    inside = compute[bisect_left(compute, (start,)) if compute else 0:]
    busy_until: Dict[str, float] = {}
    for begin, finish, lane in inside:
        if begin >= end:
            break
        if any(until > begin + 1e-12 * max(1.0, abs(begin)) for other, until in
               busy_until.items() if other != lane):
            return True
        busy_until[lane] = max(busy_until.get(lane, begin), finish)
    return False

# Forward, backward and recompute boxes of a pipeline carry their micro-batch number.
PIPELINE_ACTION_KINDS = frozenset({"forward", "backward", "recompute"})
_MAX_LABELLED_ACTIONS = 300


def labels_actions(timeline: Timeline) -> bool:
    """Label pipeline actions with their micro-batch when there are few enough to read."""
    if not getattr(timeline, "phases", None):
        return False
    count = sum(1 for e in timeline.events if e.kind in PIPELINE_ACTION_KINDS)
    return 0 < count <= _MAX_LABELLED_ACTIONS


_UNIT_SCALE = {"s": 1.0, "ms": 1e3, "us": 1e6, "µs": 1e6}


def _largest_unit(seconds: float) -> str:
    if seconds >= 1.0:
        return "s"
    if seconds >= 1e-3:
        return "ms"
    return "µs"


def resolve_time_unit(time_unit: str, seconds: float) -> Tuple[str, float]:
    unit = _largest_unit(seconds) if time_unit == "auto" else time_unit
    if unit not in _UNIT_SCALE:
        raise ValueError(f"time_unit must be 'auto' or one of {', '.join(_UNIT_SCALE)}; got {unit!r}")
    return ("µs" if unit == "us" else unit), _UNIT_SCALE[unit]


def format_seconds(seconds: float) -> str:
    """``format_seconds(0.0123) == '12.3 ms'`` (three significant figures)."""
    unit, scale = resolve_time_unit("auto", seconds)
    return f"{seconds * scale:.3g} {unit}"


def pick_time_unit(seconds: float) -> str:
    """The unit (``"s"``, ``"ms"``, ``"µs"``) that ``plot_timeline`` picks for this span."""
    return resolve_time_unit("auto", seconds)[0]


def time_unit_scale(unit: str) -> float:
    """Seconds -> ``unit`` multiplier (``time_unit_scale("ms") == 1e3``)."""
    return _UNIT_SCALE[unit]


def time_formatter(clock: str):
    """Seconds with a unit, or a plain count of time steps on the unit-cost clock."""
    if clock == UNIT_CLOCK:
        return lambda value: f"{value:g}"
    return format_seconds
