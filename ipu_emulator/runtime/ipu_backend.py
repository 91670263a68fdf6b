"""The emulated backend of ``configure_ipu_system``: ``IpuOptions`` -> the configured system.

On hardware the API front hands the ``IpuOptions`` protobuf to the Poplar backend, which
checks the devices asked for (power-of-two sizes, ``gc-info`` ids, IPU versions), opens them
and keeps the protobuf, so ``get_ipu_config`` can hand it back.  Here ``configure`` makes the
same checks with the backend's ``tf.errors``, records the result in ``configured_system``
and keeps the options.  ``ipu.config`` (the SDK's ``IPUConfig`` and functions) calls it.

TensorFlow is imported only when one of its error types has to be raised, so configuring
stays cheap.
"""
from __future__ import annotations

import contextlib
import copy
import logging
import os
import re
import typing
from typing import Optional

from ipu_emulator.sim import hardware
from . import configured_system
from .ipu_options import DeviceConfig, DeviceConnectionType, IpuOptions, SelectionOrder

_logger = logging.getLogger(__name__)

# Hardware exposes multi-IPU device configurations of power-of-two sizes only.
_MAX_IPUS_PER_DEVICE = 64
_KNOWN_IPU_VERSIONS = hardware.IPU_VERSIONS


def gc_info_device_size(cfg_index: int) -> Optional[int]:
    """IPUs in the ``gc-info -l`` device ``cfg_index`` of a 16-IPU system (None: no such id).

    Ids 0-15 are single IPUs, 16-23 pairs, 24-27 quads, 28-29 eights, 30 all sixteen.
    """
    first_id = 0
    for size, count in ((1, 16), (2, 8), (4, 4), (8, 2), (16, 1)):
        if first_id <= cfg_index < first_id + count:
            return size
        first_id += count
    return None


def _tf_errors():
    import tensorflow as tf  # lazy: only needed to raise the backend's error types

    return tf.errors


def _unsupported_count_error(num_ipus: int, ordinal: int):
    return _tf_errors().FailedPreconditionError(
        None, None,
        f"Unsupported number of IPUs requested - could not find an IPU device with "
        f"{num_ipus} IPUs for the TensorFlow virtual device /device:IPU:{ordinal}. "
        f"Use `gc-info -l` to view the available device configurations.")


def _device_size(device_config: DeviceConfig, ordinal: int, on_ipu_model: bool) -> int:
    """Number of IPUs of one TF device, with the backend's errors for impossible requests."""
    if device_config.cfg_index is not None:
        if on_ipu_model:
            raise _tf_errors().InvalidArgumentError(
                None, None, "Must specify the number of IPUs using auto_count, not an index.")
        size = gc_info_device_size(device_config.cfg_index)
        if size is None:
            # The SDK text for an unknown id is not known; this follows the count message.
            raise _tf_errors().FailedPreconditionError(
                None, None,
                f"Could not find an IPU device with id {device_config.cfg_index} for the "
                f"TensorFlow virtual device /device:IPU:{ordinal}. "
                f"Use `gc-info -l` to view the available device configurations.")
        return size
    num_ipus = device_config.auto_count or 0
    if on_ipu_model:
        acceptable = num_ipus >= 1  # poplar::IPUModel takes any count
    else:
        acceptable = (num_ipus >= 1 and hardware.next_power_of_two(num_ipus) == num_ipus
                      and num_ipus <= _MAX_IPUS_PER_DEVICE)
    if not acceptable:
        raise _unsupported_count_error(num_ipus, ordinal)
    return num_ipus


def _ipu_model_tiles_flag() -> int:
    match = re.search(r"--ipu_model_tiles=(\d+)", os.environ.get("TF_POPLAR_FLAGS", ""))
    return int(match.group(1)) if match else 0


def _ipu_version_and_tiles(opts: IpuOptions, on_ipu_model: bool):
    if on_ipu_model:
        version = opts.ipu_model_config.ipu_model_version
        if not version:
            _logger.warning("A version was not supplied when using the IPU Model. "
                            "Defaulting to 'ipu2'.")
            version = configured_system.DEFAULT_IPU_VERSION
        tiles = opts.ipu_model_config.tiles_per_ipu or _ipu_model_tiles_flag()
    else:
        # Real hardware reports its own version; without one, assume the GC200 (ipu2).
        version = opts.ipu_version or configured_system.DEFAULT_IPU_VERSION
        tiles = 0
    if version not in _KNOWN_IPU_VERSIONS:
        # Poplar rejects unknown architectures; its exact text is not known.
        raise _tf_errors().InvalidArgumentError(
            None, None, f"Unsupported IPU version '{version}'. "
                        f"Expected one of {', '.join(_KNOWN_IPU_VERSIONS)}.")
    return version, tiles


