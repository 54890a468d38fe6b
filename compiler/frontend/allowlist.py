"""The AST allow-list: the first (not the only) layer between the user's text and the TVMScript parser.

The parser evaluates every expression in the kernel with CPython, so a kernel file may only contain what a
tile-level kernel needs: the one import, `@T.prim_func` definitions, `T.*` calls, `range` and a few pure
builtins, arithmetic on small literals. Anything else -- dunder access, other names, lambdas, comprehensions,
calls on arbitrary objects, `T.tile.tvm.base.os`-style walks into modules -- is rejected here with a located
CompileError. This is defence in depth: the sandbox (workers/sandbox/) is what contains whatever gets through.
"""
from __future__ import annotations

import ast
import types

from ..errors import CompileError, SourceLocation

STAGE = "parse"
ALLOWED_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool", "True", "False", "None"})
CALLABLE_BUILTINS = frozenset({"range", "min", "max", "len", "int", "float", "bool"})
NAMESPACE_ROOTS = frozenset({"T"})
MODULE_PREFIXES_OK = frozenset({("tile",)})     # T.tile is a module: traverse only, never bind or call it bare
RESERVED = frozenset({"tt"})                       # T.tt.*: the compiler's own intrinsics (IR dumps), never a kernel's
MAX_INT_LITERAL = 2**63
MAX_STR_LITERAL = 256
MAX_EXPONENT = 64
MAX_DEPTH = 64                                     # expression nesting; deeper is a parser DoS, not a kernel

_FORBIDDEN = {
    ast.Import: "an import inside a kernel", ast.Global: "`global`", ast.Nonlocal: "`nonlocal`",
    ast.Try: "`try`", ast.Raise: "`raise`", ast.Lambda: "a lambda", ast.AsyncFunctionDef: "an async function",
    ast.Await: "`await`", ast.Yield: "`yield`", ast.YieldFrom: "`yield from`", ast.ClassDef: "a class",
    ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression", ast.NamedExpr: "`:=`", ast.JoinedStr: "an f-string",
    ast.Starred: "`*` unpacking", ast.Delete: "`del`", ast.Match: "`match`", ast.AsyncFor: "`async for`",
    ast.AsyncWith: "`async with`", ast.Set: "a set literal",
}


