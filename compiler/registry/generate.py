"""The emulator's C++ from the op registry: `python -m compiler.registry.generate` (writes) or `--check` (lists what
is stale; tests/test_registry.py runs it).

Two kinds of output:
- include/ttemu/sfpu_ops.def, an X-macro table (one row per SFPU function and per cost) that the emulator expands
  into the SfpuOp enum (ttemu/device_iface.h), the switches of src/compute.cpp (init names, costs, arithmetic) and
  the cost fields and keys of src/timing.h / src/timing_costs.cpp;
- the declarations of the registry's SFPU functions in the emulator's compute API headers (api/compute/..., the
  header ttnn declares each in), between two marker lines; a header that does not exist yet is created.
Headers go through the project's clang-format (.clang-format), so the files pass the lint as written.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from . import COSTS, SFPU_FUNCTIONS, Sfpu

ROOT = Path(__file__).resolve().parents[2]
EMULATOR = ROOT / "ttemu"
INCLUDE = EMULATOR / "include"
DEF_FILE = INCLUDE / "ttemu" / "sfpu_ops.def"
API_DIR = INCLUDE / "api" / "compute"
BEGIN = "// --- generated from compiler/registry/table.py (python -m compiler.registry.generate): do not edit ---"
END = "// --- end of generated ---"
MACROS = ("TTEMU_SFPU_OP", "TTEMU_SFPU_UNARY", "TTEMU_SFPU_BINARY", "TTEMU_SFPU_INT_UNARY", "TTEMU_SFPU_INT_BINARY",
          "TTEMU_SFPU_COST")


class GenerateError(Exception):
    """A header the generator cannot update (no markers) or a missing formatter."""


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def render_def() -> str:
    """The X-macro table (include/ttemu/sfpu_ops.def)."""
    by_opcode = {fn.opcode: fn for fn in SFPU_FUNCTIONS}
    lines = [
        "// The SFPU functions of the compute API, one row each, and their timing-model costs. Generated from the op",
        "// registry (compiler/registry/table.py) by `python -m compiler.registry.generate`: do not edit.",
        "//",
        "// TTEMU_SFPU_OP(Op, InitOp, init_call, cost)  every function: its SfpuOp member, the member whose init",
        "//                                             configures the SFPU for it, that init's name, its cost field",
        "// TTEMU_SFPU_UNARY(Op, param, expr)           DST = expr of x (and of s, the call's scalar, when param)",
        "// TTEMU_SFPU_BINARY(Op, expr)                 DST[odst] = expr of a = DST[idst0], b = DST[idst1]",
        "// TTEMU_SFPU_INT_UNARY(Op, param, expr)       Int32 in DST: bits = expr of u, the element's uint32_t bits (and",
        "//                                             of p, the call's parameter, when param)",
        "// TTEMU_SFPU_INT_BINARY(Op, expr)             Int32 in DST: bits[odst] = expr of the uint32_t bits a and b",
        "// TTEMU_SFPU_COST(key, default)               the per-op cost constants (timing::Costs::key, TTEMU_COSTS key)",
        "//",
        "// Define the macros you need, then #include this file; it undefines all six.",
    ]
    for macro, params in zip(MACROS, ("Op, InitOp, init_call, cost", "Op, param, expr", "Op, expr", "Op, param, expr",
                                      "Op, expr", "key, value")):
        lines += [f"#ifndef {macro}", f"#define {macro}({params})", "#endif"]
    lines.append("")
    for fn in SFPU_FUNCTIONS:
        configured_by = by_opcode[fn.init_opcode] if fn.init_opcode else fn
        lines.append(f'TTEMU_SFPU_OP({fn.opcode}, {configured_by.opcode}, "{configured_by.cpp_init}", {fn.cost.key})')
    lines.append("")
    for fn in SFPU_FUNCTIONS:
        prefix = "TTEMU_SFPU_INT_" if fn.integer else "TTEMU_SFPU_"
        if fn.family in ("unary", "unary_param"):
            lines.append(f"{prefix}UNARY({fn.opcode}, {int(fn.family == 'unary_param')}, {fn.cpp})")
        elif fn.family == "binary":
            lines.append(f"{prefix}BINARY({fn.opcode}, {fn.cpp})")
    lines.append("")
    for cost in COSTS.values():
        lines.append(f"TTEMU_SFPU_COST({cost.key}, {_number(cost.value)})")
    lines.append("")
    lines += [f"#undef {macro}" for macro in MACROS]
    return "\n".join(lines) + "\n"


def _declarations(fn: Sfpu, inits_done: set[str]) -> list[str]:
    op = f"ttemu::dev::SfpuOp::{fn.opcode}"
    out: list[str] = []
    if fn.init not in inits_done:
        inits_done.add(fn.init)
        out += [fn.init_template] if fn.init_template else []
        out.append(f'ALWI void {fn.init}(TTEMU_SITE) {{ ttemu::dev::sfpu_init({op}, "{fn.init}", ttemu_site); }}')
    params, call = {
        "unary": ("std::uint32_t idst", f'ttemu::dev::sfpu_unary({op}, idst, 0, "{fn.call}", ttemu_site);'),
        "unary_param": ("std::uint32_t idst, std::uint32_t param0",
                        f'ttemu::dev::sfpu_unary({op}, idst, param0, "{fn.call}", ttemu_site);'),
        "binary": ("std::uint32_t idst0, std::uint32_t idst1, std::uint32_t odst",
                   f'ttemu::dev::sfpu_binary({op}, idst0, idst1, odst, "{fn.call}", ttemu_site);'),
    }[fn.family]
    if fn.extra_params:
        params += ", " + fn.extra_params
    out += [fn.call_template] if fn.call_template else []
    out += [f"ALWI void {fn.call}({params}, TTEMU_SITE) {{", f"    {call}", "}"]
    return out


def render_regions() -> dict[Path, str]:
    """header path -> the lines between its markers."""
    by_header: dict[Path, list[str]] = {}
    inits: dict[Path, set[str]] = {}
    for fn in SFPU_FUNCTIONS:
        if not fn.api:
            continue
        path = API_DIR / fn.header
        by_header.setdefault(path, [])
        by_header[path] += _declarations(fn, inits.setdefault(path, set()))
    return {path: "\n".join(lines) for path, lines in by_header.items()}


def _new_header(path: Path) -> str:
    name = path.relative_to(INCLUDE).as_posix()
    return "\n".join([f"// {name}: the op registry's SFPU functions of this header (compiler/registry/table.py).",
                      "#pragma once", '#include "api/compute/common_globals.h"', "namespace ckernel {", BEGIN, END,
                      "}  // namespace ckernel", ""])


def _with_region(path: Path, text: str, body: str) -> str:
    lines = text.split("\n")
    if BEGIN not in lines or END not in lines:
        raise GenerateError(f"{path.relative_to(ROOT)} has no generated region: add the two marker lines\n  {BEGIN}\n"
                            f"  {END}\ninside its namespace ckernel (and remove any hand-written declaration of "
                            "the same functions)")
    start, end = lines.index(BEGIN), lines.index(END)
    return "\n".join(lines[:start + 1] + ([body] if body else []) + lines[end:])


def clang_format(text: str, path: Path) -> str:
    tool = shutil.which("clang-format", path=str(Path(sys.executable).parent)) or shutil.which("clang-format")
    if tool is None:
        raise GenerateError("clang-format is not installed (pip install -e '.[test]' brings the pinned one)")
    done = subprocess.run([tool, f"--assume-filename={path}", f"--style=file:{ROOT / '.clang-format'}"], input=text,
                          capture_output=True, text=True, check=True)
    return done.stdout


def outputs() -> dict[Path, str]:
    """Every generated file -> its content as the registry says it should be."""
    out = {DEF_FILE: render_def()}
    regions = render_regions()
    marked = {p for p in API_DIR.rglob("*.h") if BEGIN in p.read_text()}
    for path in sorted(set(regions) | marked):
        text = path.read_text() if path.exists() else _new_header(path)
        out[path] = clang_format(_with_region(path, text, regions.get(path, "")), path)
    return out


def stale() -> list[Path]:
    """Generated files whose checked-in content differs from what the registry generates."""
    return [p for p, text in outputs().items() if not p.exists() or p.read_text() != text]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="list stale files and exit 1 instead of writing")
    args = parser.parse_args(argv)
    try:
        files = outputs()
    except GenerateError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    changed = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
    for path in changed:
        if args.check:
            print(f"stale: {path.relative_to(ROOT)}")
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[path])
            print(f"wrote {path.relative_to(ROOT)}")
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
