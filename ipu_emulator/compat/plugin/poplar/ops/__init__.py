"""``tensorflow.compiler.plugin.poplar.ops``: the SDK's generated op wrappers (``gen_*_ops``).

Each ``gen_*`` module of the SDK holds one Python function per registered Poplar op (several
hundred in all).  Scripts use them only through the ``ipu`` API, which the emulator provides;
the modules here exist so that importing them works.  Every op name in them is a stub that
raises ``NotImplementedError`` when called, except ``gen_poputil_ops.replication_index`` (the
emulator's ``ipu.replication_ops.replication_index``) and ``gen_ipu_ops.ipu_event_trace`` (the
emulator's IPU trace events: ``runtime/event_trace.py``).  Op names are not listed one by one here: any
lower-case name is taken to be an op, so unlike the ``ipu`` modules a misspelt op name
only fails when called.
"""
import importlib
import importlib.machinery
import re
import sys
import types

from ipu_emulator.ipu import _unsupported

GEN_MODULES = (
    "gen_application_runtime", "gen_dataset_benchmark", "gen_dataset_exporters",
    "gen_functional_ops", "gen_ipu_ops", "gen_pop_datastream_ops", "gen_popfloat_ops",
    "gen_popnn_ops", "gen_popops_ops", "gen_poprand_ops", "gen_poputil_ops",
    "gen_sendrecv_ops")

_SDK = "tensorflow.compiler.plugin.poplar.ops"
_OP_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_EMULATED = {("gen_poputil_ops", "replication_index"):
             ("ipu_emulator.ipu.ops.replication_ops", "replication_index"),
             ("gen_ipu_ops", "ipu_event_trace"):
             ("ipu_emulator.runtime.event_trace", "ipu_event_trace")}


def _gen_module(name):
    real_name = "%s.%s" % (__name__, name)
    if real_name in sys.modules:
        return sys.modules[real_name]
    module = types.ModuleType(real_name, "Not emulated: ``%s.%s`` (op stubs)." % (_SDK, name))
    module.__spec__ = importlib.machinery.ModuleSpec(real_name, None)

    def op(attribute):
        if (name, attribute) in _EMULATED:
            where, function = _EMULATED[name, attribute]
            return getattr(importlib.import_module(where), function)
        if not _OP_NAME.match(attribute):
            raise AttributeError("module %r has no attribute %r" % (real_name, attribute))
        qualified = "%s.%s.%s" % (_SDK, name, attribute)
        value = _unsupported.stub("the Poplar op %s" % qualified, qualified)
        setattr(module, attribute, value)
        return value

    module.__getattr__ = op
    sys.modules[real_name] = module
    globals()[name] = module
    return module


def __getattr__(name):
    if name in GEN_MODULES:
        return _gen_module(name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))
