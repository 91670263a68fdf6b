"""IPU utilities, including the functional configuration API of SDK 1.x-2.3.

Before SDK 2.1 an IPU system was configured by threading an ``IpuOptions`` protobuf
through a chain of functions, each returning the updated options::

    cfg = ipu.utils.create_ipu_config(profiling=True, use_poplar_text_report=True)
    cfg = ipu.utils.set_ipu_model_options(cfg, compile_ipu_code=False)
    cfg = ipu.utils.auto_select_ipus(cfg, 1)
    ipu.utils.configure_ipu_system(cfg)

SDK 2.1-2.3 kept these functions but deprecated them in favour of ``IPUConfig``; this
module reproduces that form (same signatures, checks, messages and deprecation warning).
``ipu.utils.configure_ipu_system`` accepts either an ``IPUConfig`` or ``IpuOptions``.

Profiling arguments (``profiling``, ``enable_ipu_events``, ``use_poplar_text_report``,
``profile_execution``) decide which events ``gen_ipu_ops.ipu_event_trace()`` returns, which
the ``extract_*`` helpers at the end of this module read::

    report = gen_ipu_ops.ipu_event_trace()
    ...
    events = sess.run(report)
    print(ipu.utils.extract_all_strings_from_event_trace(events))

The events are the emulator's (``runtime/event_trace.py`` says what they carry); its
simulated execution traces come from ``POPLAR_ENGINE_OPTIONS`` (``autoReport.*``).
"""
from __future__ import annotations

import functools
import json
import logging
import re
import sys
import time

from ipu_emulator.runtime import configured_system, event_trace
from ipu_emulator.ipu.config import (  # noqa: F401  (re-exported, as in the SDK)
    DeviceConfig,
    DeviceConnectionType,
    ExecutionProfileType,
    IPUConfig,
    IpuOptions,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
    configure_ipu_system,
    get_ipu_config,
)

_logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------
# Deprecation of the functional configuration API (SDK 2.1-2.3)
# --------------------------------------------------------------------------------------

DEPRECATION_INSTRUCTIONS = (
    "Configuring IPU session options for TensorFlow has changed and this function will be "
    "removed in a future release. Use an IPUConfig instance instead. For more information "
    "on how to create an equivalent config in the new IPUConfig API, refer to the API "
    "changes for SDK 2.1 in the TensorFlow documentation.")

# Functions whose warning was already shown: TensorFlow warns once per function.
_warned_functions = set()


def _sdk_module_name(module_name):
    """Where the SDK defines it: ``ipu_emulator.ipu.utils`` -> ``tensorflow.python.ipu.utils``."""
    return module_name.replace("ipu_emulator.ipu", "tensorflow.python.ipu", 1)


