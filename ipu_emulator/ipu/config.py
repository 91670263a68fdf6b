"""IPU system configuration: ``IPUConfig`` and ``configure_ipu_system`` (SDK >= 2.1 API).

An ``IPUConfig`` is a tree of option categories with typed leaf options.  Setting options
does nothing by itself; ``configure_ipu_system`` validates the tree, turns it into an
``IpuOptions`` record (the emulator's stand-in for the ``IpuOptions`` protobuf,
:mod:`ipu_emulator.runtime.ipu_options`) and hands it to the emulated backend
(:mod:`ipu_emulator.runtime.ipu_backend`), which sets up the configured system::

    from ipu_emulator.ipu import config

    cfg = config.IPUConfig()
    cfg.auto_select_ipus = 2            # one TF device /device:IPU:0 made of 2 IPUs
    cfg.ipu_model.tiles_per_ipu = 4
    cfg.configure_ipu_system()

Errors (types and messages) are the ones the Graphcore SDK raises.  Neither this module nor
the backend imports TensorFlow until one of its error types has to be raised, so importing
this module stays cheap.
"""
from __future__ import annotations

import copy
import difflib
import enum
import json
import logging
import typing
from dataclasses import dataclass
from typing import List, Optional

from ipu_emulator.runtime import configured_system, ipu_backend
# The configuration record and its enums; config.SelectionOrder etc. are the SDK's names.
from ipu_emulator.runtime.ipu_options import (  # noqa: F401  (ProfilingConfig, SpeedSizeConfig: re-exported)
    DeviceConfig, DeviceConnectionType, ExecutionProfileType, FloatingPointBehaviourConfig,
    IpuModelConfig, IpuOptions, MergeRemoteBuffersBehaviour, ProfilingConfig,
    SchedulingAlgorithm, SelectionOrder, SpeedSizeConfig, StochasticRoundingBehaviour)

_logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------
# The attribute machinery shared by IPUConfig and its categories
# --------------------------------------------------------------------------------------

_INT_OR_INTS = typing.Union[int, typing.List[int], typing.Tuple[int, ...]]


@dataclass(frozen=True)
class _Option:
    """Declaration of one leaf option of a config category."""

    name: str
    default: object
    doc: str
    annotation: object = None  # a typing annotation when more than one type is accepted
    deprecated: str = ""  # instructions logged when a deprecated option is set


def _type_text(expected) -> str:
    """How the SDK names a type in its TypeError: the class name or the annotation text."""
    return expected.__name__ if isinstance(expected, type) else str(expected)


def _matches_type(value, expected) -> bool:
    """Strict type check: exact classes, so ``True`` is not an ``int`` and ``1`` no bool."""
    origin, args = typing.get_origin(expected), typing.get_args(expected)
    if origin is typing.Union:
        return any(_matches_type(value, arg) for arg in args)
    if origin is list:
        return type(value) is list and all(_matches_type(v, args[0]) for v in value)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return type(value) is tuple and all(_matches_type(v, args[0]) for v in value)
        return (type(value) is tuple and len(value) == len(args)
                and all(_matches_type(v, a) for v, a in zip(value, args)))
    return type(value) is expected


class AttributeMetadata:
    """Name, type, default, deprecation and documentation of one config attribute."""

    def __init__(self, name, doc, default, type, deprecated_msg=""):  # noqa: A002
        self.name = name
        self.__doc__ = doc
        self.doc = doc
        self.default = default
        self.type = type
        self.deprecated = bool(deprecated_msg)
        self.deprecated_msg = deprecated_msg

    @property
    def type_text(self) -> str:
        return _type_text(self.type)

    def check_type(self, value) -> None:
        if not _matches_type(value, self.type):
            raise TypeError(
                f"Trying to set {self.name} to {value}, but it must be of type {self.type_text}"
            )

    def warn_if_deprecated(self) -> None:
        if self.deprecated:
            _logger.warning(f"{self.name} has been deprecated: {self.deprecated_msg}")

    def __repr__(self):
        return (f"AttributeMetadata(name={self.name!r}, type={self.type_text}, "
                f"default={self.default!r}, deprecated={self.deprecated})")


