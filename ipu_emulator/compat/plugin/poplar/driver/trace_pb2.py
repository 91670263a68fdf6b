"""``tensorflow.compiler.plugin.poplar.driver.trace_pb2``: the event trace's messages, as
SDK tests and scripts import them (``from ...trace_pb2 import IpuTraceEvent``).  They are the
emulator's (``ipu_emulator.runtime.event_trace`` says how they differ from the SDK's)."""
from ipu_emulator.runtime.event_trace import (  # noqa: F401
    CompileBegin, CompileEnd, DataTransfer, Execute, IpuTraceEvent, LoadEngine)

__all__ = ["IpuTraceEvent", "CompileBegin", "CompileEnd", "DataTransfer", "LoadEngine",
           "Execute"]
