"""Source text -> one tirx.PrimFunc: import-line handling, entry selection, located parse errors.

Users write whole files (with `from tvm.script import tirx as T`, comments, several kernels). TVMScript's
parser takes one object per text and no imports, so we blank the lines it must not see -- keeping every
line number -- and map each diagnostic back to the user's file:line:col.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from . import pyast
from .. import registry
from ..errors import CompileError, SourceLocation
from .allowlist import check_source

ALLOWED_IMPORT = "from tvm.script import tirx as T"
_DIAG_LOC = re.compile(r"^\s*--> (?P<file>.*?):(?P<line>\d+):(?P<col>\d+)\s*$", re.M)
STAGE = "parse"


@dataclass(frozen=True)
class KernelSource:
    """The user's file and the text handed to the TVMScript parser (same line numbering)."""

    filename: str
    text: str
    entry: str
    parser_text: str
    entry_line: int


def _loc(filename: str, line: int | None, col: int | None) -> SourceLocation:
    return SourceLocation(filename, line, col)


def _is_prim_func(node: ast.AST) -> bool:
    if not isinstance(node, ast.FunctionDef):
        return False
    for dec in node.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if isinstance(target, ast.Attribute) and target.attr == "prim_func":
            return True
    return False


def _blank(lines: list[str], start: int, end: int) -> None:
    """Blank lines start..end (1-based, inclusive) while keeping the line count."""
    for i in range(start - 1, end):
        lines[i] = ""


def prepare(text: str, filename: str = "kernel.py", entry: str | None = None) -> KernelSource:
    """Validate the file's top level and cut out the entry kernel for the parser."""
    if not text.strip():
        raise CompileError("the source file is empty", stage=STAGE, location=_loc(filename, None, None),
                           hint="write a @T.prim_func kernel")
    try:
        tree = pyast.parse(text, filename)
    except SyntaxError as e:  # IndentationError is a SyntaxError
        raise CompileError(f"invalid syntax: {e.msg}", stage=STAGE,
                           location=_loc(filename, e.lineno, e.offset)) from None

    lines = text.splitlines()
    kernels: list[ast.FunctionDef] = []
    for node in tree.body:
        start = node.decorator_list[0].lineno if getattr(node, "decorator_list", None) else node.lineno
        segment = ast.get_source_segment(text, node) or ""
        if isinstance(node, ast.ImportFrom) and segment.strip() == ALLOWED_IMPORT:
            continue
        if _is_prim_func(node):
            kernels.append(node)
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            continue  # module docstring
        what = type(node).__name__
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            raise CompileError(f"unsupported import `{segment.strip()}`; only `{ALLOWED_IMPORT}` is allowed",
                               stage=STAGE, location=_loc(filename, node.lineno, node.col_offset + 1))
        raise CompileError(f"unsupported top-level statement ({what}); a kernel file holds @T.prim_func kernels only",
                           stage=STAGE, location=_loc(filename, start, node.col_offset + 1))

    if not kernels:
        raise CompileError("no @T.prim_func kernel found", stage=STAGE, location=_loc(filename, 1, 1))
    check_source(tree, filename)  # before anything is evaluated: the parser runs the expressions it is given
    names = [k.name for k in kernels]
    if entry is None:
        chosen = next((k for k in kernels if k.name == "main"), kernels[0] if len(kernels) == 1 else None)
        if chosen is None:
            raise CompileError(f"several kernels ({', '.join(names)}) and none is named `main`; pick one with --entry",
                               stage=STAGE, location=_loc(filename, kernels[0].lineno, 1))
    else:
        chosen = next((k for k in kernels if k.name == entry), None)
        if chosen is None:
            raise CompileError(f"entry `{entry}` not found; kernels in this file: {', '.join(names)}",
                               stage=STAGE, location=_loc(filename, None, None))

    # Keep only the chosen kernel's lines; everything else becomes blank lines.
    keep_start = chosen.decorator_list[0].lineno
    keep_end = chosen.end_lineno or keep_start
    out = list(lines)
    _blank(out, 1, keep_start - 1)
    _blank(out, keep_end + 1, len(out))
    return KernelSource(filename, text, chosen.name, "\n".join(out) + "\n", chosen.lineno)


_NO_ATTRIBUTE = re.compile(r"^module '(?P<module>tvm\.[\w.]+)' has no attribute '(?P<name>\w+)'$")


def _plainly(message: str, text: str, line: int | None, col: int | None) -> tuple[str, str | None]:
    """A parser message about TVM's own modules (`module 'tvm.tirx.script.builder.tirx' has no attribute 'log'`)
    in the user's terms: the name as written on their line, and what exists instead."""
    found = _NO_ATTRIBUTE.match(message)
    if found is None:
        return message, None
    name = found["name"]
    written = name
    if line is not None and 0 < line <= len(text.splitlines()):
        source_line = text.splitlines()[line - 1]
        dotted = re.search(rf"\b((?:[A-Za-z_]\w*\.)+{re.escape(name)})\b", source_line[(col or 1) - 1:] or source_line) \
            or re.search(rf"\b((?:[A-Za-z_]\w*\.)+{re.escape(name)})\b", source_line)
        written = dotted.group(1) if dotted else name
    if written.startswith("T.tile."):
        return (f"`{written}` is not a tile primitive",
                "the tile primitives are " + ", ".join(f"T.tile.{op}" for op in registry.SUPPORTED))
    return f"`{written}` does not exist in TVMScript TIRx", "see the README's input language for what a kernel may use"


def parse(source: KernelSource):
    """Run the TVMScript parser on the prepared text. Executes Python: call only inside the sandbox."""
    import tvm
    from tvm.error import DiagnosticError

    from . import tile_primitives  # noqa: F401 -- T.tile.<name> for the op registry's ops TVM lacks

    try:
        # our own checker (TTCheckKernel) validates what matters here; TVM's well-formedness pass costs ~3 ms
        func = tvm.script.from_source(source.parser_text, check_well_formed=False)
    except SyntaxError as e:
        raise CompileError(f"invalid syntax: {e.msg}", stage=STAGE,
                           location=_loc(source.filename, e.lineno, e.offset)) from None
    except DiagnosticError as e:
        text = str(e)
        m = _DIAG_LOC.search(text)
        first = text.strip().splitlines()[0] if text.strip() else "TVMScript diagnostic"
        message = first.removeprefix("error: ").strip()
        line, col = (int(m["line"]), int(m["col"])) if m else (None, None)
        message, hint = _plainly(message, source.text, line, col)
        raise CompileError(message, stage=STAGE, location=_loc(source.filename, line, col), hint=hint) from None
    except CompileError:
        raise
    except Exception as e:  # the parser evaluates user expressions: any Python error can surface here
        line = None
        tb = e.__traceback__
        while tb is not None:  # the innermost frame inside the user's text, if any
            if tb.tb_frame.f_code.co_filename in ("<str>", "<unknown>"):
                line = tb.tb_lineno
            tb = tb.tb_next
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise CompileError(f"{type(e).__name__}: {msg}", stage=STAGE,
                           location=_loc(source.filename, line or source.entry_line, None)) from None
    from tvm import tirx

    if not isinstance(func, tirx.PrimFunc):
        raise CompileError("the entry did not produce a PrimFunc", stage=STAGE,
                           location=_loc(source.filename, source.entry_line, 1))
    return func.with_attr("global_symbol", source.entry)
