"""The emulated IPU system: which TensorFlow IPU devices exist and how big they are.

On real hardware, ``configure_ipu_system`` hands an ``IpuOptions`` protobuf to the Poplar
backend, which opens one Poplar device per TensorFlow device ``/device:IPU:i``.  Here the
API front (``ipu_emulator.ipu.config``) validates the configuration the same way and then
records the result in this module; the rest of the emulator (compiler, loops, feeds, the
simulator) reads it through :func:`current` and :func:`device`.

This module deliberately does not import TensorFlow at module level: the simulator and the
widgets read the system state in kernels that never load TensorFlow.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from typing import Optional

_logger = logging.getLogger(__name__)

DEFAULT_IPU_VERSION = "ipu2"

NO_DEVICE_CONFIGURED_MESSAGE = (
    "No IPU device was configured for /device:IPU:0, creating a device with a single IPU."
)


@dataclass(frozen=True)
class VirtualDevice:
    """One TensorFlow device ``/device:IPU:{ordinal}`` made of ``num_ipus`` physical IPUs."""

    ordinal: int
    num_ipus: int


@dataclass(frozen=True)
class SystemConfiguration:
    """What ``configure_ipu_system`` set up, reduced to what the emulator needs."""

    devices: tuple = (VirtualDevice(0, 1),)  # of VirtualDevice, one per /device:IPU:i
    ipu_model: bool = False  # True when TF_POPLAR_FLAGS contains --use_ipu_model
    ipu_version: str = DEFAULT_IPU_VERSION  # "ipu1" | "ipu2" | "ipu21"
    tiles_per_ipu: int = 0  # 0 = the full chip of ``ipu_version``
    allow_recompute: bool = False
    selection_order: str = "AUTO"  # name of a config.SelectionOrder member
    poplar_options: dict = field(default_factory=dict)  # compilation_poplar_options
    # DeviceConnectionType.PRE_COMPILE: programs compile for a device that is never
    # attached, and every execution returns zeros (runtime/session_run.py).
    pre_compile: bool = False
    # DeviceConnectionType.NEVER: programs compile for a device that is never attached, and
    # running one is refused (runtime/session_run.py).
    compile_only: bool = False
    # The options' ``profiling`` (a ``ipu_options.ProfilingConfig``, copied): which IPU trace
    # events and reports ``gen_ipu_ops.ipu_event_trace`` returns (runtime/event_trace.py).
    # Profiling changes no device, so two systems that differ only here compare equal.
    profiling: Optional[object] = field(default=None, compare=False)


_lock = threading.Lock()
_configured: Optional[SystemConfiguration] = None
# Created on first use when nobody configured the system, as the Poplar backend does.
_implicit_default: Optional[SystemConfiguration] = None


def running_on_ipu_model() -> bool:
    """True when the Poplar software IPU Model is selected instead of hardware."""
    return "--use_ipu_model" in os.environ.get("TF_POPLAR_FLAGS", "")


def configure(cfg: SystemConfiguration) -> None:
    """Replace the current system configuration (the API front validates ``cfg`` first)."""
    global _configured, _implicit_default
    if not isinstance(cfg, SystemConfiguration):
        raise TypeError(f"Expected a SystemConfiguration, got {type(cfg).__name__}.")
    with _lock:
        _configured = cfg
        _implicit_default = None


def is_configured() -> bool:
    """True once a configuration was explicitly applied (and not reset since)."""
    return _configured is not None


def current() -> SystemConfiguration:
    """The active configuration; a single 1-IPU device if nobody configured the system.

    The implicit default is created (and logged) once, like the backend's fallback device.
    """
    global _implicit_default
    with _lock:
        if _configured is not None:
            return _configured
        if _implicit_default is None:
            _logger.info(NO_DEVICE_CONFIGURED_MESSAGE)
            _implicit_default = SystemConfiguration(
                devices=(VirtualDevice(0, 1),), ipu_model=running_on_ipu_model()
            )
        return _implicit_default


def reset() -> None:
    """Forget any configuration (``reset_ipu_configuration`` and test isolation)."""
    global _configured, _implicit_default
    with _lock:
        _configured = None
        _implicit_default = None


def device(ordinal: int) -> VirtualDevice:
    """The device ``/device:IPU:{ordinal}``; unknown ordinals fail like the backend does."""
    for candidate in current().devices:
        if candidate.ordinal == ordinal:
            return candidate
    import tensorflow as tf  # lazy: only needed to raise the backend's error type

    raise tf.errors.InvalidArgumentError(
        None, None, "Device ordinal %d not in device configuration list." % ordinal
    )