def _loc(filename: str, node: ast.AST) -> SourceLocation:
    col = getattr(node, "col_offset", None)
    return SourceLocation(filename, getattr(node, "lineno", None), col + 1 if col is not None else None)


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """`T.a.b` -> ("T", ["a", "b"]); None unless the chain starts at a plain name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return (node.id, parts[::-1]) if isinstance(node, ast.Name) else None


def _namespace_root():
    """The object bound to `T` while parsing (imported lazily: only the compile path, which has tvm, calls it)."""
    from tvm.script.parser import tirx

    return tirx


def check_source(tree: ast.Module, filename: str = "kernel.py") -> None:
    """Raise CompileError at the first construct a kernel file may not contain."""

    def bad(node: ast.AST, what: str, hint: str | None = None, *, message: str | None = None) -> None:
        raise CompileError(message or f"{what} is not allowed in a kernel", stage=STAGE, location=_loc(filename, node),
                           hint=hint or "a kernel may use `T.*`, `range`, arithmetic and its own variables")

    # one traversal: every node with its parent and depth (three ast.walk passes cost ~2 ms per compile)
    nodes: list[ast.AST] = []
    parents: dict[ast.AST, ast.AST] = {}
    stack: list[tuple[ast.AST, int]] = [(top, 1) for top in reversed(tree.body)]
    local: set[str] = set()
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH * 2:
            bad(node, f"nesting deeper than {MAX_DEPTH} levels")
        nodes.append(node)
        if isinstance(node, ast.arg):
            local.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            local.add(node.id)
        elif isinstance(node, ast.FunctionDef):
            local.add(node.name)
        for child in ast.iter_child_nodes(node):
            parents[child] = node
            stack.append((child, depth + 1))
    allowed_names = local | ALLOWED_BUILTINS | NAMESPACE_ROOTS
    top_level = set(tree.body)
    forbidden = tuple(_FORBIDDEN)

    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node in top_level:
            continue  # prepare() has already checked that it is exactly the tvm.script import
        if isinstance(node, forbidden):
            bad(node, next(what for kind, what in _FORBIDDEN.items() if isinstance(node, kind)))
        if isinstance(node, ast.ImportFrom):
            bad(node, "an import inside a kernel")
        if isinstance(node, ast.FunctionDef) and node not in top_level:
            bad(node, "a nested function")
        if isinstance(node, ast.Attribute):
            if node.attr.startswith("_"):
                bad(node, f"attribute `{node.attr}`", hint="names starting with `_` are never needed in a kernel")
            if node.attr in ("format", "format_map"):
                bad(node, f"attribute `{node.attr}`")
        if isinstance(node, ast.Name):
            if node.id.startswith("_"):
                bad(node, f"name `{node.id}`", hint="names starting with `_` are never needed in a kernel")
            if isinstance(node.ctx, ast.Load) and node.id not in allowed_names:
                bad(node, "", hint="only `T`, `range`, a few builtins and the kernel's own variables can be used",
                    message=f"Undefined variable: {node.id}")
            if node.id in NAMESPACE_ROOTS and not isinstance(parents.get(node), ast.Attribute):
                bad(node, f"using `{node.id}` on its own", hint=f"write `{node.id}.<name>`")
            if node.id in NAMESPACE_ROOTS and isinstance(node.ctx, ast.Store):
                bad(node, f"rebinding `{node.id}`")
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= MAX_INT_LITERAL:
                bad(node, "an integer literal this large")
            if isinstance(value, (str, bytes)) and len(value) > MAX_STR_LITERAL and node not in _docstrings(tree):
                bad(node, f"a string literal longer than {MAX_STR_LITERAL} characters")
            if isinstance(value, bytes):
                bad(node, "a bytes literal")
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Pow, ast.LShift)):
            exponent = node.right
            if not (isinstance(exponent, ast.Constant) and isinstance(exponent.value, int)
                    and 0 <= exponent.value <= MAX_EXPONENT):
                bad(node, "`**` or `<<` with an exponent that is not a small literal")
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult) and _is_sequence_repeat(node):
            bad(node, "repeating a sequence with `*`")
        if isinstance(node, ast.Call):
            _check_call(node, bad, local)
        if isinstance(node, ast.Attribute) and not isinstance(parents.get(node), ast.Attribute):
            _check_namespace_walk(node, bad)


def _docstrings(tree: ast.Module) -> set[ast.AST]:
    found = set()
    for holder in [tree, *(n for n in tree.body if isinstance(n, ast.FunctionDef))]:
        body = holder.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            found.add(body[0].value)
    return found


def _is_sequence_repeat(node: ast.BinOp) -> bool:
    sequence = (ast.List, ast.Tuple)
    text = (ast.Constant,)
    for side in (node.left, node.right):
        if isinstance(side, sequence) or (isinstance(side, text) and isinstance(side.value, (str, bytes))):
            return True
    return False


def _check_call(node: ast.Call, bad, local: set[str]) -> None:
    func = node.func
    if isinstance(func, ast.Name):
        if func.id not in CALLABLE_BUILTINS:
            bad(node, f"calling `{func.id}`", hint="calls are limited to `T.*`, `range` and min/max/len/int/float/bool")
        return
    chain = _chain(func)
    if chain is None or chain[0] not in NAMESPACE_ROOTS:
        bad(node, f"calling `{ast.unparse(func)[:60]}`", hint="calls are limited to `T.*`, `range` and "
                                                             "min/max/len/int/float/bool")


def _check_namespace_walk(node: ast.Attribute, bad) -> None:
    """`T.a.b...` may not bind or walk through a module other than T.tile (T.tile.tvm.base.os ... is the classic)."""
    chain = _chain(node)
    if chain is None or chain[0] not in NAMESPACE_ROOTS:
        return
    root, parts = chain
    if parts and parts[0] in RESERVED:
        bad(node, f"`{root}.{parts[0]}`", hint=f"`{root}.{parts[0]}.*` are the compiler's own intrinsics, which it "
                                              "emits itself; a kernel uses T.tile.* primitives")
    obj = _namespace_root()
    for i, part in enumerate(parts):
        obj = getattr(obj, part, None)
        if obj is None:
            return  # unknown name: the parser reports it, nothing can be reached through it
        if isinstance(obj, types.ModuleType) and tuple(parts[:i + 1]) not in MODULE_PREFIXES_OK:
            bad(node, f"`{root}.{'.'.join(parts[:i + 1])}` (a module)")
    if isinstance(obj, types.ModuleType) or type(obj).__name__.endswith("Namespace"):
        bad(node, f"using the namespace `{root}.{'.'.join(parts)}` on its own", hint="call one of its members")