def _deprecated_config_function(func):
    """Log TensorFlow's deprecation warning the first time ``func`` is called."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        if func.__name__ not in _warned_functions:
            _warned_functions.add(func.__name__)
            caller = sys._getframe(1)
            _logger.warning(
                "From %s:%d: %s (from %s) is deprecated and will be removed in a future "
                "version.\nInstructions for updating:\n%s",
                caller.f_code.co_filename, caller.f_lineno, func.__name__,
                _sdk_module_name(func.__module__), DEPRECATION_INSTRUCTIONS)
        return func(*args, **kwargs)

    wrapper.__doc__ = (
        "THIS FUNCTION IS DEPRECATED. It will be removed in a future version.\n"
        f"Instructions for updating:\n{DEPRECATION_INSTRUCTIONS}\n\n{func.__doc__ or ''}")
    return wrapper


# --------------------------------------------------------------------------------------
# create_ipu_config and device selection
# --------------------------------------------------------------------------------------

_SCHEDULER_NAMES = {  # SDK 2.0 took the scheduler as a string
    "": SchedulingAlgorithm.CHOOSE_BEST,
    "choosebest": SchedulingAlgorithm.CHOOSE_BEST,
    "clustering": SchedulingAlgorithm.CLUSTERING,
    "postorder": SchedulingAlgorithm.POST_ORDER,
    "lookahead": SchedulingAlgorithm.LOOK_AHEAD,
    "shortestpath": SchedulingAlgorithm.SHORTEST_PATH,
}


def _scheduling_algorithm(scheduler_selection) -> SchedulingAlgorithm:
    if isinstance(scheduler_selection, SchedulingAlgorithm):
        return scheduler_selection
    if isinstance(scheduler_selection, str):
        key = scheduler_selection.replace("_", "").replace("-", "").lower()
        if key in _SCHEDULER_NAMES:
            return _SCHEDULER_NAMES[key]
    raise ValueError(f"Unknown scheduler_selection {scheduler_selection!r}: expected a "
                     "SchedulingAlgorithm or one of 'Clustering', 'PostOrder', "
                     "'LookAhead', 'ShortestPath'.")


@_deprecated_config_function
def create_ipu_config(profiling=False,
                      enable_ipu_events=False,
                      use_poplar_text_report=False,
                      use_poplar_cbor_report=False,
                      profile_execution=None,
                      enable_poplar_serialized_graph=False,
                      report_every_nth_execution=0,
                      max_report_size=0x10000000,
                      report_directory="",
                      scheduler_selection="",
                      always_rearrange_copies_on_the_host=False,
                      merge_infeed_io_copies=False,
                      disable_graph_convolution_caching=False,
                      disable_graph_outlining=False,
                      retain_control_dependencies=False,
                      max_cross_replica_sum_buffer_size=0,
                      max_inter_ipu_copies_buffer_size=0,
                      max_scheduler_lookahead_depth=5,
                      max_scheduler_search_space_size=64,
                      prefetch_data_streams=True,
                      selection_order=None,
                      enable_experimental_remote_buffer_embedding=False):
    """Create an ``IpuOptions`` with the given session-wide options.

    ``profile_execution`` may be ``True`` (device profile), ``False``/``None`` or an
    ``ExecutionProfileType``; it requires ``profiling``.  ``scheduler_selection`` may be a
    ``SchedulingAlgorithm`` or the SDK 2.0 string form (``""`` = choose the best).
    """
    if profiling and enable_ipu_events:
        raise Exception("`profiling` and `enable_ipu_events` are mutually exclusive")
    if profile_execution and not profiling:
        raise Exception("`profiling` is required when `profile_execution` is set")
    if not isinstance(profile_execution, (type(None), bool, ExecutionProfileType)):
        raise Exception("`profile_execution` must be True, False, or an "
                        "ExecutionProfileType instance")
    if selection_order is None:
        selection_order = SelectionOrder.AUTO
    if not isinstance(selection_order, SelectionOrder):
        raise TypeError("`selection_order` must be a SelectionOrder instance.")

    if profile_execution is True:
        execution_trace_type = ExecutionProfileType.DEVICE_PROFILE
    elif isinstance(profile_execution, ExecutionProfileType):
        execution_trace_type = profile_execution
    else:
        execution_trace_type = ExecutionProfileType.NO_PROFILE

    opts = IpuOptions()
    opts.profiling.enable_ipu_trace_events = profiling or enable_ipu_events
    opts.profiling.enable_compilation_trace = profiling
    opts.profiling.enable_io_trace = profiling
    opts.profiling.execution_trace_type = execution_trace_type
    opts.profiling.enable_poplar_reports_text = use_poplar_text_report
    opts.profiling.enable_poplar_reports_cbor = use_poplar_cbor_report
    opts.profiling.enable_poplar_graph = enable_poplar_serialized_graph
    opts.profiling.report_every_nth_execution = report_every_nth_execution
    opts.profiling.max_report_size = max_report_size
    opts.profiling.report_directory = report_directory

    opts.ipu_model_config.compile_ipu_code = True
    opts.ipu_model_config.ipu_model_version = "ipu2"
    opts.device_connection_type = DeviceConnectionType.ALWAYS
    opts.selection_order = selection_order

    speed_size = opts.speed_size_config
    speed_size.allow_recompute = False
    speed_size.always_rearrange_copies_on_the_host = always_rearrange_copies_on_the_host
    speed_size.merge_infeed_io_copies = merge_infeed_io_copies
    speed_size.disable_graph_convolution_caching = disable_graph_convolution_caching
    speed_size.disable_graph_outlining = disable_graph_outlining
    speed_size.scheduler_selection = _scheduling_algorithm(scheduler_selection)
    opts.enable_graph_outlining = not disable_graph_outlining

    opts.retain_control_dependencies = retain_control_dependencies
    opts.max_cross_replica_sum_buffer_size = max_cross_replica_sum_buffer_size
    opts.max_inter_ipu_copies_buffer_size = max_inter_ipu_copies_buffer_size
    opts.max_scheduler_lookahead_depth = max_scheduler_lookahead_depth
    opts.max_scheduler_search_space_size = max_scheduler_search_space_size
    opts.prefetch_data_streams = prefetch_data_streams
    opts.enable_experimental_remote_buffer_embedding = (
        enable_experimental_remote_buffer_embedding)
    return opts


@_deprecated_config_function
def auto_select_ipus(opts, num_ipus):
    """Add one TF device per element of ``num_ipus`` (an int is a single device)."""
    if opts.device_config:
        raise Exception("IPU devices have already been configured.")
    if not isinstance(num_ipus, (int, list, tuple)):
        raise Exception("`num_ipus` must be an integer, list or tuple.")
    counts = [num_ipus] if isinstance(num_ipus, int) else num_ipus
    opts.device_config.extend(DeviceConfig(auto_count=n) for n in counts)
    return opts


@_deprecated_config_function
def select_ipus(opts, indices):
    """Add one TF device per ``gc-info -l`` device id in ``indices`` (list or tuple)."""
    if opts.device_config:
        raise Exception("IPU devices have already been configured.")
    if not isinstance(indices, (list, tuple)):
        raise Exception("`indices` must be a list or tuple.")
    if len(set(indices)) != len(indices):
        raise Exception("All device indices in `indices` must be unique.")
    opts.device_config.extend(DeviceConfig(cfg_index=i) for i in indices)
    return opts


# --------------------------------------------------------------------------------------
# set_*_options
# --------------------------------------------------------------------------------------


def _check_dictionary(value, argument_name):
    if value is not None and not isinstance(value, dict):
        raise Exception(f"`{argument_name}` must be a dictionary")
    return dict(value or {})


@_deprecated_config_function
def set_ipu_model_options(opts, compile_ipu_code=True, tiles_per_ipu=None,
                          ipu_model_version=None):
    """Options of the IPU Model; ``None`` leaves a setting unchanged."""
    opts.ipu_model_config.compile_ipu_code = compile_ipu_code
    if tiles_per_ipu is not None:
        opts.ipu_model_config.tiles_per_ipu = tiles_per_ipu
    if ipu_model_version is not None:
        opts.ipu_model_config.ipu_model_version = ipu_model_version
    return opts


@_deprecated_config_function
def set_recomputation_options(opts, allow_recompute=True, allow_stateful_recompute=None):
    """Recompute activations in the backward pass instead of storing them."""
    opts.speed_size_config.allow_recompute = allow_recompute
    if allow_stateful_recompute is not None:
        opts.speed_size_config.allow_stateful_recompute = allow_stateful_recompute
    return opts


@_deprecated_config_function
def set_floating_point_behaviour_options(opts, inv=True, div0=True, oflo=True, esr=True,
                                         nanoo=True):
    """Floating-point exceptions and stochastic rounding (all on by default here)."""
    if not isinstance(esr, StochasticRoundingBehaviour):
        esr = StochasticRoundingBehaviour.from_bool(esr)
    fp = opts.floating_point_behaviour
    fp.inv, fp.div0, fp.oflo, fp.esr, fp.nanoo = inv, div0, oflo, esr, nanoo
    return opts


@_deprecated_config_function
def set_ipu_connection_type(opts, connection_type=None, ipu_version=None,
                            enable_remote_buffers=False):
    """When to attach to the device; NEVER/PRE_COMPILE need the target ``ipu_version``.

    ``ipu_version`` may be the SDK 2.0 integer (1, 2) or a string such as ``"ipu2"``.
    """
    if connection_type is None:
        connection_type = DeviceConnectionType.ALWAYS
    if isinstance(ipu_version, int):
        ipu_version = f"ipu{ipu_version}"
    needs_version = (DeviceConnectionType.NEVER, DeviceConnectionType.PRE_COMPILE)
    if connection_type in needs_version and not ipu_version:
        raise Exception("`ipu_version` must be set when `connection_type` is "
                        "DeviceConnectionType.NEVER or DeviceConnectionType.PRE_COMPILE")
    opts.device_connection_type = connection_type
    opts.ipu_version = ipu_version or ""
    opts.enable_remote_buffers_without_device = enable_remote_buffers
    return opts


@_deprecated_config_function
def set_optimization_options(opts,
                             combine_embedding_lookups=False,
                             combine_matmuls=False,
                             max_cross_replica_sum_buffer_size=0,
                             max_reduce_scatter_buffer_size=0,
                             max_inter_ipu_copies_buffer_size=0,
                             max_send_recv_cluster_size=0,
                             minimum_remote_tensor_size=128,
                             merge_remote_buffers=MergeRemoteBuffersBehaviour.NO_MERGING,
                             gather_simplifier=False,
                             triangular_solve_expander_block_size=0,
                             cholesky_block_size=0,
                             enable_fast_math=False):
    """Compiler optimisations (``merge_remote_buffers`` also accepts the old bool)."""
    if isinstance(merge_remote_buffers, bool):
        merge_remote_buffers = (MergeRemoteBuffersBehaviour.MERGE if merge_remote_buffers
                                else MergeRemoteBuffersBehaviour.NO_MERGING)
    opts.enable_multi_slice_combiner = combine_embedding_lookups
    opts.enable_matmul_combiner = combine_matmuls
    opts.max_cross_replica_sum_buffer_size = max_cross_replica_sum_buffer_size
    opts.max_reduce_scatter_buffer_size = max_reduce_scatter_buffer_size
    opts.max_inter_ipu_copies_buffer_size = max_inter_ipu_copies_buffer_size
    opts.max_send_recv_cluster_size = max_send_recv_cluster_size
    opts.minimum_remote_tensor_size = minimum_remote_tensor_size
    opts.merge_remote_buffers = merge_remote_buffers
    opts.enable_gather_simplifier = gather_simplifier
    opts.triangular_solve_expander_block_size = triangular_solve_expander_block_size
    opts.cholesky_block_size = cholesky_block_size
    opts.enable_fast_math = enable_fast_math
    return opts


@_deprecated_config_function
def set_compilation_options(opts, compilation_options=None):
    """Poplar Engine options (a dict of option name to value)."""
    opts.compilation_options.update(
        _check_dictionary(compilation_options, "compilation_options"))
    return opts


@_deprecated_config_function
def set_convolution_options(opts, convolution_options=None):
    """Poplar options for convolutions."""
    opts.convolution_options.update(
        _check_dictionary(convolution_options, "convolution_options"))
    return opts


@_deprecated_config_function
def set_matmul_options(opts, matmul_options=None, clear_pass_type=False):
    """Poplar options for matmuls."""
    opts.matmul_options.update(_check_dictionary(matmul_options, "matmul_options"))
    opts.clear_matmul_pass_type = clear_pass_type
    return opts


@_deprecated_config_function
def set_pooling_options(opts, pooling_options=None):
    """Poplar options for pooling."""
    opts.pooling_options.update(_check_dictionary(pooling_options, "pooling_options"))
    return opts


@_deprecated_config_function
def set_report_options(opts, report_options=None, graph_options=None,
                       execution_options=None):
    """Options of the Poplar compilation, graph and execution reports."""
    profiling = opts.profiling
    profiling.options.update(_check_dictionary(report_options, "report_options"))
    profiling.graph_options.update(_check_dictionary(graph_options, "graph_options"))
    profiling.execution_options.update(
        _check_dictionary(execution_options, "execution_options"))
    return opts


@_deprecated_config_function
def set_serialization_options(opts, output_folder=""):
    """Folder where compiled executables are serialized."""
    opts.serialization_folder = output_folder
    return opts


@_deprecated_config_function
def set_io_tile_options(opts, num_io_tiles, place_ops_on_io_tiles=None,
                        io_tile_available_memory_proportion=None):
    """Tiles reserved for I/O, and whether operations may be placed on them."""
    if place_ops_on_io_tiles and num_io_tiles == 0:
        raise ValueError("Cannot place ops on I/O tiles when num_io_tiles == 0")
    opts.num_io_tiles = num_io_tiles
    if place_ops_on_io_tiles is not None:
        opts.place_ops_on_io_tiles = place_ops_on_io_tiles
    if io_tile_available_memory_proportion is not None:
        opts.io_tile_available_memory_proportion = io_tile_available_memory_proportion
    return opts


@_deprecated_config_function
def set_gcl_options(opts, num_io_tiles=0, gcl_options=None):
    """Options of the collective communication library (GCL)."""
    opts.gcl_options.update(_check_dictionary(gcl_options, "gcl_options"))
    opts.gcl_num_io_tiles = num_io_tiles
    return opts


# --------------------------------------------------------------------------------------
# Queries and other utilities
# --------------------------------------------------------------------------------------


def running_on_ipu_model():
    """True when ``TF_POPLAR_FLAGS`` contains ``--use_ipu_model``."""
    return configured_system.running_on_ipu_model()


def get_num_of_ipus_in_device(ipu_device, device="cpu"):
    """Number of IPUs in the TF device ``ipu_device``, e.g. ``"/device:IPU:0"``."""
    match = re.search(r"IPU:(\d+)\s*$", str(ipu_device), flags=re.IGNORECASE)
    if match is None:
        raise ValueError(f"{ipu_device!r} is not an IPU device name such as "
                         "'/device:IPU:0'.")
    return configured_system.device(int(match.group(1))).num_ipus


def reset_ipu_seed(seed, device="/device:IPU:0", cpu_device="cpu",
                   experimental_identical_replicas=False):
    """Reset the IPU's random seed.  A no-op here: the CPU uses TensorFlow's own seeds."""
    del seed, device, cpu_device, experimental_identical_replicas


def move_variable_initialization_to_cpu(graph=None):
    """Place the initializers of the graph's global variables on ``/device:CPU:0`` (TF1).

    On an IPU this keeps random initialisers off the device.  On the CPU nothing changes
    numerically; the placement is still done so graphs look as they would on the SDK.
    Ops reading resource handles are skipped (moving them would break colocation).
    Returns ``None``, like the SDK function.
    """
    import tensorflow as tf  # lazy: only this utility needs TensorFlow

    if tf.executing_eagerly() and graph is None:
        return None  # eager variables are initialised on creation: nothing to move
    graph = graph if graph is not None else tf.compat.v1.get_default_graph()

    def reads_resource(op):
        return any(t.dtype == tf.resource for t in op.inputs)

    pending = []
    for variable in graph.get_collection(tf.compat.v1.GraphKeys.GLOBAL_VARIABLES):
        initializer = getattr(variable, "initializer", None)
        if initializer is not None and len(initializer.inputs) > 1:
            pending.append(initializer.inputs[1].op)  # the op computing the initial value
    visited = set()
    while pending:  # walk from each initial value up to the graph's inputs
        op = pending.pop()
        if op in visited or reads_resource(op):
            continue
        visited.add(op)
        op._set_device("/device:CPU:0")  # pylint: disable=protected-access
        pending.extend(t.op for t in op.inputs)
    return None


# --- reading an event trace (SDK 1.x-2.0) ---------------------------------------------------
# ``events`` is what running ``gen_ipu_ops.ipu_event_trace()`` returned: serialized
# ``IpuTraceEvent`` messages (a NumPy array from ``Session.run``, an eager tensor, or a list).

def _parsed(events):
    if hasattr(events, "numpy"):
        events = events.numpy()
    return [event_trace.IpuTraceEvent.FromString(bytes(e)) for e in events]


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


def extract_all_strings_from_event_trace(events):
    """All the events' data as one string: for each event a rule, its local time and what it
    carries (module name, duration, report)."""
    kinds = event_trace.IpuTraceEvent
    parts = []
    for event in _parsed(events):
        when = time.strftime("%F %T %z", time.localtime(event.timestamp))
        if event.type == kinds.COMPILE_BEGIN:
            body = "Compile begin: %s\n" % _text(event.compile_begin.module_name)
        elif event.type == kinds.COMPILE_END:
            body = "Compile end: %s\nDuration: %d us\n%s" % (
                _text(event.compile_end.module_name), event.compile_end.duration,
                _text(event.compile_end.compilation_report))
        elif event.type == kinds.HOST_TO_DEVICE_TRANSFER:
            body = "Host->Device\n%s\n" % _text(event.data_transfer.data_transfer)
        elif event.type == kinds.DEVICE_TO_HOST_TRANSFER:
            body = "Device->Host\n%s\n" % _text(event.data_transfer.data_transfer)
        elif event.type == kinds.LOAD_ENGINE:
            body = "Load engine: %s\n" % _text(event.load_engine.module_name)
        elif event.type == kinds.EXECUTE:
            body = "Execute: %s\n%s" % (_text(event.execute.module_name),
                                         _text(event.execute.execution_report))
        else:
            body = "Unknown event"
        parts.append("-" * 70 + "\n=> @ " + when + ": " + body + "\n")
    return "".join(parts)


def extract_all_types_from_event_trace(events):
    """The type of each event (``IpuTraceEvent.COMPILE_BEGIN``...), in order."""
    return [event.type for event in _parsed(events)]


def extract_all_events(events):
    """The events as ``IpuTraceEvent`` messages."""
    return _parsed(events)


def _reports(events, kind, payload, field):
    wanted = getattr(event_trace.IpuTraceEvent, kind)
    found = []
    for event in _parsed(events):
        if event.type != wanted:
            continue
        message = getattr(event, payload)
        try:
            module, report = _text(message.module_name), _text(getattr(message, field))
        except UnicodeDecodeError:
            continue
        if report:
            found.append((module, report))
    return found


def extract_compile_reports(events):
    """``(module name, compilation report)`` of each compile end that has a report."""
    return _reports(events, "COMPILE_END", "compile_end", "compilation_report")


def extract_execute_reports(events):
    """``(module name, execution report)`` of each execution that has a report."""
    return _reports(events, "EXECUTE", "execute", "execution_report")


def extract_poplar_serialized_graphs(events):
    """``(module name, serialized graph)`` of each compile end that has one: never any here,
    since the emulator builds no Poplar graph."""
    return _reports(events, "COMPILE_END", "compile_end", "poplar_graph")


def extract_all_io_events(events):
    """``(event type, tensor name)`` for each tensor of each host<->device transfer event."""
    kinds = event_trace.IpuTraceEvent
    found = []
    for event in _parsed(events):
        if event.type in (kinds.HOST_TO_DEVICE_TRANSFER, kinds.DEVICE_TO_HOST_TRANSFER):
            try:
                payload = json.loads(_text(event.data_transfer.data_transfer))
            except (UnicodeDecodeError, ValueError):
                continue
            found.extend((event.type, tensor["name"]) for tensor in payload.get("tensors", []))
    return found


# Tile memory from Poplar's graph report, and the data-export helpers: not emulated.  They
# import, and raise NotImplementedError when called.
_NOT_EMULATED = ["get_memory_size_from_events", "export_dataset_to_file",
                 "export_inputs_to_file"]
from ipu_emulator.ipu import _unsupported  # noqa: E402
globals().update(_unsupported.stubs("tensorflow.python.ipu.utils", _NOT_EMULATED))

__all__ = _NOT_EMULATED + [
    "extract_all_strings_from_event_trace", "extract_all_types_from_event_trace",
    "extract_all_events", "extract_all_io_events", "extract_compile_reports",
    "extract_execute_reports", "extract_poplar_serialized_graphs",
    "IPUConfig", "IpuOptions", "SelectionOrder", "ExecutionProfileType",
    "DeviceConnectionType", "MergeRemoteBuffersBehaviour", "SchedulingAlgorithm",
    "StochasticRoundingBehaviour", "get_ipu_config", "configure_ipu_system",
    "create_ipu_config", "auto_select_ipus", "select_ipus", "set_ipu_model_options",
    "set_recomputation_options", "set_floating_point_behaviour_options",
    "set_ipu_connection_type", "set_optimization_options", "set_compilation_options",
    "set_convolution_options", "set_matmul_options", "set_pooling_options",
    "set_report_options", "set_serialization_options", "set_io_tile_options",
    "set_gcl_options", "running_on_ipu_model", "get_num_of_ipus_in_device",
    "reset_ipu_seed", "move_variable_initialization_to_cpu",
]
