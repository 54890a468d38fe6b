"""Evaluate a user's TileLang file just enough to build the entry kernel, then trace it.

1. Pick the entry: a module-level `@T.prim_func`, or a kernel factory (plain, `@tilelang.jit`, `@autotune`) that
   is called with the request's parameters, typed from its signature (params.py).
2. Execute only the top-level statements the entry needs: the module-level names its code refers to (Python's own
   scoping analysis, `symtable`), transitively. `import torch`, autotuner set-up, `if __name__ == "__main__":`
   blocks or a `def main()` using CUDA elsewhere in the file are never run.
3. Imports go through a restricted importer: `tilelang[.language|.autotuner|...]` resolve to our shim, a few pure
   standard modules are real, anything else is a stub that fails only if the kernel uses it.
4. An eager-JIT factory (its body holds the kernel: `M, N = T.const("M, N")`, `X: T.Tensor((M, N), dtype)`,
   `Y = T.empty(...)`, `with T.Kernel(...)`) runs with the recorder active; its tensor annotations are rewritten
   into bindings of the tensor arguments, which Python would otherwise not evaluate.
5. Trace the prim_func (recorder.py) into TIRx text with a line map back to the user's file.

Executes user Python: runs only inside compile_source, which the service sandboxes.
"""
from __future__ import annotations

import ast
import builtins
import copy
import inspect
import keyword
import os
import re
import symtable
import types
from dataclasses import dataclass, field

from ...errors import CompileError, SourceLocation
from .. import pyast
from .base import Missing
from .diagnostics import STAGE, reset_user_file, set_user_file, traceback_location
from .language import (PrimFuncDef, SizeVar, TensorArg, TensorSpec, bind_tensor, kernel_and, kernel_if, kernel_not,
                       kernel_or, kernel_select, reset_const_values, serial, set_const_values)
from .params import scalar_annotation, type_params, type_value
from .recorder import Buffer, Recorder, SecondKernel, activate, active_recorder, deactivate
from .shim import JitFactory, build_modules

_TILELANG_IMPORT = re.compile(r"^\s*(import\s+tilelang\b|from\s+tilelang\b)", re.M)
REAL_MODULES = frozenset({"math", "itertools", "functools", "operator", "typing", "dataclasses", "enum",
                          "collections", "__future__", "abc", "numbers", "typing_extensions"})
BIND = "__tilefarm_bind_tensor__"
BODY_TENSOR = "__tilefarm_body_tensor__"
ParamValue = int | float | str | bool


def is_tilelang_source(text: str) -> bool:
    return bool(_TILELANG_IMPORT.search(text))


@dataclass(frozen=True)
class TracedKernel:
    entry: str
    text: str                                   # TIRx TVMScript of the kernel
    line_map: dict[int, SourceLocation]         # generated line -> the user's file:line:col
    pipeline_stages: int                        # max T.Pipelined num_stages (0: none)
    logical_shapes: dict = field(default_factory=dict)   # parameter -> the user's shape where the TIRx one differs
    declared_dtypes: dict = field(default_factory=dict)  # low-bit parameter -> its dtype (read as bfloat16)
    notes: tuple = ()                           # `file:line:col: note: ...` for the compile log
    read_siblings: bool = False                 # took names from modules beside the file (read from the disk)


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
    factories = [n for n in functions if {"jit", "autotune"} & set(_decorator_names(n))]
    for group in (kernels, factories):
        named_main = [n for n in group if n.name == "main"]
        if named_main:
            return named_main[0]
        if len(group) == 1:
            return group[0]
    raise CompileError("cannot tell which function builds the kernel; name it with --entry (API: `entry`)",
                       stage=STAGE, location=_loc(filename, 1, 1),
                       hint="a module-level @T.prim_func, or a kernel factory called with --param NAME=VALUE")


def _is_main_guard(node) -> bool:
    """`if __name__ == "__main__":` -- never true when a kernel is built."""
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and isinstance(test, ast.Compare) and \
        isinstance(test.left, ast.Name) and test.left.id == "__name__"


