"""The functional configuration API of ipu.utils (SDK 2.3 and before; Graphcore's TensorFlow API
reference, ``ipu.utils``) and utilities."""
import logging
import re

import pytest
import tensorflow as tf

from ipu_emulator.runtime import configured_system
from ipu_emulator.ipu import config, utils
from ipu_emulator.ipu.utils import (
    DeviceConfig,
    DeviceConnectionType,
    ExecutionProfileType,
    IpuOptions,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
)


@pytest.fixture(autouse=True)
def first_call_warnings():
    utils._warned_functions.clear()  # every test sees the first-call warnings


def raises_exactly(exception_type, message):
    """pytest.raises that also pins the type exactly (plain ``Exception`` in the SDK)."""
    return pytest.raises(exception_type, match="^" + re.escape(message) + "$")


# -- re-exports ----------------------------------------------------------------------------


def test_new_api_names_are_re_exported():
    for name in ["IPUConfig", "SelectionOrder", "ExecutionProfileType",
                 "DeviceConnectionType", "MergeRemoteBuffersBehaviour",
                 "SchedulingAlgorithm", "get_ipu_config", "configure_ipu_system"]:
        assert getattr(utils, name) is getattr(config, name)


# -- create_ipu_config ---------------------------------------------------------------------


def test_create_ipu_config_writes_the_defaults():
    opts = utils.create_ipu_config()
    assert isinstance(opts, IpuOptions)
    assert opts.device_config == []
    assert opts.ipu_model_config.compile_ipu_code is True
    assert opts.ipu_model_config.ipu_model_version == "ipu2"
    assert opts.device_connection_type is DeviceConnectionType.ALWAYS
    assert opts.speed_size_config.allow_recompute is False
    assert opts.selection_order is SelectionOrder.AUTO
    assert opts.speed_size_config.scheduler_selection is SchedulingAlgorithm.CHOOSE_BEST
    assert opts.profiling.execution_trace_type is ExecutionProfileType.NO_PROFILE
    assert opts.profiling.max_report_size == 0x10000000
    assert opts.prefetch_data_streams is True
    assert opts.max_scheduler_lookahead_depth == 5
    assert opts.max_scheduler_search_space_size == 64


def test_create_ipu_config_keyword_signature():
    opts = utils.create_ipu_config(
        profiling=True, enable_ipu_events=False, use_poplar_text_report=True,
        use_poplar_cbor_report=False, profile_execution=ExecutionProfileType.TILE_PROFILE,
        enable_poplar_serialized_graph=True, report_every_nth_execution=2,
        max_report_size=10, report_directory="reports", scheduler_selection="Clustering",
        always_rearrange_copies_on_the_host=True, merge_infeed_io_copies=True,
        disable_graph_convolution_caching=True, disable_graph_outlining=True,
        retain_control_dependencies=True, max_cross_replica_sum_buffer_size=1,
        max_inter_ipu_copies_buffer_size=2, max_scheduler_lookahead_depth=3,
        max_scheduler_search_space_size=4, prefetch_data_streams=False,
        selection_order=SelectionOrder.ZIGZAG, enable_experimental_remote_buffer_embedding=True)
    assert opts.profiling.enable_poplar_reports_text
    assert opts.profiling.execution_trace_type is ExecutionProfileType.TILE_PROFILE
    assert opts.profiling.report_directory == "reports"
    assert opts.speed_size_config.scheduler_selection is SchedulingAlgorithm.CLUSTERING
    assert opts.enable_graph_outlining is False
    assert opts.selection_order is SelectionOrder.ZIGZAG
    assert opts.prefetch_data_streams is False


def test_profile_execution_true_means_device_profile():
    opts = utils.create_ipu_config(profiling=True, profile_execution=True)
    assert opts.profiling.execution_trace_type is ExecutionProfileType.DEVICE_PROFILE


def test_scheduler_selection_accepts_the_enum():
    opts = utils.create_ipu_config(scheduler_selection=SchedulingAlgorithm.LOOK_AHEAD)
    assert opts.speed_size_config.scheduler_selection is SchedulingAlgorithm.LOOK_AHEAD


def test_profiling_and_ipu_events_are_mutually_exclusive():
    with raises_exactly(Exception, "`profiling` and `enable_ipu_events` are mutually "
                                   "exclusive") as error:
        utils.create_ipu_config(profiling=True, enable_ipu_events=True)
    assert type(error.value) is Exception


def test_profile_execution_requires_profiling():
    with raises_exactly(Exception, "`profiling` is required when `profile_execution` is "
                                   "set") as error:
        utils.create_ipu_config(profile_execution=True)
    assert type(error.value) is Exception


def test_profile_execution_type_is_checked():
    with raises_exactly(Exception, "`profile_execution` must be True, False, or an "
                                   "ExecutionProfileType instance") as error:
        utils.create_ipu_config(profiling=True, profile_execution="yes")
    assert type(error.value) is Exception