class _ConfigBase:
    """A category of options.  Subclasses declare ``_OPTIONS`` and ``_CATEGORIES``."""

    _OPTIONS: typing.Tuple[_Option, ...] = ()
    _CATEGORIES: typing.Tuple[typing.Tuple[str, type], ...] = ()  # (name, category class)

    def __init__(self, _prefix: str = ""):
        # object.__setattr__ bypasses the type checks: defaults are valid by construction.
        object.__setattr__(self, "_prefix", _prefix)
        for option in self._OPTIONS:
            object.__setattr__(self, option.name, copy.deepcopy(option.default))
        for name, category_class in self._CATEGORIES:
            object.__setattr__(self, name, category_class(f"{_prefix}{name}."))

    # -- declarations ---------------------------------------------------------------

    @classmethod
    def _option(cls, name) -> Optional[_Option]:
        return next((o for o in cls._OPTIONS if o.name == name), None)

    @classmethod
    def _is_category(cls, name) -> bool:
        return any(category_name == name for category_name, _ in cls._CATEGORIES)

    @classmethod
    def _attribute_names(cls) -> List[str]:
        return [o.name for o in cls._OPTIONS] + [name for name, _ in cls._CATEGORIES]

    def _metadata_for(self, option: _Option) -> AttributeMetadata:
        return AttributeMetadata(
            name=self._prefix + option.name,
            doc=option.doc,
            default=copy.deepcopy(option.default),
            type=option.annotation if option.annotation is not None else type(option.default),
            deprecated_msg=option.deprecated,
        )

    def _categories(self):
        return [(name, getattr(self, name)) for name, _ in self._CATEGORIES]

    # -- attribute access -----------------------------------------------------------

    def __setattr__(self, name, value):
        option = self._option(name)
        if option is not None:
            metadata = self._metadata_for(option)
            metadata.check_type(value)
            metadata.warn_if_deprecated()
            object.__setattr__(self, name, value)
        elif self._is_category(name):
            raise Exception(f"{self._prefix}{name} is a category and cannot be assigned to.")
        else:
            raise ValueError(self._unknown_attribute_message(name))

    def __getattr__(self, name):
        # Only reached when normal lookup fails.  Private and dunder probes (copy, pickle,
        # IPython display hooks) must get the AttributeError those protocols expect.
        if name.startswith("_"):
            raise AttributeError(name)
        raise ValueError(self._unknown_attribute_message(name))

    def _unknown_attribute_message(self, name) -> str:
        return f"'{name}' is not a valid attribute of this config. {self._suggestion(name)}"

    def _suggestion(self, name) -> str:
        """Closest attribute of this category, else closest option anywhere below it."""
        match = difflib.get_close_matches(name, self._attribute_names(), n=1)
        if match:
            return f"Did you mean '{self._prefix}{match[0]}'?"
        full_name_by_short_name = {}
        for full_name in self._nested_full_names():
            full_name_by_short_name.setdefault(full_name.rsplit(".", 1)[-1], full_name)
        match = difflib.get_close_matches(name, list(full_name_by_short_name), n=1)
        if match:
            return f"Did you mean '{full_name_by_short_name[match[0]]}'?"
        return ""

    def _nested_full_names(self) -> List[str]:
        """Full names of every attribute in the sub-categories, shallowest first."""
        names, queue = [], [category for _, category in self._categories()]
        while queue:
            category = queue.pop(0)
            names += [category._prefix + n for n in category._attribute_names()]
            queue += [child for _, child in category._categories()]
        return names

    def _resolve(self, dotted_name: str):
        """(category, attribute name) for a dotted name relative to this category."""
        *path, leaf = dotted_name.split(".")
        node = self
        for part in path:
            child = getattr(node, part)  # unknown names raise the usual ValueError
            if not isinstance(child, _ConfigBase):
                raise ValueError(node._unknown_attribute_message(dotted_name))
            node = child
        if node._option(leaf) is None and not node._is_category(leaf):
            raise ValueError(node._unknown_attribute_message(leaf))
        return node, leaf

    # -- helpers --------------------------------------------------------------------

    def _leaves(self, relative_to: str = ""):
        """Yield (name relative to ``relative_to``, value) for every leaf option below."""
        for option in self._OPTIONS:
            yield (self._prefix + option.name)[len(relative_to):], getattr(self, option.name)
        for _, category in self._categories():
            yield from category._leaves(relative_to)

    def get_attribute_metadata(self, attr: str) -> AttributeMetadata:
        """Metadata of ``attr``, given by its dotted name relative to this category."""
        node, name = self._resolve(attr)
        option = node._option(name)
        if option is None:  # a category: describe it by its class
            category = getattr(node, name)
            return AttributeMetadata(category._prefix.rstrip("."), type(category).__doc__,
                                     None, type(category))
        return node._metadata_for(option)

    def to_dict(self) -> dict:
        """Flat dict keyed by dotted names (full names on an ``IPUConfig``); enums as ints."""
        return {
            name: value.value if isinstance(value, enum.Enum) else copy.deepcopy(value)
            for name, value in self._leaves(relative_to=self._prefix)
        }

    def from_dict(self, dct: dict) -> None:
        """Set the options named in ``dct`` (as produced by :meth:`to_dict`)."""
        if not isinstance(dct, dict):
            raise TypeError(f"Expected a dict, got {type(dct).__name__}.")
        for dotted_name, value in dct.items():
            node, name = self._resolve(dotted_name)
            option = node._option(name)
            if (option is not None and isinstance(option.default, enum.Enum)
                    and type(value) is int):
                value = type(option.default)(value)  # to_dict stores enums as their value
            if option is not None and getattr(node, name) == value and type(
                    getattr(node, name)) is type(value):
                continue  # unchanged: keeps full round trips free of deprecation noise
            setattr(node, name, value)

    def to_json(self) -> str:
        """JSON text of :meth:`to_dict`."""
        return json.dumps(self.to_dict())

    def from_json(self, json_cfg: str) -> None:
        """Set options from JSON text produced by :meth:`to_json`."""
        self.from_dict(json.loads(json_cfg))

    def __str__(self):
        def shown(value):
            return str(value) if isinstance(value, enum.Enum) else repr(value)

        return "\n".join(f"{self._prefix}{name} = {shown(value)}"
                         for name, value in self._leaves(relative_to=self._prefix))

    __repr__ = __str__


