"""SDK modules that the emulator knows by name but does not emulate at all.

Each entry is ``emulator module -> (SDK module, names it had)``; ``register()`` creates the
modules, full of stubs that raise ``NotImplementedError`` when used (see
``ipu_emulator.ipu._unsupported``).  The names are the public ones of SDK 1.x to 3.4, so
``from tensorflow.python.ipu.horovod import init`` imports while ``... import int`` does not.
Modules that are partly emulated (``ops.nn_ops``, ``ops.embedding_ops``...) are files of
their own.
"""
from ipu_emulator.ipu import _unsupported

_P = "tensorflow.python.ipu."

# emulator module name (under ipu_emulator.ipu): (SDK module, public names, is a package)
MODULES = {
    # Multi-host and multi-process training.
    "horovod": (_P + "horovod", [
        "init", "shutdown", "size", "local_size", "rank", "local_rank", "allreduce",
        "broadcast", "allgather", "broadcast_variables", "broadcast_global_variables",
        "BroadcastGlobalVariablesHook", "Average", "Sum"], True),
    "horovod.ipu_horovod_strategy": (_P + "horovod.ipu_horovod_strategy", [
        "IPUHorovodStrategy", "IPUHorovodStrategyV1"], False),
    "horovod.ipu_multi_replica_strategy": (_P + "horovod.ipu_multi_replica_strategy", [
        "IPUMultiReplicaStrategy", "IPUMultiReplicaStrategyV1"], False),
    "horovod.popdist_strategy": (_P + "horovod.popdist_strategy", [
        "PopDistStrategy", "IPUHorovodStrategy"], False),
    "distributed": (_P + "distributed", [], True),
    "distributed.popdist_strategy": (_P + "distributed.popdist_strategy", [
        "PopDistStrategy"], False),
    "distributed.host_collective_ops": (_P + "distributed.host_collective_ops", [
        "allreduce", "allgather", "broadcast"], False),
    "ipu_multi_worker_strategy": (_P + "ipu_multi_worker_strategy", [
        "IPUMultiWorkerStrategy", "IPUMultiWorkerStrategyV1"], False),
    # Host-side tools.
    "dataset_benchmark": (_P + "dataset_benchmark", [
        "dataset_benchmark", "infeed_benchmark"], False),
    "serving": (_P + "serving", [
        "export_single_step", "export_pipeline", "export_keras"], False),
    "autoshard": (_P + "autoshard", ["automatic_sharding", "ipu_autoshard"], False),
    "autoshard_cnn": (_P + "autoshard_cnn", ["automatic_sharding"], False),
    # Ops without a CPU meaning worth emulating (collectives inside a replica, custom
    # Poplar code, reports, fp8...).
    "ops.all_to_all_op": (_P + "ops.all_to_all_op", ["all_to_all"], False),
    "ops.reduce_scatter_op": (_P + "ops.reduce_scatter_op", ["reduce_scatter"], False),
    "ops.within_replica_ops": (_P + "ops.within_replica_ops", [
        "all_gather", "reduce_scatter", "all_reduce"], False),
    "ops.statistics_ops": (_P + "ops.statistics_ops", [
        "histogram", "histogram_update", "fixed_width_bins"], False),
    "ops.summary_ops": (_P + "ops.summary_ops", [
        "ipu_compile_summary", "get_ipu_reports"], False),
    "ops.custom_ops": (_P + "ops.custom_ops", [
        "precompiled_user_op", "cpu_user_operation", "codelet_expression_op"], False),
    "ops.f8_ops": (_P + "ops.f8_ops", [
        "Format", "QuarterTensor", "create_metadata", "convert_to_f8", "convert_from_f8",
        "f8_matmul", "f8_conv_1d", "f8_conv_2d", "f8_conv_3d"], False),
    "ops.rnn_ops": (_P + "ops.rnn_ops", [
        "PopnnLSTM", "PopnnGRU", "PopnnDynamicLSTM", "PopnnDynamicGRU", "PopnnAUGRU"], False),
    "ops.slicing_ops": (_P + "ops.slicing_ops", [
        "sequence_slice", "sequence_slice_unpack", "sequence_slice_pack"], False),
    "ops.image_ops": (_P + "ops.image_ops", ["normalise_image"], False),
    "ops.embedded_runtime": (_P + "ops.embedded_runtime", [
        "embedded_runtime_start", "embedded_runtime_call"], False),
    "ops.application_compile_op": (_P + "ops.application_compile_op", [
        "experimental_application_compile_op"], False),
    "ops.control_flow_ops": (_P + "ops.control_flow_ops", ["barrier"], False),
    "ops.experimental": (_P + "ops.experimental", [], True),
    "ops.experimental.popfloat_cast_to_gfloat": (
        _P + "ops.experimental.popfloat_cast_to_gfloat", [
            "calc_gfloat_params", "cast_native_to_gfloat", "cast_gfloat_to_native"], False),
    "optimizers.automatic_loss_scaling_optimizer": (
        _P + "optimizers.automatic_loss_scaling_optimizer", [
            "AutomaticLossScalingOptimizer"], False),
    # IPU Keras of SDK 2.x that has no emulator counterpart.
    "keras.losses": (_P + "keras.losses", ["CTCLoss"], False),
    "keras.optimizers": (_P + "keras.optimizers", [
        "IpuOptimizer", "CrossReplicaOptimizer", "MapGradientOptimizer",
        "GradientAccumulationOptimizer", "AutomaticLossScalingOptimizer"], False),
}


def register():
    """Create every module of ``MODULES`` (idempotent), parents first."""
    for name in sorted(MODULES, key=lambda n: n.count(".")):
        sdk_name, names, is_package = MODULES[name]
        _unsupported.stub_module("ipu_emulator.ipu." + name, sdk_name, names,
                                "Not emulated: ``%s`` (stubs only)." % sdk_name,
                                is_package=is_package)