class _Scopes:
    """Module-level names each top-level statement binds and needs, from Python's own scoping (symtable)."""

    def __init__(self, text: str, filename: str, star_exports: dict[str, list[str]]):
        self.tables: dict[tuple[str, int], symtable.SymbolTable] = {}
        try:
            top = symtable.symtable(text, filename, "exec")
            for child in top.get_children():
                self.tables[(child.get_name(), child.get_lineno())] = child
        except SyntaxError:
            pass
        self.star_exports = star_exports

    def _globals(self, table) -> set[str]:
        names = {s.get_name() for s in table.get_symbols() if s.is_global() and s.is_referenced()}
        for child in table.get_children():
            names |= self._globals(child)
        return names

    @staticmethod
    def _loads(nodes) -> set[str]:
        return {sub.id for node in nodes if node is not None for sub in ast.walk(node)
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load)}

    def needs(self, node) -> set[str]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            outside = list(node.decorator_list)
            if isinstance(node, ast.ClassDef):
                outside += node.bases + [k.value for k in node.keywords]
            else:
                args = node.args
                outside += args.defaults + [d for d in args.kw_defaults if d is not None]
                outside += [a.annotation for a in args.args + args.kwonlyargs if a.annotation is not None]
            lineno = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            table = self.tables.get((node.name, node.lineno)) or self.tables.get((node.name, lineno))
            inside = self._globals(table) if table is not None else self._loads([node])
            return self._loads(outside) | inside
        return self._loads([node])

    def binds(self, node) -> set[str]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return {node.name}
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out = set()
            for a in node.names:
                if a.name == "*":
                    out |= set(self.star_exports.get(getattr(node, "module", "") or "", []))
                else:
                    out.add((a.asname or a.name).split(".")[0])
            return out
        names = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                names.add(sub.id)
            elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
                names.add(sub.name)
            elif isinstance(sub, (ast.Import, ast.ImportFrom)):
                names |= {(a.asname or a.name).split(".")[0] for a in sub.names if a.name != "*"}
        return names


def _needed_statements(tree: ast.Module, entry: ast.FunctionDef, scopes: _Scopes) -> list[ast.stmt]:
    """The top-level statements the entry depends on, in file order (a fixpoint over module-level names)."""
    statements = [s for s in tree.body if s is not entry and not _is_main_guard(s)]
    needed, wanted = {id(entry)}, scopes.needs(entry)
    changed = True
    while changed:
        changed = False
        for s in statements:
            if id(s) not in needed and scopes.binds(s) & wanted:
                needed.add(id(s))
                wanted |= scopes.needs(s)
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


# ---- eager JIT ----------------------------------------------------------------------------------------------------
def _is_eager(fn: ast.FunctionDef) -> bool:
    """The factory's own body is the kernel (TileLang's eager-JIT style)."""
    if "prim_func" in _decorator_names(fn):
        return False
    if _annotated_args(fn):
        return True
    for node in fn.body:
        if isinstance(node, ast.With) and any("Kernel" in ast.unparse(i.context_expr) for i in node.items):
            return True
        for sub in ast.walk(node):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in ("const", "empty"):
                return True
    return False


def _const_names(fn: ast.AST) -> set[str]:
    """The sizes named by `T.const("M, N")` and `T.dynamic("m")` / `T.symbolic("m")` (given as --param m=VALUE)."""
    names = set()
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                sub.func.attr in ("const", "dynamic", "symbolic") and \
                sub.args and isinstance(sub.args[0], ast.Constant) and isinstance(sub.args[0].value, str):
            names |= {n for n in sub.args[0].value.replace(",", " ").split() if n}
    return names


class _BindAnnotations(ast.NodeTransformer):
    """`X: T.Tensor(shape, dtype)` in the factory's body -> `X = __tilefarm_bind_tensor__("X", X, T.Tensor(...))`.
    X is a factory argument, or a tensor the body declares (TileLang binds it when the kernel is called; here it is
    given as a parameter `X=DTYPE[...]`, or its sizes as T.const parameters): then the value is looked up by name."""

    def __init__(self, entry: ast.FunctionDef):
        self.entry = entry
        self.params = {a.arg for a in entry.args.args + entry.args.kwonlyargs}

    def visit_FunctionDef(self, node):  # noqa: N802
        if node is not self.entry:
            return node
        node.body = [self._bind(s) for s in node.body]
        return node

    def _bind(self, s):
        if _is_tensor_annotation(s):
            name = s.target.id
            value = ast.Name(name, ast.Load()) if name in self.params else \
                ast.Call(ast.Name(BODY_TENSOR, ast.Load()), [ast.Constant(name)], [])
            call = ast.Call(ast.Name(BIND, ast.Load()), [ast.Constant(name), value, s.annotation], [])
            new = ast.Assign([ast.Name(name, ast.Store())], call)
            return ast.copy_location(ast.fix_missing_locations(ast.copy_location(new, s)), s)
        return s


