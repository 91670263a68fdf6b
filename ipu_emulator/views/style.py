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

# Pipeline phases are shaded behind the lanes, light enough not to hide the bubbles.
PHASE_COLOURS: Dict[str, str] = {
    "ramp-up": "#56B4E9",
    "main": "#009E73",
    "ramp-down": "#E69F00",
    "weight update": "#CC79A7",
}

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
