"""Frontend: user source text -> tirx.PrimFunc with located diagnostics.

Two input languages: TIRx TVMScript (source.py) and the TileLang subset (tilelang/), which is traced into the
same TIRx tile form. `load_kernel` picks by the file's imports and returns the PrimFunc plus a `relocate`
function that maps diagnostics on generated TIRx lines back to the user's file.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from ..errors import CompileError, SourceLocation
from .source import KernelSource, parse, prepare
from .tilelang import is_tilelang_source
from .. import attrs, precision

__all__ = ["KernelSource", "LoadedKernel", "load_kernel", "parse", "prepare", "is_tilelang_source"]


@dataclass
class LoadedKernel:
    func: object                          # tirx.PrimFunc, global_symbol = entry
    entry: str
    source_file: str                      # the file name the IR's spans refer to (tt.source_file)
    line_map: dict = field(default_factory=dict)
    user_file: str = ""
    notes: tuple = ()                     # `file:line:col: note: ...` lines for the compile log
    kept: bool = True                     # may be given again for the same arguments (not: it read sibling modules)

    def relocate(self, error: CompileError) -> CompileError:
        """A diagnostic on a generated TIRx line -> the same diagnostic at the user's TileLang line."""
        loc = error.location
        if not self.line_map or loc is None or loc.file != self.source_file:
            return error
        mapped = self.line_map.get(loc.line) if loc.line else None
        if mapped is None and loc.line:
            earlier = [n for n in self.line_map if n <= loc.line]
            mapped = self.line_map[max(earlier)] if earlier else None
        return error.at(mapped or SourceLocation(self.user_file))


# The last kernels loaded in this process, by everything their loading reads: a compile loads the kernel, and the
# verification of its run loads it again for the NumPy reference (compiler/toolchain/verification.py), in the same
# process (the CLI's verify, a sandboxed job, the tests): ~0.03-0.1 CPU s of tracing and TVMScript parsing each.
_LOADED: OrderedDict[tuple, LoadedKernel] = OrderedDict()
_LOADED_KEPT = 8
_LOADED_LOCK = threading.Lock()


def _frozen(value):
    """`params` as a key: plain values only (their types included: (64, 64) and [64, 64] differ); TypeError else."""
    if value is None or type(value) in (str, int, float, bool):
        return type(value).__name__, value
    if type(value) in (list, tuple):
        return type(value).__name__, tuple(_frozen(v) for v in value)
    if type(value) is dict and all(type(k) is str for k in value):
        return "dict", tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    raise TypeError(f"not a plain value: {type(value).__name__}")


def load_kernel(text: str, filename: str = "kernel.py", entry: str | None = None,
                params: dict | None = None, cores: int = 64) -> LoadedKernel:
    """Source text -> LoadedKernel. Executes user Python (TVMScript or TileLang): only inside the sandbox. `cores`:
    the target's worker count (TileLang's `driver.get_num_sms()`). The same arguments again (params of plain values)
    give the same LoadedKernel, not loaded again: callers only read it."""
    try:
        key = (text, filename, entry, _frozen(params), cores)
    except TypeError:
        return _load_kernel(text, filename, entry, params, cores)
    with _LOADED_LOCK:
        if key in _LOADED:
            _LOADED.move_to_end(key)
            return _LOADED[key]
    loaded = _load_kernel(text, filename, entry, params, cores)
    if not loaded.kept:
        return loaded
    with _LOADED_LOCK:
        _LOADED[key] = loaded
        while len(_LOADED) > _LOADED_KEPT:
            _LOADED.popitem(last=False)
    return loaded


def _load_kernel(text: str, filename: str, entry: str | None, params: dict | None, cores: int) -> LoadedKernel:
    if is_tilelang_source(text):
        from .tilelang import trace

        traced = trace(text, filename, entry, params, cores)
        generated = f"{filename} (TIRx generated from TileLang)"
        loaded = LoadedKernel(None, traced.entry, generated, traced.line_map, filename, traced.notes,
                              kept=not traced.read_siblings)   # a sibling may change on the disk: load it again
        try:
            func = parse(KernelSource(generated, traced.text, traced.entry, traced.text, 1))
        except CompileError as e:
            raise loaded.relocate(e) from None
        if traced.pipeline_stages:
            func = attrs.PIPELINE_STAGES.on(func, traced.pipeline_stages)
        if traced.logical_shapes:   # 1-D vectors are rows or columns in the TIRx; their users pass 1-D arrays
            func = attrs.LOGICAL_SHAPES.on(func, traced.logical_shapes)
        if traced.declared_dtypes:
            func = attrs.DECLARED_DTYPES.on(func, traced.declared_dtypes)
        # found here, before passes forward copies (an int32 tile that only copies a float32 sum disappears)
        exact = precision.exact_values(func, traced.declared_dtypes or {})
        if exact:
            func = attrs.EXACT_VALUES.on(func, sorted(exact))
        loaded.func = func
        return loaded
    if params:
        raise CompileError(f"parameters ({', '.join(sorted(params))}) apply to TileLang kernel factories; this is a "
                           "TIRx file with fixed shapes", stage="parse", location=SourceLocation(filename, 1, 1))
    prepared = prepare(text, filename, entry)
    return LoadedKernel(parse(prepared), prepared.entry, filename, user_file=filename)
