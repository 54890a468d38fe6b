"""The entry kernel's buffer parameters read off the source text without running it (the API checks a request's
inputs with it before accepting the job; parsing for real executes the user's Python and happens in the sandbox).

Only what is literally written is used: `T.Buffer((128, 64), "float16")`, or in a TileLang kernel factory
`T.Tensor((M, K), dtype)` with M, K, dtype bound by the request's params or the factory's defaults, through
+ - * // and parentheses. Anything else makes the signature unknown (None), never a guess.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass

from . import pyast
from .source import _is_prim_func

_BUFFER_CALLS = {"Buffer", "Tensor"}
_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b if b else None}


@dataclass(frozen=True)
class BufferParam:
    name: str
    shape: tuple[int, ...]
    dtype: str | None
    declared: str            # the shape as written, e.g. "(M, K)"
    line: int
    col: int


@dataclass(frozen=True)
class Signature:
    kernel: str              # the prim_func's own name (inside a factory: the inner one)
    entry: str               # what the request names (the factory, or the prim_func)
    buffers: tuple[BufferParam, ...]

    def names(self) -> list[str]:
        return [b.name for b in self.buffers]

    def get(self, name: str) -> BufferParam | None:
        return next((b for b in self.buffers if b.name == name), None)


def _value(node: ast.AST, env: dict):
    """A literal int/str/float, a bound name, or + - * // of those; None when not statically known."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        return env.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand, env)
        return -inner if isinstance(inner, (int, float)) else None
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _value(node.left, env), _value(node.right, env)
        if isinstance(left, int) and isinstance(right, int):
            return _OPS[type(node.op)](left, right)
    return None


def _buffer(arg: ast.arg, env: dict, text: str) -> BufferParam | None:
    call = arg.annotation
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _BUFFER_CALLS):
        return None
    keywords = {k.arg: k.value for k in call.keywords}
    shape_node = call.args[0] if call.args else keywords.get("shape")
    dtype_node = call.args[1] if len(call.args) > 1 else keywords.get("dtype")
    if not isinstance(shape_node, (ast.Tuple, ast.List)):
        return None
    shape = [_value(e, env) for e in shape_node.elts]
    if not shape or any(not isinstance(d, int) for d in shape):
        return None
    dtype = _value(dtype_node, env) if dtype_node is not None else None
    return BufferParam(arg.arg, tuple(shape), dtype if isinstance(dtype, str) else None,
                       ast.get_source_segment(text, shape_node) or "", arg.lineno, arg.col_offset + 1)


def _inner_prim_func(factory: ast.FunctionDef) -> ast.FunctionDef | None:
    inner = [n for n in factory.body if _is_prim_func(n)]
    if len(inner) == 1:
        return inner[0]
    returned = next((n.value.id for n in factory.body if isinstance(n, ast.Return) and isinstance(n.value, ast.Name)),
                    None)
    return next((n for n in inner if n.name == returned), None)


def _factory_env(factory: ast.FunctionDef, params: dict) -> dict:
    args = factory.args
    positional = args.posonlyargs + args.args
    env: dict = {}
    for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
        env[arg.arg] = _value(default, {})
    for arg, default in zip(args.kwonlyargs, args.kw_defaults):
        if default is not None:
            env[arg.arg] = _value(default, {})
    env.update(params)
    return env


def static_signature(text: str, entry: str | None = None, params: dict | None = None) -> Signature | None:
    """The entry kernel's buffers as declared, or None when they cannot be known without running the source."""
    try:
        tree = pyast.parse(text)
    except (SyntaxError, ValueError):
        return None
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if entry is None:
        kernels = [n for n in functions.values() if _is_prim_func(n)]
        chosen = functions.get("main") if "main" in functions and _is_prim_func(functions["main"]) else \
            (kernels[0] if len(kernels) == 1 else None)
    else:
        chosen = functions.get(entry)
    if chosen is None:
        return None
    env: dict = {}
    kernel = chosen
    if not _is_prim_func(chosen):
        kernel = _inner_prim_func(chosen)
        if kernel is None:
            return None
        env = _factory_env(chosen, params or {})
    buffers = []
    for arg in kernel.args.posonlyargs + kernel.args.args:
        found = _buffer(arg, env, text)
        if found is None:
            return None  # one unknown parameter: the roles and order of the others cannot be trusted either
        buffers.append(found)
    return Signature(kernel.name, chosen.name, tuple(buffers))