# -- device selection ----------------------------------------------------------------------


@pytest.mark.parametrize("num_ipus, counts", [(2, [2]), ([1, 2], [1, 2]), ((4, 4), [4, 4])])
def test_auto_select_ipus(num_ipus, counts):
    opts = utils.auto_select_ipus(utils.create_ipu_config(), num_ipus)
    assert opts.device_config == [DeviceConfig(auto_count=n) for n in counts]


def test_auto_select_ipus_type_check():
    with raises_exactly(Exception, "`num_ipus` must be an integer, list or tuple."):
        utils.auto_select_ipus(utils.create_ipu_config(), "2")


def test_devices_can_only_be_selected_once():
    opts = utils.auto_select_ipus(utils.create_ipu_config(), 1)
    with raises_exactly(Exception, "IPU devices have already been configured."):
        utils.auto_select_ipus(opts, 1)
    with raises_exactly(Exception, "IPU devices have already been configured."):
        utils.select_ipus(opts, [0])


def test_select_ipus():
    opts = utils.select_ipus(utils.create_ipu_config(), [16, 3])
    assert opts.device_config == [DeviceConfig(cfg_index=16), DeviceConfig(cfg_index=3)]


def test_select_ipus_rejects_an_int():
    with raises_exactly(Exception, "`indices` must be a list or tuple."):
        utils.select_ipus(utils.create_ipu_config(), 0)


def test_select_ipus_must_be_unique():
    with raises_exactly(Exception, "All device indices in `indices` must be unique."):
        utils.select_ipus(utils.create_ipu_config(), (1, 1))


# -- set_*_options -------------------------------------------------------------------------


def test_set_ipu_model_options():
    opts = utils.set_ipu_model_options(utils.create_ipu_config(), compile_ipu_code=False,
                                       tiles_per_ipu=16, ipu_model_version="ipu1")
    assert opts.ipu_model_config == config.IpuModelConfig(False, 16, "ipu1")
    opts = utils.set_ipu_model_options(opts)  # None leaves tiles and version unchanged
    assert opts.ipu_model_config == config.IpuModelConfig(True, 16, "ipu1")


def test_set_recomputation_options():
    opts = utils.set_recomputation_options(utils.create_ipu_config())
    assert opts.speed_size_config.allow_recompute is True
    opts = utils.set_recomputation_options(opts, allow_recompute=False)
    assert opts.speed_size_config.allow_recompute is False


def test_floating_point_options_default_to_all_on():
    fp = utils.set_floating_point_behaviour_options(
        utils.create_ipu_config()).floating_point_behaviour
    assert fp.inv and fp.div0 and fp.oflo and fp.nanoo
    assert fp.esr is StochasticRoundingBehaviour.ON
    fp = utils.set_floating_point_behaviour_options(
        utils.create_ipu_config(), esr=False, inv=False).floating_point_behaviour
    assert fp.esr is StochasticRoundingBehaviour.OFF and not fp.inv


def test_set_ipu_connection_type():
    opts = utils.set_ipu_connection_type(utils.create_ipu_config())
    assert opts.device_connection_type is DeviceConnectionType.ALWAYS
    opts = utils.set_ipu_connection_type(opts, DeviceConnectionType.NEVER, ipu_version=2,
                                         enable_remote_buffers=True)
    assert opts.device_connection_type is DeviceConnectionType.NEVER
    assert opts.ipu_version == "ipu2" and opts.enable_remote_buffers_without_device
    with pytest.raises(Exception, match="`ipu_version` must be set"):
        utils.set_ipu_connection_type(opts, DeviceConnectionType.PRE_COMPILE)


def test_set_optimization_options():
    opts = utils.set_optimization_options(
        utils.create_ipu_config(), combine_embedding_lookups=True, combine_matmuls=True,
        max_cross_replica_sum_buffer_size=10, max_reduce_scatter_buffer_size=11,
        max_inter_ipu_copies_buffer_size=12, max_send_recv_cluster_size=13,
        minimum_remote_tensor_size=14, merge_remote_buffers=True, gather_simplifier=True,
        triangular_solve_expander_block_size=15, cholesky_block_size=16,
        enable_fast_math=True)
    assert opts.enable_multi_slice_combiner and opts.enable_matmul_combiner
    assert opts.merge_remote_buffers is MergeRemoteBuffersBehaviour.MERGE
    assert opts.cholesky_block_size == 16 and opts.enable_fast_math