# --------------------------------------------------------------------------------------
# Categories
# --------------------------------------------------------------------------------------


class _IPUModelConfig(_ConfigBase):
    """The Poplar IPU Model (selected with ``TF_POPLAR_FLAGS=--use_ipu_model``)."""

    _OPTIONS = (
        _Option("compile_ipu_code", True, "Compile IPU code when running on the IPU Model."),
        _Option("tiles_per_ipu", 0, "Tiles per IPU of the IPU Model; 0 means a full chip."),
        _Option("version", "ipu2", "IPU architecture the IPU Model models: 'ipu1' or 'ipu2'."),
    )


class _DeviceConnectionConfig(_ConfigBase):
    """When and how the process attaches to IPU hardware."""

    _OPTIONS = (
        _Option("type", DeviceConnectionType.ALWAYS, "When to attach to the device."),
        _Option("version", "", "IPU version ('ipu1', 'ipu2', 'ipu21'); required for "
                               "NEVER and PRE_COMPILE connections."),
        _Option("enable_remote_buffers", False,
                "Allow remote buffers when compiling without a device attached."),
    )


class _FloatingPointBehaviourConfig(_ConfigBase):
    """Floating-point exceptions and stochastic rounding."""

    _OPTIONS = (
        _Option("inv", False, "Raise an exception on invalid operations."),
        _Option("div0", False, "Raise an exception on division by zero."),
        _Option("oflo", False, "Raise an exception on overflow."),
        _Option("esr", StochasticRoundingBehaviour.OFF, "Stochastic rounding behaviour."),
        _Option("nanoo", False, "Produce NaN on overflow instead of saturating."),
        _Option("set_all", False, "Enable all of the above (stochastic rounding ON)."),
    )


class _MathConfig(_ConfigBase):
    """Arithmetic simplifications."""

    _OPTIONS = (
        _Option("dot_strength", True, "Strength-reduce dot products where possible."),
        _Option("fast", False, "Allow arithmetic rewrites with no accuracy guarantees."),
    )