# ---- `if` on kernel values ----------------------------------------------------------------------------------------
IF, AND, OR, NOT = "__tilefarm_if__", "__tilefarm_and__", "__tilefarm_or__", "__tilefarm_not__"
SELECT = "__tilefarm_select__"


_BODIES = ("body", "orelse", "finalbody", "handlers")     # the fields of a statement that hold statements


def _statements(node):
    """Every statement under `node`, through statement bodies only (expressions are not walked: cheap)."""
    for part in _BODIES:
        for child in getattr(node, part, None) or ():
            yield child
            yield from _statements(child)


class _KernelIfs:
    """`if test: body else: orelse` -> the test evaluated once, then `for _ in __tilefarm_if__(t): body` and
    `for _ in __tilefarm_if__(t, True): orelse`: a Python value picks a branch as Python does, a condition on block and
    loop indices becomes a loop of one or no iteration on each core. `and` / `or` / `not` in the test keep Python's
    short-circuit on Python values and combine kernel conditions. An `if` whose branches return, yield, break or
    continue (they would leave the wrong loop) stays Python's."""

    def __init__(self):
        self.count = 0

    def visit(self, node):
        """Rewrites the `if` statements under `node` in place (statement bodies only: an `if` is a statement)."""
        for part in _BODIES:
            stmts = getattr(node, part, None)
            if not stmts:
                continue
            out = []
            for stmt in stmts:
                self.visit(stmt)
                replaced = self.visit_If(stmt) if isinstance(stmt, ast.If) else stmt
                out.extend(replaced if isinstance(replaced, list) else [replaced])
            setattr(node, part, out)
        return node

    def visit_If(self, node):  # noqa: N802 -- its bodies are already rewritten by visit()
        if _leaves_the_branch(node.body) or _leaves_the_branch(node.orelse):
            return node
        self.count += 1
        cond = f"__tilefarm_cond{self.count}__"
        test = _KernelTest().visit(node.test)
        out = [ast.Assign([ast.Name(cond, ast.Store())], test)]
        for negate, body in ((False, node.body), (True, node.orelse)):
            if not body:
                continue
            call = ast.Call(ast.Name(IF, ast.Load()), [ast.Name(cond, ast.Load())] + ([ast.Constant(True)] if negate else []),
                            [])
            out.append(ast.For(ast.Name("__tilefarm_branch__", ast.Store()), call, body, []))
        for stmt in out:
            ast.copy_location(stmt, node)
        return [ast.fix_missing_locations(stmt) for stmt in out]


class _KernelTest(ast.NodeTransformer):
    def visit_BoolOp(self, node):  # noqa: N802
        self.generic_visit(node)
        thunks = [ast.Lambda(ast.arguments([], [], None, [], [], None, []), v) for v in node.values]
        helper = AND if isinstance(node.op, ast.And) else OR
        return ast.copy_location(ast.Call(ast.Name(helper, ast.Load()), thunks, []), node)

    def visit_UnaryOp(self, node):  # noqa: N802
        self.generic_visit(node)
        if isinstance(node.op, ast.Not):
            return ast.copy_location(ast.Call(ast.Name(NOT, ast.Load()), [node.operand], []), node)
        return node


class _KernelExprs(_KernelTest):
    """Inside a @T.prim_func body, every expression's `and` / `or` / `not` and `a if c else b`: Python's own result on
    Python values, T.And / T.Or / T.Not and T.if_then_else on kernel conditions (`T.if_then_else(i >= q_len or
    j >= k_len, -1e9, 0)`, as TVMScript parses them)."""

    def __init__(self):
        self.inside = False

    def visit_FunctionDef(self, node):  # noqa: N802
        outer = self.inside
        self.inside = outer or any(ast.unparse(d).split("(")[0].endswith("prim_func") for d in node.decorator_list)
        self.generic_visit(node)
        self.inside = outer
        return node

    def visit_BoolOp(self, node):  # noqa: N802
        return super().visit_BoolOp(node) if self.inside else self.generic_visit(node)

    def visit_UnaryOp(self, node):  # noqa: N802
        return super().visit_UnaryOp(node) if self.inside else self.generic_visit(node)

    def visit_IfExp(self, node):  # noqa: N802
        self.generic_visit(node)
        if not self.inside:
            return node
        thunks = [ast.Lambda(ast.arguments([], [], None, [], [], None, []), v) for v in (node.body, node.orelse)]
        return ast.copy_location(ast.Call(ast.Name(SELECT, ast.Load()), [node.test] + thunks, []), node)