@pytest.mark.parametrize("function, argument", [
    (utils.set_compilation_options, "compilation_options"),
    (utils.set_convolution_options, "convolution_options"),
    (utils.set_matmul_options, "matmul_options"),
    (utils.set_pooling_options, "pooling_options"),
    (utils.set_report_options, "report_options"),
    (utils.set_report_options, "graph_options"),
    (utils.set_report_options, "execution_options"),
    (utils.set_gcl_options, "gcl_options"),
])
def test_option_dictionaries_are_checked(function, argument):
    with raises_exactly(Exception, f"`{argument}` must be a dictionary"):
        function(utils.create_ipu_config(), **{argument: ["not", "a", "dict"]})


def test_option_dictionaries_are_stored():
    opts = utils.create_ipu_config()
    opts = utils.set_compilation_options(opts, {"autoReport.all": "true"})
    opts = utils.set_convolution_options(opts, {"availableMemoryProportion": "0.3"})
    opts = utils.set_matmul_options(opts, {"partialsType": "half"}, clear_pass_type=True)
    opts = utils.set_pooling_options(opts, {"poolUseIntrospectiveMapping": "false"})
    opts = utils.set_report_options(opts, report_options={"showVarStorage": "true"})
    opts = utils.set_gcl_options(opts, num_io_tiles=8,
                                 gcl_options={"useSynclessCollectives": "true"})
    assert opts.compilation_options == {"autoReport.all": "true"}
    assert opts.convolution_options == {"availableMemoryProportion": "0.3"}
    assert opts.matmul_options == {"partialsType": "half"} and opts.clear_matmul_pass_type
    assert opts.pooling_options == {"poolUseIntrospectiveMapping": "false"}
    assert opts.profiling.options == {"showVarStorage": "true"}
    assert opts.gcl_options == {"useSynclessCollectives": "true"}
    assert opts.gcl_num_io_tiles == 8


def test_set_serialization_options():
    opts = utils.set_serialization_options(utils.create_ipu_config(), output_folder="out")
    assert opts.serialization_folder == "out"


def test_set_io_tile_options():
    opts = utils.set_io_tile_options(utils.create_ipu_config(), 64, True, 0.5)
    assert (opts.num_io_tiles, opts.place_ops_on_io_tiles,
            opts.io_tile_available_memory_proportion) == (64, True, 0.5)
    with raises_exactly(ValueError, "Cannot place ops on I/O tiles when num_io_tiles == 0"):
        utils.set_io_tile_options(utils.create_ipu_config(), 0, place_ops_on_io_tiles=True)


# -- deprecation warnings ----------------------------------------------------------------------

DEPRECATED_FUNCTIONS = [
    "create_ipu_config", "auto_select_ipus", "select_ipus", "set_ipu_model_options",
    "set_recomputation_options", "set_floating_point_behaviour_options",
    "set_ipu_connection_type", "set_optimization_options", "set_compilation_options",
    "set_convolution_options", "set_matmul_options", "set_pooling_options",
    "set_report_options", "set_serialization_options", "set_io_tile_options",
    "set_gcl_options",
]

INSTRUCTIONS = (
    "Configuring IPU session options for TensorFlow has changed and this function will be "
    "removed in a future release. Use an IPUConfig instance instead. For more information "
    "on how to create an equivalent config in the new IPUConfig API, refer to the API "
    "changes for SDK 2.1 in the TensorFlow documentation.")


def deprecation_messages(caplog, name):
    return [m for m in caplog.messages if f": {name} (from " in m]


def test_deprecation_warning_text(caplog):
    caplog.set_level(logging.WARNING)
    utils.create_ipu_config()  # line reported below
    [message] = deprecation_messages(caplog, "create_ipu_config")
    assert re.fullmatch(
        r"From .*test_utils_config\.py:\d+: create_ipu_config \(from tensorflow\.python\.ipu\.utils\)"
        r" is deprecated and will be removed in a future version\.\n"
        r"Instructions for updating:\n" + re.escape(INSTRUCTIONS), message)


@pytest.mark.parametrize("name", DEPRECATED_FUNCTIONS)
def test_every_old_function_warns_once(caplog, name):
    caplog.set_level(logging.WARNING)
    arguments = {"auto_select_ipus": (1,), "select_ipus": ([0],), "set_io_tile_options": (0,)}
    for _ in range(2):
        getattr(utils, name)(IpuOptions(), *arguments.get(name, ()))
    assert len(deprecation_messages(caplog, name)) == 1
    assert getattr(utils, name).__doc__.startswith("THIS FUNCTION IS DEPRECATED.")


# -- configure_ipu_system -----------------------------------------------------------------------


def test_typical_tf1_usage_configures_the_system():
    cfg = utils.create_ipu_config(profiling=True, use_poplar_text_report=True)
    cfg = utils.set_ipu_model_options(cfg, compile_ipu_code=False)
    cfg = utils.set_recomputation_options(cfg)
    cfg = utils.set_compilation_options(cfg, {"opt": "1"})
    cfg = utils.auto_select_ipus(cfg, [2, 4])
    utils.configure_ipu_system(cfg)
    assert configured_system.current() == configured_system.SystemConfiguration(
        devices=(configured_system.VirtualDevice(0, 2), configured_system.VirtualDevice(1, 4)),
        ipu_model=False, ipu_version="ipu2", tiles_per_ipu=0, allow_recompute=True,
        selection_order="AUTO", poplar_options={"opt": "1"})
    assert utils.get_ipu_config() == [cfg, cfg]