class _OptimizationConfig(_ConfigBase):
    """Compiler optimisations."""

    _OPTIONS = (
        _Option("prefetch_data_streams", True, "Prefetch infeed data streams."),
        _Option("combine_embedding_lookups", False, "Fuse multi-slice operations."),
        _Option("combine_matmuls", False, "Fuse matmuls sharing an operand."),
        _Option("enable_graph_outlining", True, "Reuse code for identical sub-graphs."),
        _Option("merge_infeed_io_copies", True, "Merge infeed host-to-device copies."),
        _Option("maximum_cross_replica_sum_buffer_size", 0,
                "Bytes of cross-replica sums that may be merged."),
        _Option("maximum_reduce_scatter_buffer_size", 0,
                "Bytes of reduce-scatters that may be merged."),
        _Option("maximum_inter_ipu_copies_buffer_size", 0,
                "Bytes of inter-IPU copies that may be merged."),
        _Option("maximum_send_recv_cluster_size", 0,
                "Bytes of send/recv operations that may be clustered."),
        _Option("maximum_reduce_many_buffer_size", 0,
                "Bytes of reductions that may be merged."),
        _Option("maximum_all_gather_buffer_size", 0,
                "Bytes of all-gathers that may be merged."),
        _Option("minimum_remote_tensor_size", 128,
                "Smallest tensor (bytes) that may live in remote memory."),
        _Option("merge_remote_buffers", MergeRemoteBuffersBehaviour.IF_BENEFICIAL,
                "Merge compatible remote buffers."),
        _Option("enable_gather_simplifier", True, "Simplify gathers."),
        _Option("triangular_solve_expander_block_size", 0,
                "Block size of triangular solves; 0 = compiler default."),
        _Option("cholesky_block_size", 0, "Block size of Cholesky factorisations."),
        _Option("enable_fast_math", False, "Allow unsafe arithmetic rewrites.",
                deprecated="Use optimizations.math.fast instead."),
        _Option("enable_dynamic_slice_replacement", True,
                "Replace dynamic slices by cheaper operations."),
    )
    _CATEGORIES = (("math", _MathConfig),)


class _IOTilesConfig(_ConfigBase):
    """Tiles reserved for host I/O."""

    _OPTIONS = (
        _Option("num_io_tiles", 0, "Tiles per IPU reserved for I/O."),
        _Option("place_ops_on_io_tiles", False, "Place eligible operations on the I/O tiles."),
        _Option("available_memory_proportion", 0.9,
                "Proportion of I/O tile memory usable for data streams."),
    )


class _SchedulingConfig(_ConfigBase):
    """Instruction scheduling."""

    _OPTIONS = (
        _Option("algorithm", SchedulingAlgorithm.CHOOSE_BEST, "Scheduling algorithm."),
        _Option("maximum_scheduler_lookahead_depth", 5, "Look-ahead depth of LOOK_AHEAD."),
        _Option("maximum_scheduler_search_space_size", 64,
                "Search-space size of LOOK_AHEAD."),
    )


class _ConvolutionConfig(_ConfigBase):
    """Convolutions."""

    _OPTIONS = (_Option("poplar_options", {}, "Poplar options for convolutions."),)


class _MatmulConfig(_ConfigBase):
    """Matrix multiplications."""

    _OPTIONS = (
        _Option("clear_pass_type", False, "Ignore the forward/backward pass type of matmuls."),
        _Option("poplar_options", {}, "Poplar options for matmuls."),
    )


class _SliceConfig(_ConfigBase):
    """Slicing operations."""

    _OPTIONS = (_Option("poplar_options", {}, "Poplar options for slices."),)


class _PoolingConfig(_ConfigBase):
    """Pooling operations."""

    _OPTIONS = (_Option("poplar_options", {}, "Poplar options for pooling."),)


class _NormExperimentalConfig(_ConfigBase):
    """Experimental normalisation options."""

    _OPTIONS = (
        _Option("distributed_batch_norm_replica_group_size", 1,
                "Replicas whose batch-norm statistics are combined."),
    )


