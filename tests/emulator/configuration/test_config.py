"""IPUConfig and configure_ipu_system (Graphcore's TensorFlow API reference, ``ipu.config``)."""
import copy
import json
import logging
import os
import re

import pytest
import tensorflow as tf

from ipu_emulator.runtime import configured_system
from ipu_emulator.ipu import config
from ipu_emulator.ipu.config import (
    DeviceConnectionType,
    ExecutionProfileType,
    IPUConfig,
    IpuOptions,
    MergeRemoteBuffersBehaviour,
    SchedulingAlgorithm,
    SelectionOrder,
    StochasticRoundingBehaviour,
)
from tests.support.child_python import run_python

INT_OR_INTS = "typing.Union[int, typing.List[int], typing.Tuple[int, ...]]"


def unsupported_count_message(num_ipus, ordinal=0):
    return (f"Unsupported number of IPUs requested - could not find an IPU device with "
            f"{num_ipus} IPUs for the TensorFlow virtual device /device:IPU:{ordinal}. "
            f"Use `gc-info -l` to view the available device configurations.")


@pytest.fixture
def ipu_model(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model")


# -- defaults and enums -------------------------------------------------------------

DEFAULTS = {
    "auto_select_ipus": [],
    "select_ipus": [],
    "selection_order": SelectionOrder.AUTO,
    "allow_recompute": False,
    "serialization_output_folder": "",
    "compilation_poplar_options": {},
    "gcl_poplar_options": {},
    "ipu_model.compile_ipu_code": True,
    "ipu_model.tiles_per_ipu": 0,
    "ipu_model.version": "ipu2",
    "device_connection.type": DeviceConnectionType.ALWAYS,
    "device_connection.version": "",
    "device_connection.enable_remote_buffers": False,
    "floating_point_behaviour.inv": False,
    "floating_point_behaviour.div0": False,
    "floating_point_behaviour.oflo": False,
    "floating_point_behaviour.nanoo": False,
    "floating_point_behaviour.esr": StochasticRoundingBehaviour.OFF,
    "floating_point_behaviour.set_all": False,
    "optimizations.prefetch_data_streams": True,
    "optimizations.combine_embedding_lookups": False,
    "optimizations.combine_matmuls": False,
    "optimizations.enable_graph_outlining": True,
    "optimizations.merge_infeed_io_copies": True,
    "optimizations.maximum_cross_replica_sum_buffer_size": 0,
    "optimizations.maximum_reduce_scatter_buffer_size": 0,
    "optimizations.maximum_inter_ipu_copies_buffer_size": 0,
    "optimizations.maximum_send_recv_cluster_size": 0,
    "optimizations.maximum_reduce_many_buffer_size": 0,
    "optimizations.maximum_all_gather_buffer_size": 0,
    "optimizations.minimum_remote_tensor_size": 128,
    "optimizations.merge_remote_buffers": MergeRemoteBuffersBehaviour.IF_BENEFICIAL,
    "optimizations.enable_gather_simplifier": True,
    "optimizations.triangular_solve_expander_block_size": 0,
    "optimizations.cholesky_block_size": 0,
    "optimizations.enable_fast_math": False,
    "optimizations.enable_dynamic_slice_replacement": True,
    "optimizations.math.fast": False,
    "optimizations.math.dot_strength": True,
    "io_tiles.num_io_tiles": 0,
    "io_tiles.place_ops_on_io_tiles": False,
    "io_tiles.available_memory_proportion": 0.9,
    "scheduling.algorithm": SchedulingAlgorithm.CHOOSE_BEST,
    "scheduling.maximum_scheduler_lookahead_depth": 5,
    "scheduling.maximum_scheduler_search_space_size": 64,
    "convolutions.poplar_options": {},
    "matmuls.poplar_options": {},
    "matmuls.clear_pass_type": False,
    "slices.poplar_options": {},
    "pooling.poplar_options": {},
    "norms.use_stable_statistics": False,
    "norms.experimental.distributed_batch_norm_replica_group_size": 1,
    "experimental.always_rearrange_copies_on_the_host": False,
    "experimental.enable_remote_buffer_embedding": False,
    "experimental.enable_prng_stability": False,
    "experimental.multi_replica_distribution.process_count": 0,
    "experimental.multi_replica_distribution.process_index": 0,
}


def get_dotted(cfg, dotted_name):
    value = cfg
    for part in dotted_name.split("."):
        value = getattr(value, part)
    return value


@pytest.mark.parametrize("name, default", DEFAULTS.items())
def test_default_values_and_types(name, default):
    value = get_dotted(IPUConfig(), name)
    assert value == default
    assert type(value) is type(default)


def test_defaults_are_not_shared_between_instances():
    first, second = IPUConfig(), IPUConfig()
    first.compilation_poplar_options["x"] = "1"
    first.auto_select_ipus.append(2)
    assert second.compilation_poplar_options == {}
    assert second.auto_select_ipus == []


def test_enum_values():
    assert [(m.name, m.value) for m in SelectionOrder] == [
        ("AUTO", 0), ("ZIGZAG", 1), ("SNAKE", 2), ("HOOF", 3)]
    assert [(m.name, m.value) for m in DeviceConnectionType] == [
        ("ALWAYS", 0), ("ON_DEMAND", 1), ("NEVER", 2), ("PRE_COMPILE", 3)]
    assert [(m.name, m.value) for m in ExecutionProfileType] == [
        ("NO_PROFILE", 0), ("DEVICE_PROFILE", 1), ("IPU_PROFILE", 2), ("TILE_PROFILE", 3)]
    assert [(m.name, m.value) for m in StochasticRoundingBehaviour] == [
        ("OFF", 0), ("ON", 1), ("REPLICA_IDENTICAL_ONLY", 2)]
    assert [(m.name, m.value) for m in MergeRemoteBuffersBehaviour] == [
        ("NO_MERGING", 0), ("MERGE", 1), ("IF_BENEFICIAL", 2)]
    assert [(m.name, m.value) for m in SchedulingAlgorithm] == [
        ("CHOOSE_BEST", 0), ("CLUSTERING", 1), ("POST_ORDER", 2), ("LOOK_AHEAD", 3),
        ("SHORTEST_PATH", 4)]


def test_stochastic_rounding_from_bool():
    assert StochasticRoundingBehaviour.from_bool(True) is StochasticRoundingBehaviour.ON
    assert StochasticRoundingBehaviour.from_bool(False) is StochasticRoundingBehaviour.OFF


# -- strict type checks ----------------------------------------------------------------


@pytest.mark.parametrize("name, value, type_text", [
    ("ipu_model.tiles_per_ipu", True, "int"),       # bool is not accepted for int
    ("ipu_model.tiles_per_ipu", 4.0, "int"),
    ("allow_recompute", 1, "bool"),                  # int is not accepted for bool
    ("ipu_model.version", 2, "str"),
    ("compilation_poplar_options", [], "dict"),
    ("io_tiles.available_memory_proportion", 1, "float"),
    ("selection_order", 1, "SelectionOrder"),
    ("floating_point_behaviour.esr", True, "StochasticRoundingBehaviour"),
    ("device_connection.type", "NEVER", "DeviceConnectionType"),
    ("auto_select_ipus", "2", INT_OR_INTS),
    ("auto_select_ipus", True, INT_OR_INTS),
    ("auto_select_ipus", [1, True], INT_OR_INTS),
    ("select_ipus", 2.0, INT_OR_INTS),
    ("select_ipus", (1, "2"), INT_OR_INTS),
])
def test_wrong_type_is_rejected_with_exact_message(name, value, type_text):
    cfg = IPUConfig()
    *path, leaf = name.split(".")
    category = get_dotted(cfg, ".".join(path)) if path else cfg
    with pytest.raises(TypeError) as error:
        setattr(category, leaf, value)
    assert str(error.value) == (
        f"Trying to set {name} to {value}, but it must be of type {type_text}")
    assert get_dotted(cfg, name) == DEFAULTS[name]  # unchanged


@pytest.mark.parametrize("value", [2, [1, 2], (4,), [], ()])
def test_auto_select_ipus_accepts_int_list_and_tuple(value):
    cfg = IPUConfig()
    cfg.auto_select_ipus = value
    cfg.select_ipus = value
    assert cfg.auto_select_ipus == value and cfg.select_ipus == value


def test_category_cannot_be_assigned():
    cfg = IPUConfig()
    with pytest.raises(Exception) as error:
        cfg.ipu_model = 1
    assert type(error.value) is Exception
    assert str(error.value) == "ipu_model is a category and cannot be assigned to."
    with pytest.raises(Exception) as error:
        cfg.optimizations.math = {}
    assert str(error.value) == "optimizations.math is a category and cannot be assigned to."


# -- unknown attributes and suggestions ------------------------------------------------


def test_unknown_attribute_suggests_the_closest_name_at_the_same_level():
    cfg = IPUConfig()
    with pytest.raises(ValueError) as error:
        cfg.auto_select_ipu = 1
    assert str(error.value) == ("'auto_select_ipu' is not a valid attribute of this config. "
                                "Did you mean 'auto_select_ipus'?")


def test_unknown_attribute_suggestion_uses_the_full_name():
    cfg = IPUConfig()
    with pytest.raises(ValueError) as error:
        cfg.ipu_model.tile_per_ipu = 4
    assert str(error.value) == ("'tile_per_ipu' is not a valid attribute of this config. "
                                "Did you mean 'ipu_model.tiles_per_ipu'?")


def test_unknown_attribute_suggests_a_nested_option():
    with pytest.raises(ValueError) as error:
        IPUConfig().tiles_per_ipu  # noqa: B018  (getting also checks)
    assert str(error.value) == ("'tiles_per_ipu' is not a valid attribute of this config. "
                                "Did you mean 'ipu_model.tiles_per_ipu'?")


def test_unknown_attribute_without_suggestion_ends_with_a_space():
    with pytest.raises(ValueError) as error:
        IPUConfig().zzzqqqxxx = 1
    assert str(error.value) == "'zzzqqqxxx' is not a valid attribute of this config. "


def test_deprecated_option_logs_on_set(caplog):
    caplog.set_level(logging.WARNING)
    cfg = IPUConfig()
    cfg.optimizations.enable_fast_math = True
    assert ("optimizations.enable_fast_math has been deprecated: "
            "Use optimizations.math.fast instead.") in caplog.messages


# -- helpers ---------------------------------------------------------------------------


def test_to_dict_is_flat_with_full_names_and_enum_values():
    cfg = IPUConfig()
    cfg.selection_order = SelectionOrder.SNAKE
    cfg.ipu_model.tiles_per_ipu = 8
    as_dict = cfg.to_dict()
    assert set(as_dict) == set(DEFAULTS)
    assert as_dict["selection_order"] == 2
    assert as_dict["ipu_model.tiles_per_ipu"] == 8
    assert as_dict["floating_point_behaviour.esr"] == 0


def test_category_to_dict_uses_names_relative_to_the_category():
    assert IPUConfig().ipu_model.to_dict() == {
        "compile_ipu_code": True, "tiles_per_ipu": 0, "version": "ipu2"}


def configured_example():
    cfg = IPUConfig()
    cfg.auto_select_ipus = [2, 4]
    cfg.selection_order = SelectionOrder.HOOF
    cfg.compilation_poplar_options = {"autoReport.all": "true"}
    cfg.floating_point_behaviour.esr = StochasticRoundingBehaviour.REPLICA_IDENTICAL_ONLY
    cfg.optimizations.math.fast = True
    cfg.io_tiles.available_memory_proportion = 0.5
    return cfg


def test_dict_round_trip():
    restored = IPUConfig()
    restored.from_dict(configured_example().to_dict())
    assert restored.to_dict() == configured_example().to_dict()
    assert restored.floating_point_behaviour.esr is (
        StochasticRoundingBehaviour.REPLICA_IDENTICAL_ONLY)
    assert restored.selection_order is SelectionOrder.HOOF


def test_json_round_trip():
    text = configured_example().to_json()
    assert json.loads(text)["auto_select_ipus"] == [2, 4]
    restored = IPUConfig()
    restored.from_json(text)
    assert restored.to_dict() == configured_example().to_dict()


def test_from_dict_rejects_unknown_names_and_wrong_types():
    with pytest.raises(ValueError, match=re.escape(
            "'tile_per_ipu' is not a valid attribute of this config. "
            "Did you mean 'ipu_model.tiles_per_ipu'?")):
        IPUConfig().from_dict({"ipu_model.tile_per_ipu": 2})
    with pytest.raises(TypeError, match=re.escape(
            "Trying to set ipu_model.tiles_per_ipu to 2, but it must be of type int")):
        IPUConfig().from_dict({"ipu_model.tiles_per_ipu": "2"})


def test_get_attribute_metadata():
    metadata = IPUConfig().get_attribute_metadata("ipu_model.tiles_per_ipu")
    assert metadata.name == "ipu_model.tiles_per_ipu"
    assert metadata.type is int
    assert metadata.default == 0
    assert metadata.__doc__ and not metadata.deprecated
    annotated = IPUConfig().get_attribute_metadata("auto_select_ipus")
    assert annotated.type_text == INT_OR_INTS and annotated.default == []
    relative = IPUConfig().optimizations.get_attribute_metadata("math.fast")
    assert relative.name == "optimizations.math.fast"
    assert IPUConfig().get_attribute_metadata("optimizations.enable_fast_math").deprecated


def test_str_lists_every_option_as_name_equals_value():
    text = str(configured_example())
    lines = text.splitlines()
    assert len(lines) == len(DEFAULTS)
    assert "auto_select_ipus = [2, 4]" in lines
    assert "selection_order = SelectionOrder.HOOF" in lines
    assert "ipu_model.version = 'ipu2'" in lines
    assert repr(configured_example()) == text


def test_deepcopy_is_independent():
    original = configured_example()
    clone = copy.deepcopy(original)
    clone.auto_select_ipus.append(8)
    clone.ipu_model.tiles_per_ipu = 4
    clone.compilation_poplar_options["x"] = "y"
    assert original.auto_select_ipus == [2, 4]
    assert original.ipu_model.tiles_per_ipu == 0
    assert original.compilation_poplar_options == {"autoReport.all": "true"}
    with pytest.raises(TypeError):  # the copy keeps its type checks
        clone.allow_recompute = 1


# -- validation at configure time --------------------------------------------------------


def test_only_one_of_auto_select_and_select():
    cfg = IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.select_ipus = [0]
    with pytest.raises(Exception) as error:
        cfg.configure_ipu_system()
    assert type(error.value) is Exception
    assert str(error.value) == "Only one of `auto_select_ipus` and `select_ipus` can be set."


def test_select_ipus_zero_slips_through_the_truthiness_check():
    cfg = IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.select_ipus = 0
    cfg.configure_ipu_system()
    assert [d.num_ipus for d in configured_system.current().devices] == [1, 1]


def test_select_ipus_must_be_unique():
    cfg = IPUConfig()
    cfg.select_ipus = [1, 1]
    with pytest.raises(ValueError) as error:
        cfg.configure_ipu_system()
    assert str(error.value) == "All MultiIPU indices in `select_ipus` must be unique."


def test_select_ipus_is_refused_on_the_ipu_model(ipu_model):
    cfg = IPUConfig()
    cfg.select_ipus = [0]
    with pytest.raises(Exception) as error:
        cfg.configure_ipu_system()
    assert type(error.value) is Exception
    assert str(error.value) == ("When using the IPUModel, the devices to attach to can only "
                                "be specified with `auto_select_ipus`.")


@pytest.mark.parametrize("connection", [DeviceConnectionType.NEVER,
                                        DeviceConnectionType.PRE_COMPILE])
def test_device_connection_version_required(connection):
    cfg = IPUConfig()
    cfg.device_connection.type = connection
    with pytest.raises(ValueError) as error:
        cfg.configure_ipu_system()
    assert str(error.value) == (
        "device_connection.version must be set when device_connection.type is "
        "DeviceConnectionType.NEVER or DeviceConnectionType.PRE_COMPILE")
    cfg.device_connection.version = "ipu21"
    cfg.configure_ipu_system()
    assert configured_system.current().ipu_version == "ipu21"


def test_ipu_model_version_required_on_the_ipu_model(ipu_model):
    cfg = IPUConfig()
    cfg.ipu_model.version = ""
    with pytest.raises(ValueError) as error:
        cfg.configure_ipu_system()
    assert str(error.value) == "ipu_model.version must be set when using the IPUModel."


def test_empty_ipu_model_version_is_fine_on_hardware():
    cfg = IPUConfig()
    cfg.ipu_model.version = ""
    cfg.configure_ipu_system()


def test_io_tiles_needed_to_place_ops_on_them():
    cfg = IPUConfig()
    cfg.io_tiles.place_ops_on_io_tiles = True
    with pytest.raises(ValueError) as error:
        cfg.configure_ipu_system()
    assert str(error.value) == ("Cannot place ops on I/O tiles when "
                                "io_tiles.num_io_tiles == 0")
    cfg.io_tiles.num_io_tiles = 32
    cfg.configure_ipu_system()


def test_multi_replica_process_index_in_range():
    cfg = IPUConfig()
    cfg.experimental.multi_replica_distribution.process_count = 2
    cfg.experimental.multi_replica_distribution.process_index = 2
    with pytest.raises(ValueError) as error:
        cfg.configure_ipu_system()
    assert str(error.value) == (
        "experimental.multi_replica_distribution.process_index must be in the range "
        "[0, experimental.multi_replica_distribution.process_count).")


def test_configure_rejects_other_types():
    with pytest.raises(TypeError) as error:
        config.configure_ipu_system({"auto_select_ipus": 1})
    assert str(error.value) == "`config` must be an IpuOptions instance."


# -- device sizes (1.4) ---------------------------------------------------------------


@pytest.mark.parametrize("num_ipus", [1, 2, 4, 8, 16, 32, 64])
def test_power_of_two_devices_are_accepted_on_hardware(num_ipus):
    cfg = IPUConfig()
    cfg.auto_select_ipus = num_ipus
    cfg.configure_ipu_system()
    assert configured_system.current().devices == (configured_system.VirtualDevice(0, num_ipus),)


@pytest.mark.parametrize("num_ipus", [3, 5, 6, 12, 128, 0])
def test_other_counts_fail_on_hardware(num_ipus):
    cfg = IPUConfig()
    cfg.auto_select_ipus = num_ipus
    with pytest.raises(tf.errors.FailedPreconditionError) as error:
        cfg.configure_ipu_system()
    assert error.value.message == unsupported_count_message(num_ipus)
    assert not configured_system.is_configured()


def test_unsupported_count_names_the_device_position():
    cfg = IPUConfig()
    cfg.auto_select_ipus = [1, 2, 3]
    with pytest.raises(tf.errors.FailedPreconditionError) as error:
        cfg.configure_ipu_system()
    assert error.value.message == unsupported_count_message(3, ordinal=2)


def test_exact_three_ipu_message_from_the_spec():
    cfg = IPUConfig()
    cfg.auto_select_ipus = 3
    with pytest.raises(tf.errors.FailedPreconditionError) as error:
        cfg.configure_ipu_system()
    assert error.value.message == (
        "Unsupported number of IPUs requested - could not find an IPU device with 3 IPUs "
        "for the TensorFlow virtual device /device:IPU:0. Use `gc-info -l` to view the "
        "available device configurations.")


@pytest.mark.parametrize("num_ipus", [1, 3, 5, 100])
def test_ipu_model_accepts_any_count(ipu_model, num_ipus):
    cfg = IPUConfig()
    cfg.auto_select_ipus = [num_ipus]
    cfg.ipu_model.tiles_per_ipu = 4
    cfg.configure_ipu_system()
    current = configured_system.current()
    assert current.devices == (configured_system.VirtualDevice(0, num_ipus),)
    assert current.ipu_model and current.tiles_per_ipu == 4


def test_ipu_model_tiles_flag_is_the_fallback(monkeypatch):
    monkeypatch.setenv("TF_POPLAR_FLAGS", "--use_ipu_model --ipu_model_tiles=16")
    cfg = IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()
    assert configured_system.current().tiles_per_ipu == 16


def test_ipu_model_without_version_warns_and_defaults_to_ipu2(ipu_model, caplog):
    caplog.set_level(logging.WARNING)
    opts = IpuOptions(device_config=[config.DeviceConfig(auto_count=2)])
    config.configure_ipu_system(opts)
    assert ("A version was not supplied when using the IPU Model. Defaulting to 'ipu2'."
            in caplog.messages)
    assert configured_system.current().ipu_version == "ipu2"


@pytest.mark.parametrize("cfg_index, size", [(0, 1), (15, 1), (16, 2), (23, 2), (24, 4),
                                             (27, 4), (28, 8), (29, 8), (30, 16)])
def test_select_ipus_uses_the_gc_info_listing(cfg_index, size):
    cfg = IPUConfig()
    cfg.select_ipus = [cfg_index]
    cfg.configure_ipu_system()
    assert configured_system.current().devices == (configured_system.VirtualDevice(0, size),)


def test_unknown_select_ipus_id_fails_like_a_missing_device():
    cfg = IPUConfig()
    cfg.select_ipus = [3, 31]
    with pytest.raises(tf.errors.FailedPreconditionError) as error:
        cfg.configure_ipu_system()
    assert error.value.message == (
        "Could not find an IPU device with id 31 for the TensorFlow virtual device "
        "/device:IPU:1. Use `gc-info -l` to view the available device configurations.")


# -- what configuring records ---------------------------------------------------------


def test_configure_writes_the_system_configuration():
    cfg = IPUConfig()
    cfg.auto_select_ipus = [2, 4]
    cfg.selection_order = SelectionOrder.SNAKE
    cfg.allow_recompute = True
    cfg.compilation_poplar_options = {"autoReport.all": "true"}
    cfg.configure_ipu_system()
    assert configured_system.is_configured()
    assert configured_system.current() == configured_system.SystemConfiguration(
        devices=(configured_system.VirtualDevice(0, 2), configured_system.VirtualDevice(1, 4)),
        ipu_model=False,
        ipu_version="ipu2",
        tiles_per_ipu=0,
        allow_recompute=True,
        selection_order="SNAKE",
        poplar_options={"autoReport.all": "true"},
    )
    assert configured_system.device(1).num_ipus == 4


def test_configuring_does_not_normalise_the_config_object():
    cfg = IPUConfig()
    cfg.auto_select_ipus = 2
    cfg.configure_ipu_system()
    assert cfg.auto_select_ipus == 2
    [opts] = config.get_ipu_config()
    assert opts.device_config == [config.DeviceConfig(auto_count=2)]


def test_module_level_configure_and_method_agree():
    cfg = IPUConfig()
    cfg.auto_select_ipus = 4
    config.configure_ipu_system(cfg, device="cpu", reset_configuration=True)
    via_function = configured_system.current()
    config.reset_ipu_configuration()
    cfg.configure_ipu_system(device="cpu")
    assert configured_system.current() == via_function


def test_no_configuration_means_one_single_ipu_device(caplog):
    caplog.set_level(logging.INFO)
    assert not configured_system.is_configured()
    assert configured_system.current().devices == (configured_system.VirtualDevice(0, 1),)
    assert ("No IPU device was configured for /device:IPU:0, creating a device with a "
            "single IPU.") in caplog.messages


def test_config_without_devices_creates_one_single_ipu_device(caplog):
    caplog.set_level(logging.INFO)
    IPUConfig().configure_ipu_system()
    assert configured_system.current().devices == (configured_system.VirtualDevice(0, 1),)
    assert configured_system.NO_DEVICE_CONFIGURED_MESSAGE in caplog.messages


def test_unknown_device_ordinal():
    cfg = IPUConfig()
    cfg.auto_select_ipus = [1, 1]
    cfg.configure_ipu_system()
    with pytest.raises(tf.errors.InvalidArgumentError) as error:
        configured_system.device(2)
    assert error.value.message == "Device ordinal 2 not in device configuration list."


def test_reconfiguring_with_a_different_config_resets_and_replaces(caplog):
    caplog.set_level(logging.INFO)
    first = IPUConfig()
    first.auto_select_ipus = 1
    first.configure_ipu_system()
    first.configure_ipu_system()  # identical: nothing to reset
    reset_message = "Resetting existing IPU configuration before applying new configuration"
    assert reset_message not in caplog.messages
    second = IPUConfig()
    second.auto_select_ipus = [2, 2]
    second.configure_ipu_system()
    assert caplog.messages.count(reset_message) == 1
    assert [d.num_ipus for d in configured_system.current().devices] == [2, 2]
    assert len(config.get_ipu_config()) == 2


def test_reconfiguring_without_reset_fails():
    first = IPUConfig()
    first.auto_select_ipus = 1
    config.configure_ipu_system(first)
    second = IPUConfig()
    second.auto_select_ipus = 2
    with pytest.raises(tf.errors.FailedPreconditionError) as error:
        config.configure_ipu_system(second, reset_configuration=False)
    assert error.value.message == (
        "IPU system configuration has already been set in this process, but it should have "
        "been reset automatically by the call to "
        "'tensorflow.python.ipu.config.configure_ipu_system'.")
    assert configured_system.device(0).num_ipus == 1


def test_get_ipu_config_needs_a_configuration():
    with pytest.raises(RuntimeError, match=re.escape("No IPU devices configured.")):
        config.get_ipu_config()
    cfg = IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()
    [opts] = config.get_ipu_config()
    assert isinstance(opts, IpuOptions)
    config.reset_ipu_configuration()
    assert not configured_system.is_configured()
    with pytest.raises(RuntimeError, match=re.escape("No IPU devices configured.")):
        config.get_ipu_config()


def test_changing_the_config_after_configuring_changes_nothing():
    cfg = IPUConfig()
    cfg.auto_select_ipus = 1
    cfg.configure_ipu_system()
    cfg.auto_select_ipus = 2
    assert configured_system.device(0).num_ipus == 1


def test_set_all_turns_on_every_floating_point_check():
    cfg = IPUConfig()
    cfg.floating_point_behaviour.set_all = True
    cfg.configure_ipu_system()
    [opts] = config.get_ipu_config()
    fp = opts.floating_point_behaviour
    assert fp.inv and fp.div0 and fp.oflo and fp.nanoo
    assert fp.esr is StochasticRoundingBehaviour.ON


# -- import cost -------------------------------------------------------------------------


def test_system_and_config_modules_do_not_import_tensorflow():
    # Load config.py under a stand-in package, since the real ipu package imports TF.
    code = (
        "import sys, types\n"
        "import ipu_emulator.runtime.configured_system\n"
        "package = types.ModuleType('ipu_emulator.ipu')\n"
        f"package.__path__ = [{os.path.dirname(config.__file__)!r}]\n"
        "sys.modules['ipu_emulator.ipu'] = package\n"
        "import ipu_emulator.ipu.config as config\n"
        "config.IPUConfig().to_json()\n"
        "assert 'tensorflow' not in sys.modules, 'tensorflow was imported'\n"
    )
    run_python(code, timeout=60).check()