def _leaves_the_branch(body: list) -> bool:
    """Does the block return / yield, or break / continue a loop around the `if`?"""
    def visit(node, in_loop: bool) -> bool:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            return False
        if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(node, (ast.Break, ast.Continue)) and not in_loop:
            return True
        inner = in_loop or isinstance(node, (ast.For, ast.While, ast.AsyncFor))
        return any(visit(child, inner) for child in ast.iter_child_nodes(node))
    return any(visit(stmt, False) for stmt in body)


# ---- execution --------------------------------------------------------------------------------------------------
def _statements_for(body: list, wanted: set[str], scopes: _Scopes) -> list[int]:
    """Indices of the top-level statements that bind `wanted` and what those need, transitively (main guard never)."""
    candidates = [k for k, s in enumerate(body) if not _is_main_guard(s)]
    needed, wanted = set(), set(wanted)
    changed = True
    while changed:
        changed = False
        for k in candidates:
            if k not in needed and scopes.binds(body[k]) & wanted:
                needed.add(k)
                wanted |= scopes.needs(body[k])
                changed = True
    return sorted(needed)


SIBLING_MAX_BYTES = 1 << 20


class _Siblings:
    """Modules beside the kernel's own file (`from block_causal_attention import LOG2_E, _check_dllm_block` in
    block_causal_attention_varlen.py). Only when the kernel was read from a file on disk (the file named `filename`
    holds exactly the source text: the CLI, the sweep): a request's source text names no directory of the host, and
    the service's sandbox shows it none. Only plain module names, only regular files directly in that directory
    (symbolic links that lead elsewhere are not followed). Each module is evaluated as the kernel's file is: only the
    top-level statements the names taken from it need, with the same restricted importer and builtins."""

    def __init__(self, text: str, filename: str):
        self.dir = None
        try:
            path = os.path.realpath(filename)
            if os.path.isfile(path) and os.path.getsize(path) <= SIBLING_MAX_BYTES:
                with open(path, encoding="utf-8") as f:
                    if f.read() == text:
                        self.dir = os.path.dirname(path)
        except (OSError, UnicodeDecodeError, ValueError):
            self.dir = None
        self.modules: dict[str, types.ModuleType] = {}
        self.builtins: dict | None = None       # set by trace: the kernel file's restricted builtins

    def path_of(self, name: str) -> str | None:
        if self.dir is None or not name.isidentifier() or keyword.iskeyword(name):
            return None
        path = os.path.realpath(os.path.join(self.dir, name + ".py"))
        try:
            ok = os.path.dirname(path) == self.dir and os.path.isfile(path) and \
                os.path.getsize(path) <= SIBLING_MAX_BYTES
        except OSError:
            ok = False
        return path if ok else None

    def load(self, name: str, path: str) -> types.ModuleType:
        if name in self.modules:
            return self.modules[name]
        with open(path, encoding="utf-8") as f:
            text = f.read()
        tree = pyast.parse(text, path)
        module = _SiblingModule(name, tree, _Scopes(text, path, {}), path, self.builtins)
        self.modules[name] = module
        return module


class _SiblingModule(types.ModuleType):
    """A sibling module whose top-level statements run when a name is taken from it, only those that name needs."""

    def __init__(self, name: str, tree: ast.Module, scopes: _Scopes, path: str, safe_builtins: dict):
        super().__init__(name)
        object.__setattr__(self, "_tf", {"tree": tree, "scopes": scopes, "path": path, "done": set()})
        self.__dict__.update({"__file__": path, "__builtins__": safe_builtins})

    def _tf_define(self, names) -> None:
        tf = object.__getattribute__(self, "_tf")
        body = tf["tree"].body
        if "*" in names:
            names = {n for k, s in enumerate(body) if not _is_main_guard(s) for n in tf["scopes"].binds(s)
                     if not n.startswith("_")}
        todo = [k for k in _statements_for(body, set(names), tf["scopes"]) if k not in tf["done"]]
        if not todo:
            return
        tf["done"].update(todo)
        module = _KernelIfs().visit(ast.Module(body=[copy.deepcopy(body[k]) for k in todo], type_ignores=[]))
        exec(pyast.compile_tree(ast.fix_missing_locations(module), tf["path"]), self.__dict__)  # noqa: S102

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        self._tf_define({attr})
        try:
            return self.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module `{self.__name__}` has no top-level name `{attr}`") from None