def system_configuration_from(opts: IpuOptions) -> configured_system.SystemConfiguration:
    on_ipu_model = configured_system.running_on_ipu_model()
    devices = tuple(
        configured_system.VirtualDevice(ordinal, _device_size(device_config, ordinal, on_ipu_model))
        for ordinal, device_config in enumerate(opts.device_config))
    if not devices:
        _logger.info(configured_system.NO_DEVICE_CONFIGURED_MESSAGE)
        devices = (configured_system.VirtualDevice(0, 1),)
    version, tiles = _ipu_version_and_tiles(opts, on_ipu_model)
    return configured_system.SystemConfiguration(
        devices=devices,
        ipu_model=on_ipu_model,
        ipu_version=version,
        tiles_per_ipu=tiles,
        allow_recompute=opts.speed_size_config.allow_recompute,
        selection_order=opts.selection_order.name,
        poplar_options=dict(opts.compilation_options),
        pre_compile=opts.device_connection_type == DeviceConnectionType.PRE_COMPILE,
        compile_only=opts.device_connection_type == DeviceConnectionType.NEVER,
        profiling=copy.deepcopy(opts.profiling),
    )


def _options_from_system(cfg: configured_system.SystemConfiguration) -> IpuOptions:
    """An IpuOptions describing a system configured directly through ``configured_system``."""
    opts = IpuOptions(device_config=[DeviceConfig(auto_count=d.num_ipus) for d in cfg.devices])
    opts.selection_order = SelectionOrder[cfg.selection_order]
    opts.speed_size_config.allow_recompute = cfg.allow_recompute
    opts.compilation_options = dict(cfg.poplar_options)
    opts.ipu_model_config.tiles_per_ipu = cfg.tiles_per_ipu
    opts.ipu_model_config.ipu_model_version = cfg.ipu_version
    if cfg.profiling is not None:
        opts.profiling = copy.deepcopy(cfg.profiling)
    return opts


# The IpuOptions last applied, with the SystemConfiguration it produced, so that
# get_ipu_config can hand back the options (as the backend keeps the protobuf).
_applied: Optional[typing.Tuple[IpuOptions, configured_system.SystemConfiguration]] = None


def applied_options() -> Optional[IpuOptions]:
    """The options in force (None when the system is not configured): those last applied,
    or, for a system configured directly through ``configured_system``, its description."""
    if not configured_system.is_configured():
        return None
    if _applied is not None and _applied[1] is configured_system.current():
        return _applied[0]
    return _options_from_system(configured_system.current())


def configure(opts: IpuOptions, reset_configuration: bool = True) -> None:
    """Apply ``opts`` (a validated record of its own): the device checks, then the configured
    system.  Different options from those in force replace them, after a reset, unless
    ``reset_configuration`` is False: then the backend's error."""
    global _applied
    existing = applied_options()
    if existing is not None and existing != opts:
        if not reset_configuration:
            raise _tf_errors().FailedPreconditionError(
                None, None,
                "IPU system configuration has already been set in this process, but it "
                "should have been reset automatically by the call to "
                "'tensorflow.python.ipu.config.configure_ipu_system'.")
        _logger.info("Resetting existing IPU configuration before applying new configuration")
        reset()

    system_configuration = system_configuration_from(opts)  # backend checks (device sizes)
    configured_system.configure(system_configuration)
    _applied = (opts, system_configuration)


def reset() -> None:
    """Forget the applied configuration (the next configure starts from scratch)."""
    global _applied
    _applied = None
    configured_system.reset()


@contextlib.contextmanager
def configuration_kept():
    """Inside, code may configure (and reset) the IPU system at will; on leaving, the system
    is configured as it was before.  A check that runs a learner's attempt on its own device
    leaves the learner's own configuration as it found it."""
    global _applied
    saved = (_applied, configured_system.is_configured() and configured_system.current())
    try:
        yield
    finally:
        _applied = saved[0]
        if saved[1]:
            configured_system.configure(saved[1])
        else:
            configured_system.reset()


__all__ = ["gc_info_device_size", "system_configuration_from", "applied_options",
           "configure", "reset", "configuration_kept"]
