"""Evaluate a user's TileLang file just enough to build the entry kernel, then trace it.

1. Pick the entry: a module-level `@T.prim_func`, or a kernel factory (plain or `@tilelang.jit`) that is called
   with the request's parameters.
2. Execute only the top-level statements the entry needs (transitively by name): `import torch`, autotuner
   set-up or a `def main()` using CUDA elsewhere in the file are never run.
3. Imports go through a restricted importer: `tilelang[.language|.utils.target|...]` resolve to our shim, a few
   pure standard modules are real, anything else is a stub that fails only if the kernel uses it.
4. Trace the prim_func (recorder.py) into TIRx text with a line map back to the user's file.

Executes user Python: runs only inside compile_source, which the service sandboxes.
"""
from __future__ import annotations

import ast
import builtins
import inspect
import re
from dataclasses import dataclass

from ...errors import CompileError, SourceLocation
from .diagnostics import STAGE, fail, reset_user_file, set_user_file, traceback_location
from .language import PrimFuncDef, TensorSpec
from .recorder import Recorder, active, reset_active
from .shim import JitFactory, Missing, build_modules

_TILELANG_IMPORT = re.compile(r"^\s*(import\s+tilelang\b|from\s+tilelang\b)", re.M)
REAL_MODULES = frozenset({"math", "itertools", "functools", "operator", "typing", "dataclasses", "enum",
                          "collections", "__future__", "abc", "numbers"})
ParamValue = int | float | str | bool


def is_tilelang_source(text: str) -> bool:
    return bool(_TILELANG_IMPORT.search(text))


@dataclass(frozen=True)
class TracedKernel:
    entry: str
    text: str                                   # TIRx TVMScript of the kernel
    line_map: dict[int, SourceLocation]         # generated line -> the user's file:line:col
    pipeline_stages: int                        # max T.Pipelined num_stages (0: none)


def _loc(filename, line=None, col=None) -> SourceLocation:
    return SourceLocation(filename, line, col)


# ---- entry selection and dependencies ---------------------------------------------------------------------------
def _decorator_names(node) -> list[str]:
    out = []
    for dec in getattr(node, "decorator_list", []):
        target = dec.func if isinstance(dec, ast.Call) else dec
        out.append(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return out


def _select_entry(tree: ast.Module, entry: str | None, filename: str) -> ast.FunctionDef:
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    if entry is not None:
        for n in functions:
            if n.name == entry:
                return n
        raise CompileError(f"entry `{entry}` not found; functions in this file: "
                           f"{', '.join(n.name for n in functions) or 'none'}", stage=STAGE, location=_loc(filename))
    kernels = [n for n in functions if "prim_func" in _decorator_names(n)]
    factories = [n for n in functions if "jit" in _decorator_names(n)]
    for group in (kernels, factories):
        named_main = [n for n in group if n.name == "main"]
        if named_main:
            return named_main[0]
        if len(group) == 1:
            return group[0]
    raise CompileError("cannot tell which function builds the kernel; name it with --entry (API: `entry`)",
                       stage=STAGE, location=_loc(filename, 1, 1),
                       hint="a module-level @T.prim_func, or a kernel factory called with --param NAME=VALUE")


def _bound_names(node) -> set[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            names.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
            names.add(sub.name)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in sub.names}
    return names


def _used_names(node) -> set[str]:
    return {sub.id for sub in ast.walk(node) if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load)}


def _needed_statements(tree: ast.Module, entry: ast.FunctionDef) -> list[ast.stmt]:
    """The top-level statements the entry depends on, in file order (a fixpoint over free names)."""
    statements = [s for s in tree.body if s is not entry]
    needed, wanted = {id(entry)}, _used_names(entry)
    changed = True
    while changed:
        changed = False
        for s in statements:
            if id(s) not in needed and _bound_names(s) & wanted:
                needed.add(id(s))
                wanted |= _used_names(s)
                changed = True
    return [s for s in tree.body if id(s) in needed]


def _target_names(tree: ast.Module) -> dict[int, list[str]]:
    """line -> names bound there (`x = T.alloc_*`, `for k in ...`, `with ... as (bx, by)`): readable IR names."""
    names: dict[int, list[str]] = {}

    def add(line, target):
        if isinstance(target, ast.Name):
            names.setdefault(line, []).append(target.id)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                add(line, t)

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            add(node.value.lineno, node.targets[0])
        elif isinstance(node, ast.For):
            add(node.iter.lineno, node.target)
        elif isinstance(node, ast.With):
            for item in node.items:
                if item.optional_vars is not None:
                    add(item.context_expr.lineno, item.optional_vars)
    return names


# ---- execution --------------------------------------------------------------------------------------------------
def _importer(modules: dict):
    real_import = builtins.__import__

    def restricted_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level:
            return Missing(name or ".", "relative imports are not available when compiling a single file")
        root = name.split(".")[0]
        if root == "tilelang":
            if name not in modules:
                return Missing(name, "tilefarm's tilelang provides only the kernel language subset")
            return modules[name] if fromlist else modules["tilelang"]
        if root in REAL_MODULES:
            return real_import(name, globals, locals, fromlist, level)
        return Missing(name, f"module `{root}` is not available when compiling for Tenstorrent")

    return restricted_import