def _importer(modules: dict, siblings: _Siblings | None = None):
    real_import = builtins.__import__

    def restricted_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level:
            return Missing(name or ".", "relative imports are not available when compiling a single file")
        root = name.split(".")[0]
        path = siblings.path_of(name) if siblings is not None and root not in REAL_MODULES and root != "tilelang" \
            else None
        if path is not None:
            module = siblings.load(name, path)
            if fromlist:
                module._tf_define(set(fromlist))
            return module
        if root == "tvm" and name == "tvm" and fromlist:   # `from tvm import DataType`: dtype helpers only
            return modules["tvm"]
        if root == "tilelang":
            if not fromlist:           # `import tilelang.x.y` binds `tilelang`
                return modules["tilelang"]
            if name not in modules:
                return Missing(name, "tilefarm's tilelang provides only the kernel language subset")
            return modules[name]
        if root in REAL_MODULES:
            return real_import(name, globals, locals, fromlist, level)
        # `import torch.backends` binds `torch`: its names are the root's (`torch.rand`)
        return Missing(name if fromlist else root, f"module `{root}` is not available when compiling for Tenstorrent")

    return restricted_import


def _kernel_range(*args):
    """Inside a kernel body `range(n)` is a serial loop (as in TileLang); elsewhere it is Python's range."""
    rec = active_recorder()
    if rec is not None and rec.kernel_state == "open" and rec.parallel is None:
        return serial(*args)
    return builtins.range(*args)


def _user_error(e: BaseException, filename: str, fallback: SourceLocation) -> CompileError:
    """An exception raised by the user's own code while building the kernel: located, in words, not a type name."""
    if isinstance(e, CompileError):
        return e
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    location = traceback_location(e, filename) or fallback
    if isinstance(e, AssertionError):
        message = f"an assertion of the kernel factory failed{': ' + text if text else ''}"
    elif isinstance(e, NameError):
        message = f"the kernel uses a name that is not defined here ({text})"
    elif isinstance(e, (TypeError, ValueError, AttributeError, IndexError, KeyError, ZeroDivisionError)):
        message = f"the kernel factory's Python failed while building the kernel: {text or type(e).__name__}"
    else:
        message = f"building the kernel failed: {text or type(e).__name__}"
    return CompileError(message, stage=STAGE, location=location,
                        hint="the file is evaluated with the request's parameters; check them against the factory")


def trace(text: str, filename: str = "kernel.py", entry: str | None = None,
          params: dict[str, ParamValue] | None = None, cores: int = 64) -> TracedKernel:
    """Evaluate the file for `entry` (with `params`) and record the kernel. Raises located CompileErrors. `cores` is
    the target's worker count (a persistent kernel asks for it)."""
    params = dict(params or {})
    try:
        tree = pyast.parse(text, filename)
    except SyntaxError as e:
        raise CompileError(f"invalid syntax: {e.msg}", stage=STAGE, location=_loc(filename, e.lineno, e.offset)) from None
    entry_node = _select_entry(tree, entry, filename)
    entry_loc = _loc(filename, entry_node.lineno, entry_node.col_offset + 1)
    modules = build_modules(cores)
    star = {name: list(getattr(m, "__all__", [])) for name, m in modules.items()}
    module = ast.Module(body=_needed_statements(tree, entry_node, _Scopes(text, filename, star)), type_ignores=[])
    eager = _is_eager(entry_node)
    if eager:   # rewritten on a copy: the annotations are read again from entry_node
        module = copy.deepcopy(module)
        entry_copy = next(s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == entry_node.name
                          and s.lineno == entry_node.lineno)
        module = ast.fix_missing_locations(_BindAnnotations(entry_copy).visit(module))
    module = _KernelIfs().visit(module)
    module = ast.fix_missing_locations(_KernelExprs().visit(module))
    safe_builtins = dict(vars(builtins))
    siblings = _Siblings(text, filename)
    safe_builtins["__import__"] = _importer(modules, siblings)
    siblings.builtins = safe_builtins
    safe_builtins["range"] = _kernel_range
    body_tensors: dict = {}    # tensors the eager body declares that are not factory arguments, filled per call
    namespace = {"__name__": "__tilelang_kernel__", "__file__": filename, "__builtins__": safe_builtins,
                 BIND: bind_tensor, BODY_TENSOR: lambda name: body_tensors.get(name, TensorArg(None, None)),
                 IF: kernel_if, AND: kernel_and, OR: kernel_or, NOT: kernel_not, SELECT: kernel_select}
    notes: list[str] = []
    tokens = set_user_file(filename, notes)
    try:
        try:
            exec(pyast.compile_tree(module, filename), namespace)  # noqa: S102 -- sandboxed by the caller
            built = namespace[entry_node.name]
            names = _target_names(tree)
            if eager:
                traced = _trace_eager(built, entry_node, params, filename, entry_loc, names, body_tensors)
            else:
                scalar_names = _prim_func_scalars(entry_node)
                scalars = {k: v for k, v in params.items() if k in scalar_names}
                taken = set() if isinstance(built, PrimFuncDef) else \
                    set(inspect.signature(_factory_of(built, entry_node, entry_loc)).parameters)
                sizes = _dynamic_sizes(params, _const_names(tree) - taken, entry_loc)   # T.dynamic at module level too
                params = {k: v for k, v in params.items() if (k not in scalars and k not in sizes) or k in taken}
                size_token = set_const_values(sizes)
                try:
                    kernel = _build(built, entry_node, params, filename, entry_loc)
                    traced = _trace_prim_func(kernel, entry_node.name, names, filename, scalars,
                                              parameter_positions(tree, filename))
                finally:
                    reset_const_values(size_token)
            return TracedKernel(*traced, notes=tuple(notes), read_siblings=bool(siblings.modules))
        except CompileError:
            raise
        except RecursionError:
            raise CompileError("the kernel's Python recursed too deeply while building the kernel", stage=STAGE,
                               location=entry_loc) from None
        except Exception as e:  # user code can raise anything while building the kernel
            raise _user_error(e, filename, entry_loc) from None
    finally:
        reset_user_file(tokens)


