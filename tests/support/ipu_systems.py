"""Test helper: configure an emulated IPU system (imported by test modules; the fixtures that
reset the system around each test live in tests/emulator/conftest.py)."""
from ipu_emulator.ipu import config


def configure_ipus(num_ipus):
    """Configure an emulated IPU system of ``num_ipus`` IPUs (``IPUConfig.auto_select_ipus``)."""
    cfg = config.IPUConfig()
    cfg.auto_select_ipus = num_ipus
    cfg.configure_ipu_system()
