"""Frontend: user source text -> tirx.PrimFunc with located diagnostics."""
from .source import KernelSource, parse, prepare

__all__ = ["KernelSource", "parse", "prepare"]