def _dynamic_sizes(params: dict, names: set[str], entry_loc: SourceLocation) -> dict[str, int]:
    """The T.dynamic / T.const sizes a request gives (`--param m=256`): the kernel is specialized on them."""
    sizes = {k: v for k, v in params.items() if k in names}
    for name, value in sizes.items():
        if isinstance(value, str) and value.strip().isdigit():
            value = sizes[name] = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise CompileError(f"size `{name}` (T.const / T.dynamic) must be a positive integer, got {value!r}", stage=STAGE,
                               location=entry_loc)
    return sizes


def _factory_of(built, node: ast.FunctionDef, entry_loc: SourceLocation):
    factory = built.fn if isinstance(built, JitFactory) else built
    while isinstance(factory, JitFactory):
        factory = factory.fn
    if not callable(factory):
        raise CompileError(f"`{node.name}` is not a kernel factory or a prim_func", stage=STAGE, location=entry_loc)
    return factory


def _bind_call(factory, node, params: dict, entry_loc: SourceLocation, consts: set[str] = frozenset()):
    signature = inspect.signature(factory)
    given = {k: v for k, v in params.items() if k in signature.parameters or k not in consts}
    typed = type_params(signature, given, node.name, entry_loc)
    try:
        return signature.bind(**typed)
    except TypeError as e:
        wanted = ", ".join(p.name + ("" if p.default is inspect.Parameter.empty else f"={p.default!r}")
                           for p in signature.parameters.values())
        raise CompileError(f"cannot call the kernel factory `{node.name}` with the given parameters: {e}",
                           stage=STAGE, location=entry_loc,
                           hint=f"its parameters: {wanted}; pass them as --param NAME=VALUE (API: `params`)") from None


def _build(built, node: ast.FunctionDef, params: dict, filename: str, entry_loc: SourceLocation) -> PrimFuncDef:
    if isinstance(built, PrimFuncDef):
        if params:
            raise CompileError(f"`{node.name}` is a @T.prim_func with fixed shapes; it takes no parameters "
                               f"(got {', '.join(sorted(params))})", stage=STAGE, location=entry_loc)
        return built
    factory = _factory_of(built, node, entry_loc)
    bound = _bind_call(factory, node, params, entry_loc)
    result = built(*bound.args, **bound.kwargs)
    if not isinstance(result, PrimFuncDef):
        raise CompileError(f"the kernel factory `{node.name}` returned {type(result).__name__}, not a @T.prim_func",
                           stage=STAGE, location=entry_loc)
    return result


def _prim_func_scalars(entry: ast.FunctionDef) -> set[str]:
    """The parameters of the entry's @T.prim_func(s) that are not annotated as tensors (scalar kernel arguments)."""
    names = set()
    for node in (entry, *_statements(entry)):
        if isinstance(node, ast.FunctionDef) and "prim_func" in _decorator_names(node):
            for arg in node.args.args:
                ann = arg.annotation
                head = ann.func if isinstance(ann, ast.Call) else ann.value if isinstance(ann, ast.Subscript) else None
                if not (isinstance(head, ast.Attribute) and head.attr in ("Tensor", "Buffer")):
                    names.add(arg.arg)
    return names