class _NormConfig(_ConfigBase):
    """Normalisation layers."""

    _OPTIONS = (
        _Option("use_stable_statistics", False, "Compute statistics in a stabler way."),
    )
    _CATEGORIES = (("experimental", _NormExperimentalConfig),)


class _MultiReplicaDistributionConfig(_ConfigBase):
    """Running one model across several host processes."""

    _OPTIONS = (
        _Option("process_count", 0, "Number of processes; 0 disables distribution."),
        _Option("process_index", 0, "Index of this process."),
    )


class _ExperimentalConfig(_ConfigBase):
    """Experimental options."""

    _OPTIONS = (
        _Option("always_rearrange_copies_on_the_host", False,
                "Rearrange tensors for host transfers on the host."),
        _Option("enable_remote_buffer_embedding", False,
                "Keep embeddings in remote buffers."),
        _Option("enable_prng_stability", False,
                "Keep replica random-number generators in step."),
    )
    _CATEGORIES = (("multi_replica_distribution", _MultiReplicaDistributionConfig),)


# --------------------------------------------------------------------------------------
# IPUConfig
# --------------------------------------------------------------------------------------


class IPUConfig(_ConfigBase):
    """Configuration of the IPU system, applied by :meth:`configure_ipu_system`.

    Example::

        cfg = IPUConfig()
        cfg.auto_select_ipus = [2, 2]    # /device:IPU:0 and /device:IPU:1, 2 IPUs each
        cfg.floating_point_behaviour.esr = StochasticRoundingBehaviour.ON
        cfg.configure_ipu_system()
    """

    _OPTIONS = (
        _Option("auto_select_ipus", [],
                "Number of IPUs in each TF device /device:IPU:i (an int is one device).",
                annotation=_INT_OR_INTS),
        _Option("select_ipus", [],
                "`gc-info -l` ids of the device configurations to use, one per TF device.",
                annotation=_INT_OR_INTS),
        _Option("selection_order", SelectionOrder.AUTO, "Shard to physical IPU mapping."),
        _Option("serialization_output_folder", "", "Folder for serialized executables."),
        _Option("compilation_poplar_options", {}, "Poplar Engine options."),
        _Option("gcl_poplar_options", {}, "Options of the collective communication library."),
        _Option("allow_recompute", False, "Recompute activations in the backward pass."),
    )
    _CATEGORIES = (
        ("ipu_model", _IPUModelConfig),
        ("device_connection", _DeviceConnectionConfig),
        ("floating_point_behaviour", _FloatingPointBehaviourConfig),
        ("optimizations", _OptimizationConfig),
        ("io_tiles", _IOTilesConfig),
        ("scheduling", _SchedulingConfig),
        ("convolutions", _ConvolutionConfig),
        ("matmuls", _MatmulConfig),
        ("slices", _SliceConfig),
        ("pooling", _PoolingConfig),
        ("norms", _NormConfig),
        ("experimental", _ExperimentalConfig),
    )

    def __init__(self):
        super().__init__("")

    def configure_ipu_system(self, device="cpu"):
        """Apply this configuration (same as ``configure_ipu_system(self, device)``)."""
        configure_ipu_system(self, device)

    def _to_protobuf(self) -> IpuOptions:
        """Validate the tree and build the ``IpuOptions`` record.  Does not modify ``self``."""
        if self.auto_select_ipus and self.select_ipus:  # truthiness, as in the SDK
            raise Exception("Only one of `auto_select_ipus` and `select_ipus` can be set.")
        if self.select_ipus and configured_system.running_on_ipu_model():
            raise Exception("When using the IPUModel, the devices to attach to can only be "
                            "specified with `auto_select_ipus`.")
        auto_select_ipus = _as_list(self.auto_select_ipus)
        select_ipus = _as_list(self.select_ipus)
        if len(set(select_ipus)) != len(select_ipus):
            raise ValueError("All MultiIPU indices in `select_ipus` must be unique.")

        opts = IpuOptions()
        opts.device_config = ([DeviceConfig(auto_count=n) for n in auto_select_ipus]
                              + [DeviceConfig(cfg_index=i) for i in select_ipus])
        opts.selection_order = self.selection_order
        opts.serialization_folder = self.serialization_output_folder
        opts.compilation_options = dict(self.compilation_poplar_options)
        opts.gcl_options = dict(self.gcl_poplar_options)
        opts.speed_size_config.allow_recompute = self.allow_recompute
        _write_ipu_model(self.ipu_model, opts)
        _write_device_connection(self.device_connection, opts)
        _write_floating_point_behaviour(self.floating_point_behaviour, opts)
        _write_optimizations(self.optimizations, opts)
        _write_io_tiles(self.io_tiles, opts)
        _write_scheduling(self.scheduling, opts)
        opts.convolution_options = dict(self.convolutions.poplar_options)
        opts.matmul_options = dict(self.matmuls.poplar_options)
        opts.clear_matmul_pass_type = self.matmuls.clear_pass_type
        opts.slice_options = dict(self.slices.poplar_options)
        opts.pooling_options = dict(self.pooling.poplar_options)
        opts.use_stable_norm_statistics = self.norms.use_stable_statistics
        opts.distributed_batch_norm_replica_group_size = (
            self.norms.experimental.distributed_batch_norm_replica_group_size)
        _write_experimental(self.experimental, opts)
        return opts