def _kernel_range(*args):
    """Inside a kernel body `range(n)` is a serial loop (as in TileLang); elsewhere it is Python's range."""
    from .recorder import _active

    rec = _active.get()
    if rec is not None and rec.kernel_state == "open" and rec.parallel is None:
        from .language import serial
        return serial(*args)
    return builtins.range(*args)


def _user_error(e: BaseException, filename: str, fallback: SourceLocation) -> CompileError:
    if isinstance(e, CompileError):
        return e
    msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
    location = traceback_location(e, filename) or fallback
    return CompileError(f"{type(e).__name__}: {msg}" if msg else type(e).__name__, stage=STAGE, location=location)


def trace(text: str, filename: str = "kernel.py", entry: str | None = None,
          params: dict[str, ParamValue] | None = None) -> TracedKernel:
    """Evaluate the file for `entry` (with `params`) and record the kernel. Raises located CompileErrors."""
    params = dict(params or {})
    try:
        tree = ast.parse(text, filename=filename)
    except SyntaxError as e:
        raise CompileError(f"invalid syntax: {e.msg}", stage=STAGE, location=_loc(filename, e.lineno, e.offset)) from None
    entry_node = _select_entry(tree, entry, filename)
    entry_loc = _loc(filename, entry_node.lineno, entry_node.col_offset + 1)
    module = ast.Module(body=_needed_statements(tree, entry_node), type_ignores=[])
    modules = build_modules()
    safe_builtins = dict(vars(builtins))
    safe_builtins["__import__"] = _importer(modules)
    safe_builtins["range"] = _kernel_range
    namespace = {"__name__": "__tilelang_kernel__", "__file__": filename, "__builtins__": safe_builtins}
    token = set_user_file(filename)
    try:
        try:
            exec(compile(module, filename, "exec", dont_inherit=True), namespace)  # noqa: S102 -- sandboxed by the caller
            built = namespace[entry_node.name]
            kernel = _build(built, entry_node, params, filename, entry_loc)
            return _trace_prim_func(kernel, entry_node.name, tree, filename)
        except CompileError:
            raise
        except Exception as e:  # user code can raise anything while building the kernel
            raise _user_error(e, filename, entry_loc) from None
    finally:
        reset_user_file(token)


def _build(built, node: ast.FunctionDef, params: dict, filename: str, entry_loc: SourceLocation) -> PrimFuncDef:
    if isinstance(built, PrimFuncDef):
        if params:
            raise CompileError(f"`{node.name}` is a @T.prim_func with fixed shapes; it takes no parameters "
                               f"(got {', '.join(sorted(params))})", stage=STAGE, location=entry_loc)
        return built
    factory = built.fn if isinstance(built, JitFactory) else built
    if not callable(factory):
        raise CompileError(f"`{node.name}` is not a kernel factory or a prim_func", stage=STAGE, location=entry_loc)
    try:
        signature = inspect.signature(factory)
        bound = signature.bind(**params)
    except TypeError as e:
        wanted = ", ".join(p.name + ("" if p.default is inspect.Parameter.empty else f"={p.default!r}")
                           for p in inspect.signature(factory).parameters.values())
        raise CompileError(f"cannot call the kernel factory `{node.name}` with the given parameters: {e}",
                           stage=STAGE, location=entry_loc,
                           hint=f"its parameters: {wanted}; pass them as --param NAME=VALUE (API: `params`)") from None
    result = built(*bound.args, **bound.kwargs)
    if not isinstance(result, PrimFuncDef):
        raise CompileError(f"the kernel factory `{node.name}` returned {type(result).__name__}, not a @T.prim_func",
                           stage=STAGE, location=entry_loc)
    return result


def _trace_prim_func(kernel: PrimFuncDef, entry: str, tree: ast.Module, filename: str) -> TracedKernel:
    fn = kernel.fn
    code = fn.__code__
    def_loc = _loc(filename, code.co_firstlineno, None)
    rec = Recorder(filename, _target_names(tree))
    annotations = getattr(fn, "__annotations__", {})
    buffers = []
    for name, p in inspect.signature(fn).parameters.items():
        spec = annotations.get(name)
        if isinstance(spec, str):  # `from __future__ import annotations` in the user's file
            closure = dict(zip(code.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
            spec = eval(spec, fn.__globals__, closure)  # noqa: S307 -- the user's own annotation, sandboxed
        if not isinstance(spec, TensorSpec):
            raise CompileError(f"prim_func parameter `{name}` must be annotated `T.Tensor((rows, cols), dtype)`",
                               stage=STAGE, location=def_loc)
        buffers.append(rec.add_param(name, spec))
    token = active(rec)
    try:
        result = fn(*buffers)
    finally:
        reset_active(token)
    if result is not None:
        raise CompileError("a prim_func body returns nothing", stage=STAGE, location=def_loc)
    if rec.kernel_state == "open":
        raise CompileError("the T.Kernel block did not finish", stage=STAGE, location=def_loc)
    text, line_map = rec.render(entry, def_loc)
    return TracedKernel(entry, text, line_map, rec.stages)