def _scalar_argument(name: str, spec, scalars: dict, def_loc: SourceLocation):
    """A scalar kernel argument (`seqlen: T.int32`): the kernel is specialized on the value the request gives."""
    if name not in scalars:
        raise CompileError(f"prim_func parameter `{name}` is a scalar kernel argument ({spec}); give its value as "
                           f"--param {name}=VALUE (API: `params`): tilefarm specializes the kernel on it",
                           stage=STAGE, location=def_loc)
    convert = scalar_annotation(spec)
    try:
        return convert(scalars[name]) if convert else scalars[name]
    except Exception:  # noqa: BLE001 -- _Bad from the converter: the value does not fit the dtype
        raise CompileError(f"scalar kernel argument `{name}` ({spec}) cannot take `{scalars[name]}`", stage=STAGE,
                           location=def_loc) from None


def parameter_positions(tree: ast.Module, filename: str) -> dict[int, dict[str, SourceLocation]]:
    """Every function's parameters where they are written, keyed by the function's first line (its first
    decorator's, as a code object counts it): a parameter's error points at its name."""
    out: dict[int, dict[str, SourceLocation]] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            out[first] = {a.arg: _loc(filename, a.lineno, a.col_offset + 1)
                          for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
    return out


def _trace_prim_func(kernel: PrimFuncDef, entry: str, names: dict, filename: str, scalars: dict | None = None,
                     parameter_locations: dict | None = None) -> tuple:
    try:
        return _trace_prim_func_once(kernel, entry, names, filename, scalars, parameter_locations, False)
    except SecondKernel:
        return _trace_prim_func_once(kernel, entry, names, filename, scalars, parameter_locations, True)


def _trace_prim_func_once(kernel: PrimFuncDef, entry: str, names: dict, filename: str, scalars, parameter_locations,
                          fused: bool) -> tuple:
    fn = kernel.fn
    code = fn.__code__
    def_loc = _loc(filename, code.co_firstlineno, None)
    rec = Recorder(filename, names, fused=fused)
    params_at = parameter_locations.get(code.co_firstlineno, {}) if parameter_locations else {}
    annotations = getattr(fn, "__annotations__", {})
    buffers = []
    for name, p in inspect.signature(fn).parameters.items():
        spec = annotations.get(name)
        if type(spec) is str:  # `from __future__ import annotations` in the user's file (T.int32 is a str too)
            closure = dict(zip(code.co_freevars, (c.cell_contents for c in fn.__closure__ or ())))
            spec = eval(spec, fn.__globals__, closure)  # noqa: S307 -- the user's own annotation, sandboxed
        if isinstance(spec, str) and not isinstance(spec, TensorSpec):
            buffers.append(_scalar_argument(name, spec, scalars or {}, params_at.get(name) or def_loc))
            continue
        if not isinstance(spec, TensorSpec):
            raise CompileError(f"prim_func parameter `{name}` must be annotated `T.Tensor((rows, cols), dtype)`",
                               stage=STAGE, location=def_loc)
        unbound = [d for d in spec.dims if isinstance(d, SizeVar) and d.resolved() is None]
        if unbound:
            size = unbound[0]
            raise CompileError(f"`{size.name}` ({size.spelling}) sizes prim_func parameter `{name}` but no value is "
                               "given for it", stage=STAGE, location=params_at.get(name) or spec.location,
                               hint=f"pass --param {size.name}=VALUE (API: `params`): tilefarm compiles the kernel "
                                    "for that size")
        buffers.append(rec.add_param(name, spec.shape(), spec.dtype, params_at.get(name) or spec.location))
    token = activate(rec)
    try:
        result = fn(*buffers)
    finally:
        deactivate(token)
    if result is not None:
        raise CompileError("a prim_func body returns nothing", stage=STAGE, location=def_loc)
    return _finish(rec, entry, def_loc)


def _trace_eager(built, node: ast.FunctionDef, params: dict, filename: str, entry_loc: SourceLocation,
                 names: dict, body_tensors: dict) -> tuple:
    """Run an eager-JIT factory with the recorder active: its tensor arguments bind to T.Tensor annotations, its
    T.empty results are the outputs."""
    factory = _factory_of(built, node, entry_loc)
    consts = _const_names(node)
    signature = inspect.signature(factory)
    const_values = _dynamic_sizes(params, consts - set(signature.parameters), entry_loc)
    given = dict(params)
    for name in _annotated_args(node):
        if name in signature.parameters:   # sizes given as T.const parameters instead of a tensor: its annotation's
            given.setdefault(name, TensorArg(None, None))
        elif name in given:                # a tensor the body declares, given by name
            value = type_value(None, given.pop(name))
            if not isinstance(value, TensorArg):
                raise CompileError(f"`{name}` is a tensor the kernel declares; give it as {name}=DTYPE[D0,D1,...], "
                                   f"not {value!r}", stage=STAGE, location=entry_loc)
            body_tensors[name] = value
    bound = _bind_call(factory, node, given, entry_loc, consts)
    for name, value in bound.arguments.items():   # T.match_buffer(A, ...) binds by the parameter's name
        if isinstance(value, TensorArg):
            value.name = name
    # sizes the tensor arguments give (`A: T.Tensor((M, K), dtype)` with A=float16[256,128] binds M, K) are known
    # from the start: code before the annotation may use them (`splitK = K // split_k`)
    for name, dims in _annotated_shapes(node).items():
        value = body_tensors.get(name, bound.arguments.get(name))
        if not (isinstance(value, TensorArg) and value.shape is not None):
            continue
        if len(value.shape) != len(dims):
            raise CompileError(f"`{name}` is {value!r} but the kernel declares a rank-{len(dims)} tensor",
                               stage=STAGE, location=entry_loc)
        for dim, size in zip(dims, value.shape):
            if dim in consts:
                const_values.setdefault(dim, size)
    for name, value in const_values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise CompileError(f"T.const size `{name}` must be a positive integer, got {value!r}", stage=STAGE,
                               location=entry_loc)
    rec = Recorder(filename, names)
    token, const_token = activate(rec), set_const_values(const_values)
    try:
        result = factory(*bound.args, **bound.kwargs)
    finally:
        deactivate(token)
        reset_const_values(const_token)
    outputs = result if isinstance(result, (tuple, list)) else (result,) if result is not None else ()
    for out in outputs:
        if not isinstance(out, Buffer) or out.scope != "global":
            raise CompileError(f"the eager-JIT kernel `{node.name}` returns {out!r}; it returns the tensors it "
                               "created with T.empty", stage=STAGE, location=entry_loc)
    if rec.kernel_state == "open":
        raise CompileError("the T.Kernel block did not finish", stage=STAGE, location=entry_loc)
    return _finish(rec, node.name, entry_loc)


def _annotated_shapes(node: ast.FunctionDef) -> dict[str, list]:
    """`X: T.Tensor((M, K), dtype)` -> {"X": ["M", "K"]} (None for a dimension that is not a plain name); the shape
    may be a name the body assigned a tuple before (`X_shape = (M, K)`)."""
    out = {}
    tuples = {}
    for s in node.body:
        if isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name) \
                and isinstance(s.value, (ast.Tuple, ast.List)):
            tuples[s.targets[0].id] = s.value
        if not (isinstance(s, ast.AnnAssign) and s.value is None and isinstance(s.target, ast.Name)):
            continue
        ann = s.annotation
        first = ann.args[0] if isinstance(ann, ast.Call) and ann.args else \
            (ann.slice.elts[0] if isinstance(ann, ast.Subscript) and isinstance(ann.slice, ast.Tuple) else None)
        if isinstance(first, ast.Name):
            first = tuples.get(first.id)
        if isinstance(first, (ast.Tuple, ast.List)):
            out[s.target.id] = [e.id if isinstance(e, ast.Name) else None for e in first.elts]
    return out


def _is_tensor_annotation(s: ast.stmt) -> bool:
    """`X: T.Tensor(...)` / `X: T.Tensor[...]` (any module alias) with no value, in the factory's own body."""
    if not (isinstance(s, ast.AnnAssign) and s.value is None and isinstance(s.target, ast.Name)):
        return False
    ann = s.annotation
    head = ann.func if isinstance(ann, ast.Call) else ann.value if isinstance(ann, ast.Subscript) else None
    return isinstance(head, ast.Attribute) and head.attr in ("Tensor", "Buffer")


def _annotated_args(node: ast.FunctionDef) -> list[str]:
    """The tensors an eager-JIT body declares (`X: T.Tensor(shape, dtype)`), factory arguments or not."""
    return [s.target.id for s in node.body if _is_tensor_annotation(s)]


def _finish(rec: Recorder, entry: str, def_loc: SourceLocation) -> tuple:
    if rec.kernel_state == "open":
        raise CompileError("the T.Kernel block did not finish", stage=STAGE, location=def_loc)
    text, line_map = rec.render(entry, def_loc)
    return entry, text, line_map, rec.stages, rec.logical_shapes(), rec.declared_dtypes()
