"""The configuration record: what an IPU configuration becomes once validated.

The SDK turns every configuration (an ``IPUConfig``, or the old functional API's
``create_ipu_config`` & co.) into the ``IpuOptions`` protobuf of its ``config.proto``; the
dataclasses here stand in for it, with the enums of the same file.  ``ipu.config`` and
``ipu.utils`` build and read it, and re-export these names; the emulated backend
(``ipu_backend``) turns it into the configured system.  No TensorFlow import: configuring
stays cheap.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import List, Optional

# --------------------------------------------------------------------------------------
# Enums (values as in the SDK's config.proto)
# --------------------------------------------------------------------------------------


class SelectionOrder(enum.Enum):
    """How the shards of a multi-IPU device map onto physical IPUs."""

    AUTO = 0
    ZIGZAG = 1
    SNAKE = 2
    HOOF = 3


class DeviceConnectionType(enum.Enum):
    """When the process attaches to the IPU device."""

    ALWAYS = 0
    ON_DEMAND = 1
    NEVER = 2
    PRE_COMPILE = 3


class ExecutionProfileType(enum.Enum):
    """Granularity of execution profiling (old ``create_ipu_config`` API)."""

    NO_PROFILE = 0
    DEVICE_PROFILE = 1
    IPU_PROFILE = 2
    TILE_PROFILE = 3


class StochasticRoundingBehaviour(enum.Enum):
    """Stochastic rounding: off, on, or only where replicas stay identical."""

    OFF = 0
    ON = 1
    REPLICA_IDENTICAL_ONLY = 2

    @staticmethod
    def from_bool(value: bool) -> "StochasticRoundingBehaviour":
        """Map the pre-SDK-2.5 boolean ``esr`` setting onto the enum."""
        return StochasticRoundingBehaviour.ON if value else StochasticRoundingBehaviour.OFF


class MergeRemoteBuffersBehaviour(enum.Enum):
    """Whether remote buffers with compatible shapes are merged."""

    NO_MERGING = 0
    MERGE = 1
    IF_BENEFICIAL = 2


class SchedulingAlgorithm(enum.Enum):
    """Instruction scheduler used by the compiler."""

    CHOOSE_BEST = 0
    CLUSTERING = 1
    POST_ORDER = 2
    LOOK_AHEAD = 3
    SHORTEST_PATH = 4


# --------------------------------------------------------------------------------------
# The IpuOptions record: what a configuration becomes once validated
# --------------------------------------------------------------------------------------
# The SDK converts every configuration into the ``IpuOptions`` protobuf from config.proto;
# the old functional API (ipu.utils.create_ipu_config & co.) builds it directly.  These
# dataclasses play that role, with proto3 defaults (zeros, empty, first enum value) and
# field names following config.proto where they are known.  ipu.config (configure_ipu_system,
# get_ipu_config) and ipu.utils re-export it.


@dataclass
class DeviceConfig:
    """One TensorFlow IPU device: either a number of IPUs or a ``gc-info -l`` id."""

    auto_count: Optional[int] = None
    cfg_index: Optional[int] = None


@dataclass
class IpuModelConfig:
    compile_ipu_code: bool = False
    tiles_per_ipu: int = 0
    ipu_model_version: str = ""


@dataclass
class ProfilingConfig:
    enable_ipu_trace_events: bool = False
    enable_compilation_trace: bool = False
    enable_io_trace: bool = False
    execution_trace_type: ExecutionProfileType = ExecutionProfileType.NO_PROFILE
    report_every_nth_execution: int = 0
    enable_poplar_reports_text: bool = False
    enable_poplar_reports_cbor: bool = False
    enable_poplar_graph: bool = False
    max_report_size: int = 0
    report_directory: str = ""
    options: dict = field(default_factory=dict)
    graph_options: dict = field(default_factory=dict)
    execution_options: dict = field(default_factory=dict)


@dataclass
class FloatingPointBehaviourConfig:
    inv: bool = False
    div0: bool = False
    oflo: bool = False
    esr: StochasticRoundingBehaviour = StochasticRoundingBehaviour.OFF
    nanoo: bool = False


@dataclass
class SpeedSizeConfig:
    allow_recompute: bool = False
    allow_stateful_recompute: bool = False
    always_rearrange_copies_on_the_host: bool = False
    disable_graph_convolution_caching: bool = False
    disable_graph_outlining: bool = False
    merge_infeed_io_copies: bool = False
    scheduler_selection: SchedulingAlgorithm = SchedulingAlgorithm.CHOOSE_BEST


@dataclass
class IpuOptions:
    """Stand-in for the ``IpuOptions`` protobuf (attribute access, value equality)."""

    device_config: List[DeviceConfig] = field(default_factory=list)
    selection_order: SelectionOrder = SelectionOrder.AUTO
    ipu_model_config: IpuModelConfig = field(default_factory=IpuModelConfig)
    profiling: ProfilingConfig = field(default_factory=ProfilingConfig)
    floating_point_behaviour: FloatingPointBehaviourConfig = field(
        default_factory=FloatingPointBehaviourConfig
    )
    speed_size_config: SpeedSizeConfig = field(default_factory=SpeedSizeConfig)
    device_connection_type: DeviceConnectionType = DeviceConnectionType.ALWAYS
    ipu_version: str = ""
    enable_remote_buffers_without_device: bool = False
    # Poplar option dictionaries, option name -> value (the proto stores string pairs).
    compilation_options: dict = field(default_factory=dict)
    gcl_options: dict = field(default_factory=dict)
    gcl_num_io_tiles: int = 0
    convolution_options: dict = field(default_factory=dict)
    matmul_options: dict = field(default_factory=dict)
    pooling_options: dict = field(default_factory=dict)
    slice_options: dict = field(default_factory=dict)
    clear_matmul_pass_type: bool = False
    serialization_folder: str = ""
    # Optimisations.
    prefetch_data_streams: bool = False
    retain_control_dependencies: bool = False
    enable_experimental_remote_buffer_embedding: bool = False
    enable_multi_slice_combiner: bool = False
    enable_matmul_combiner: bool = False
    enable_graph_outlining: bool = False
    enable_gather_simplifier: bool = False
    enable_fast_math: bool = False
    enable_dot_strength: bool = False
    enable_dynamic_slice_replacement: bool = False
    enable_prng_stability: bool = False
    max_cross_replica_sum_buffer_size: int = 0
    max_reduce_scatter_buffer_size: int = 0
    max_inter_ipu_copies_buffer_size: int = 0
    max_send_recv_cluster_size: int = 0
    max_reduce_many_buffer_size: int = 0
    max_all_gather_buffer_size: int = 0
    minimum_remote_tensor_size: int = 0
    merge_remote_buffers: MergeRemoteBuffersBehaviour = MergeRemoteBuffersBehaviour.NO_MERGING
    triangular_solve_expander_block_size: int = 0
    cholesky_block_size: int = 0
    max_scheduler_lookahead_depth: int = 0
    max_scheduler_search_space_size: int = 0
    # I/O tiles.
    num_io_tiles: int = 0
    place_ops_on_io_tiles: bool = False
    io_tile_available_memory_proportion: float = 0.0
    # Norms and multi-replica distribution.
    use_stable_norm_statistics: bool = False
    distributed_batch_norm_replica_group_size: int = 0
    multi_replica_process_count: int = 0
    multi_replica_process_index: int = 0


__all__ = ['SelectionOrder', 'DeviceConnectionType', 'ExecutionProfileType', 'StochasticRoundingBehaviour', 'MergeRemoteBuffersBehaviour', 'SchedulingAlgorithm', 'DeviceConfig', 'IpuModelConfig', 'ProfilingConfig', 'FloatingPointBehaviourConfig', 'SpeedSizeConfig', 'IpuOptions']
