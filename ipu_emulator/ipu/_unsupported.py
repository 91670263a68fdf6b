"""Names of the SDK that the emulator knows but does not emulate.

An original script may import far more of the SDK than it uses (``from tensorflow.python.ipu
import horovod`` at the top, a Horovod branch it never takes).  Such names are stubs: they
import, and raise ``NotImplementedError`` saying what is not emulated only when called or
instantiated.  A stub is a class, so it also works where the SDK name was a class
(subclassing is fine; creating an instance raises).

Every stub is listed by name, so a misspelt import still fails as it would with the SDK.
``stub_module`` builds a whole module of stubs from such a list (modules nothing of which is
emulated, e.g. ``ipu.horovod``), without one file per module.  Private: not a module of the
SDK (the ``ipu`` modules and ``compat.plugin`` use it).
"""
import importlib
import importlib.machinery
import importlib.util
import sys
import types


class Unsupported:
    """Base of the stubs: creating (calling) one raises ``NotImplementedError``."""

    feature = ""
    qualified_name = ""

    def __new__(cls, *args, **kwargs):
        raise NotImplementedError(message(cls.feature, cls.qualified_name))


def message(feature, used):
    text = "ipu_emulator does not emulate %s" % feature
    if used and used != feature:
        text += " (used: %s)" % used
    return text + ". It emulates the IPU API the tutorials use (see docs/sdk_module_tree.md)."


def stub(feature, qualified_name):
    """A stub for the SDK name ``qualified_name`` (e.g. ``tensorflow.python.ipu.horovod.init``)
    of the feature ``feature`` (e.g. ``tensorflow.python.ipu.horovod``)."""
    module, _, name = qualified_name.rpartition(".")
    return type(name, (Unsupported,), {
        "feature": feature, "qualified_name": qualified_name, "__module__": module,
        "__doc__": "Not emulated: %s." % qualified_name})


def stubs(sdk_module, names, feature=None):
    """``{name: stub}`` for ``names`` of ``sdk_module``; the feature is the module itself
    unless given (a partly emulated module names the single function instead)."""
    return {name: stub(feature or "%s.%s" % (sdk_module, name), "%s.%s" % (sdk_module, name))
            for name in names}


def stub_module(real_name, sdk_name, names, doc, is_package=False):
    """Create (once) the module ``real_name`` holding stubs for ``names`` of the SDK module
    ``sdk_name``, register it in ``sys.modules`` and bind it on its parent package."""
    if real_name in sys.modules:
        return sys.modules[real_name]
    if importlib.util.find_spec(real_name) is not None:
        # The module has since been written for real: it wins over its stub.
        return importlib.import_module(real_name)
    module = types.ModuleType(real_name, doc)
    module.__dict__.update(stubs(sdk_name, names, feature=sdk_name))
    module.__all__ = sorted(names)
    # A spec, so importlib.util.find_spec and the alias finder treat it like a file module.
    module.__spec__ = importlib.machinery.ModuleSpec(real_name, None, is_package=is_package)
    if is_package:
        module.__path__ = []
    sys.modules[real_name] = module
    parent, _, child = real_name.rpartition(".")
    setattr(importlib.import_module(parent), child, module)
    return module