def test_configure_ipu_system_accepts_an_ipu_config():
    ipu_config = utils.IPUConfig()
    ipu_config.auto_select_ipus = 8
    utils.configure_ipu_system(ipu_config, device="cpu")
    assert configured_system.device(0).num_ipus == 8


def test_configure_ipu_system_rejects_other_types():
    with raises_exactly(TypeError, "`config` must be an IpuOptions instance."):
        utils.configure_ipu_system("auto_select_ipus=1")


def test_three_ipus_fail_on_hardware():
    cfg = utils.auto_select_ipus(utils.create_ipu_config(), [1, 3])
    with pytest.raises(tf.errors.FailedPreconditionError) as error:
        utils.configure_ipu_system(cfg)
    assert error.value.message == (
        "Unsupported number of IPUs requested - could not find an IPU device with 3 IPUs "
        "for the TensorFlow virtual device /device:IPU:1. Use `gc-info -l` to view the "
        "available device configurations.")
    assert not configured_system.is_configured()


def test_three_ipus_work_on_the_ipu_model(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model")
    cfg = utils.set_ipu_model_options(utils.create_ipu_config(), tiles_per_ipu=8)
    utils.configure_ipu_system(utils.auto_select_ipus(cfg, 3))
    assert configured_system.current().devices == (configured_system.VirtualDevice(0, 3),)
    assert configured_system.current().ipu_model and configured_system.current().tiles_per_ipu == 8


def test_select_ipus_on_the_ipu_model_is_a_backend_error(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model")
    cfg = utils.select_ipus(utils.create_ipu_config(), [0])
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        utils.configure_ipu_system(cfg)
    assert error.value.message == ("Must specify the number of IPUs using auto_count, not "
                                   "an index.")


def test_select_ipus_maps_ids_to_device_sizes():
    utils.configure_ipu_system(utils.select_ipus(utils.create_ipu_config(), [30, 28, 0]))
    assert [d.num_ipus for d in configured_system.current().devices] == [16, 8, 1]


def test_ipu_model_without_version_warns(monkeypatch, caplog):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model")
    caplog.set_level(logging.WARNING)
    cfg = utils.set_ipu_model_options(utils.create_ipu_config(), ipu_model_version="")
    utils.configure_ipu_system(utils.auto_select_ipus(cfg, 1))
    assert ("A version was not supplied when using the IPU Model. Defaulting to 'ipu2'."
            in caplog.messages)


def test_configure_copies_the_options():
    cfg = utils.auto_select_ipus(utils.create_ipu_config(), 1)
    utils.configure_ipu_system(cfg)
    cfg.device_config[0].auto_count = 4
    assert utils.get_ipu_config()[0].device_config == [DeviceConfig(auto_count=1)]


# -- utilities -------------------------------------------------------------------------------


def test_running_on_ipu_model(monkeypatch):
    assert utils.running_on_ipu_model() is False
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model")
    assert utils.running_on_ipu_model() is True


def test_get_num_of_ipus_in_device():
    utils.configure_ipu_system(utils.auto_select_ipus(utils.create_ipu_config(), [2, 4]))
    assert utils.get_num_of_ipus_in_device("/device:IPU:0") == 2
    assert utils.get_num_of_ipus_in_device("/job:localhost/device:IPU:1", device="cpu") == 4
    with pytest.raises(tf.errors.InvalidArgumentError):
        utils.get_num_of_ipus_in_device("/device:IPU:2")


def test_reset_ipu_seed_accepts_the_sdk_arguments():
    assert utils.reset_ipu_seed(1, device="/device:IPU:0", cpu_device="cpu",
                                experimental_identical_replicas=True) is None


def test_move_variable_initialization_to_cpu_places_initializers_on_cpu():
    graph = tf.Graph()
    with graph.as_default():
        with tf.device("/device:IPU:0"):
            variable = tf.compat.v1.get_variable(
                "w", shape=[2, 2], initializer=tf.compat.v1.random_normal_initializer())
        assert utils.move_variable_initialization_to_cpu() is None
    initial_value_op = variable.initializer.inputs[1].op
    assert initial_value_op.device == "/device:CPU:0"
    walked = [initial_value_op] + [t.op for t in initial_value_op.inputs]
    assert all(op.device == "/device:CPU:0" for op in walked)


def test_move_variable_initialization_to_cpu_is_harmless_in_eager_mode():
    assert utils.move_variable_initialization_to_cpu() is None