def _as_list(int_or_ints) -> list:
    # The SDK turns a single int into a one-element list; here only the record sees it.
    return [int_or_ints] if isinstance(int_or_ints, int) else list(int_or_ints)


def _write_ipu_model(ipu_model: _IPUModelConfig, opts: IpuOptions) -> None:
    if configured_system.running_on_ipu_model() and not ipu_model.version:
        raise ValueError("ipu_model.version must be set when using the IPUModel.")
    opts.ipu_model_config = IpuModelConfig(
        compile_ipu_code=ipu_model.compile_ipu_code,
        tiles_per_ipu=ipu_model.tiles_per_ipu,
        ipu_model_version=ipu_model.version,
    )


def _write_device_connection(connection: _DeviceConnectionConfig, opts: IpuOptions) -> None:
    needs_version = (DeviceConnectionType.NEVER, DeviceConnectionType.PRE_COMPILE)
    if connection.type in needs_version and not connection.version:
        raise ValueError(
            "device_connection.version must be set when device_connection.type is "
            "DeviceConnectionType.NEVER or DeviceConnectionType.PRE_COMPILE")
    opts.device_connection_type = connection.type
    opts.ipu_version = connection.version
    opts.enable_remote_buffers_without_device = connection.enable_remote_buffers


def _write_floating_point_behaviour(fp: _FloatingPointBehaviourConfig,
                                    opts: IpuOptions) -> None:
    everything = fp.set_all
    opts.floating_point_behaviour = FloatingPointBehaviourConfig(
        inv=fp.inv or everything,
        div0=fp.div0 or everything,
        oflo=fp.oflo or everything,
        esr=StochasticRoundingBehaviour.ON if everything else fp.esr,
        nanoo=fp.nanoo or everything,
    )


def _write_optimizations(optimizations: _OptimizationConfig, opts: IpuOptions) -> None:
    opts.prefetch_data_streams = optimizations.prefetch_data_streams
    opts.enable_multi_slice_combiner = optimizations.combine_embedding_lookups
    opts.enable_matmul_combiner = optimizations.combine_matmuls
    opts.enable_graph_outlining = optimizations.enable_graph_outlining
    opts.speed_size_config.disable_graph_outlining = not optimizations.enable_graph_outlining
    opts.speed_size_config.merge_infeed_io_copies = optimizations.merge_infeed_io_copies
    opts.max_cross_replica_sum_buffer_size = optimizations.maximum_cross_replica_sum_buffer_size
    opts.max_reduce_scatter_buffer_size = optimizations.maximum_reduce_scatter_buffer_size
    opts.max_inter_ipu_copies_buffer_size = optimizations.maximum_inter_ipu_copies_buffer_size
    opts.max_send_recv_cluster_size = optimizations.maximum_send_recv_cluster_size
    opts.max_reduce_many_buffer_size = optimizations.maximum_reduce_many_buffer_size
    opts.max_all_gather_buffer_size = optimizations.maximum_all_gather_buffer_size
    opts.minimum_remote_tensor_size = optimizations.minimum_remote_tensor_size
    opts.merge_remote_buffers = optimizations.merge_remote_buffers
    opts.enable_gather_simplifier = optimizations.enable_gather_simplifier
    opts.triangular_solve_expander_block_size = (
        optimizations.triangular_solve_expander_block_size)
    opts.cholesky_block_size = optimizations.cholesky_block_size
    opts.enable_fast_math = optimizations.enable_fast_math or optimizations.math.fast
    opts.enable_dot_strength = optimizations.math.dot_strength
    opts.enable_dynamic_slice_replacement = optimizations.enable_dynamic_slice_replacement


def _write_io_tiles(io_tiles: _IOTilesConfig, opts: IpuOptions) -> None:
    if io_tiles.place_ops_on_io_tiles and io_tiles.num_io_tiles == 0:
        raise ValueError("Cannot place ops on I/O tiles when io_tiles.num_io_tiles == 0")
    opts.num_io_tiles = io_tiles.num_io_tiles
    opts.place_ops_on_io_tiles = io_tiles.place_ops_on_io_tiles
    opts.io_tile_available_memory_proportion = io_tiles.available_memory_proportion


def _write_scheduling(scheduling: _SchedulingConfig, opts: IpuOptions) -> None:
    opts.speed_size_config.scheduler_selection = scheduling.algorithm
    opts.max_scheduler_lookahead_depth = scheduling.maximum_scheduler_lookahead_depth
    opts.max_scheduler_search_space_size = scheduling.maximum_scheduler_search_space_size


def _write_experimental(experimental: _ExperimentalConfig, opts: IpuOptions) -> None:
    distribution = experimental.multi_replica_distribution
    if distribution.process_count > 0 and not (
            0 <= distribution.process_index < distribution.process_count):
        raise ValueError(
            "experimental.multi_replica_distribution.process_index must be in the range "
            "[0, experimental.multi_replica_distribution.process_count).")
    opts.multi_replica_process_count = distribution.process_count
    opts.multi_replica_process_index = distribution.process_index
    opts.speed_size_config.always_rearrange_copies_on_the_host = (
        experimental.always_rearrange_copies_on_the_host)
    opts.enable_experimental_remote_buffer_embedding = (
        experimental.enable_remote_buffer_embedding)
    opts.enable_prng_stability = experimental.enable_prng_stability


# --------------------------------------------------------------------------------------
# Module-level configure / query
# --------------------------------------------------------------------------------------


def configure_ipu_system(config, device="cpu", reset_configuration=True):
    """Configure the IPU system from an ``IPUConfig`` or an ``IpuOptions`` record.

    ``device`` is accepted for compatibility (the SDK runs its configure op there).
    Re-configuring with a different configuration resets the old one first; with
    ``reset_configuration=False`` that is an error, as in the SDK.
    """
    if isinstance(config, IPUConfig):
        config = config._to_protobuf()
    if not isinstance(config, IpuOptions):
        raise TypeError("`config` must be an IpuOptions instance.")
    opts = copy.deepcopy(config)  # later edits of the caller's record must not leak in
    ipu_backend.configure(opts, reset_configuration)


def get_ipu_config(session=None):
    """The applied configuration, one ``IpuOptions`` per TF IPU device.

    ``session`` is accepted for TF1 compatibility; the emulated system is per process.
    """
    opts = ipu_backend.applied_options()
    if opts is None:
        raise RuntimeError("No IPU devices configured.")
    return [copy.deepcopy(opts) for _ in configured_system.current().devices]


def reset_ipu_configuration():
    """Forget the applied configuration (the next configure starts from scratch)."""
    ipu_backend.reset()


__all__ = [
    "IPUConfig",
    "AttributeMetadata",
    "IpuOptions",
    "SelectionOrder",
    "DeviceConnectionType",
    "ExecutionProfileType",
    "StochasticRoundingBehaviour",
    "MergeRemoteBuffersBehaviour",
    "SchedulingAlgorithm",
    "configure_ipu_system",
    "get_ipu_config",
    "reset_ipu_configuration",
]
