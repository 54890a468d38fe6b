"""linemap.json: which lines of the user's source each line of the generated C++ comes from.

The passes rebuild the IR, so the kernels' statements carry no spans; the link is made through what both sides
name. The input kernel (spans intact) says, per line, which tile primitive moves or computes which buffers; a C++
line names the same buffers through its circular buffers (`cb_A_s` holds A_s) and DRAM accessors (`accessor_A`).
Each C++ line goes to the primitive that produces or consumes the buffers it touches, the next one in program
order first (the kernels keep the source's order); declarations go to the line that declares the buffer or loop
variable; lines that name nothing (tile_regs_acquire, an SFPU op on DST) go with the nearest mapped line of their
block. The map is approximate where the tensorizer fuses primitives, exact in what it names.

    {"version": 1, "source": "gemm.py", "files": {"reader.cpp": {"24": [15], ...}, ...}}
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*(?:<[^<>()]*>)?\s*\(")
_DECLARED = re.compile(r"^\s*(?:constexpr|const)\s+(?:uint32_t|auto)\s+(\w+)\s*=")
_FOR = re.compile(r"^\s*for \(uint32_t (\w+) = ")
_PRODUCES = {"cb_reserve_back", "cb_push_back", "pack_tile", "pack_reconfig_data_format"}
KERNELS = ("reader.cpp", "compute.cpp", "writer.cpp")


@dataclass
class Primitive:
    line: int
    op: str                       # copy, gemm, add, exp, ...
    dst: str | None
    srcs: set[str] = field(default_factory=set)

    def uses(self, name: str) -> bool:
        return name == self.dst or name in self.srcs


@dataclass
class SourceFacts:
    primitives: list[Primitive]
    declared: dict[str, int]      # buffer, loop variable or block index -> the line that declares it
    global_buffers: set[str]      # the kernel's DRAM buffers (parameters)


def source_facts(func, global_buffers: set[str], to_user=lambda line: line,
                 params: dict[str, int] | None = None) -> SourceFacts:
    """What each line of the input kernel does, from its spans (`to_user` maps a span line to the user's line)."""
    import tvm_ffi
    from tvm import tirx

    primitives: list[Primitive] = []
    declared: dict[str, int] = dict(params or {})

    def line_of(node) -> int | None:
        span = node.span
        return to_user(span.line) if span is not None and span.line else None

    def visit(node) -> None:
        line = line_of(node)
        if line is None:
            return
        if isinstance(node, tirx.TilePrimitiveCall):
            names = [str(a.source.name) for a in node.args if hasattr(a, "source")]
            if names:
                primitives.append(Primitive(line, str(node.op.name).rsplit(".", 1)[-1], names[0], set(names[1:])))
        elif isinstance(node, tirx.For):
            declared.setdefault(str(node.loop_var.name), line)
        elif type(node).__name__ == "AllocBuffer":
            declared.setdefault(str(node.buffer.name), line)
        elif type(node).__name__ == "ScopeIdDefStmt":
            for var in getattr(node, "def").def_ids:
                declared.setdefault(str(var.name), line)
            declared.setdefault("block", line)  # the persistent loop over the grid's blocks
            declared.setdefault("block_count", line)

    tvm_ffi.structural_walk(func.body, [(tirx.Stmt, visit)], order="pre")
    return SourceFacts(primitives, declared, global_buffers)


def _refs(text: str, cb_buffers: dict[str, str], globals_: set[str]) -> tuple[set[str], set[str], bool]:
    """(buffers through CBs, DRAM buffers, whether the line produces into its CB) named on a C++ line."""
    words = set(re.findall(r"\b\w+\b", text))
    cbs = {cb_buffers[w] for w in words if w in cb_buffers}
    drams = {w[len("accessor_"):] for w in words if w.startswith("accessor_")}
    drams |= {w.rsplit("_", 1)[0] for w in words if w.endswith(("_addr", "_args")) and w.rsplit("_", 1)[0] in globals_}
    drams |= {w[: -len("_tile_cols")] for w in words if w.endswith("_tile_cols")}
    calls = set(_CALL.findall(text))
    produces = bool(calls & _PRODUCES) or "get_write_ptr(" in text
    return cbs, drams & globals_, produces


def _pick(candidates: list[int], primitives: list[Primitive], cursor: int) -> int | None:
    """The first candidate at or after the cursor (the kernels keep the source's order), else the first one."""
    if not candidates:
        return None
    later = [i for i in candidates if i >= cursor]
    return later[0] if later else candidates[0]


def map_kernel(text: str, role: str, facts: SourceFacts, cb_buffers: dict[str, str]) -> dict[int, list[int]]:
    primitives = facts.primitives
    mapped: dict[int, list[int]] = {}
    cursor = 0
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        code = line.split("//", 1)[0]
        if not code.strip():
            continue
        if found := _FOR.match(code):
            loop = found[1] if found[1] in facts.declared else "block" if "block_count" in code else None
            if loop in facts.declared:
                mapped[number] = [facts.declared[loop]]
            continue
        cbs, drams, produces = _refs(code, cb_buffers, facts.global_buffers)
        declared = _DECLARED.match(code)
        if declared and declared[1] in cb_buffers.keys() | {f"{b}_tile_cols" for b in facts.global_buffers}:
            name = cb_buffers.get(declared[1]) or declared[1][: -len("_tile_cols")]
            if name in facts.declared:
                mapped[number] = [facts.declared[name]]
            continue
        if declared and declared[1] in facts.declared and not cbs:
            mapped[number] = [facts.declared[declared[1]]]
            continue
        if cbs:
            name = sorted(cbs)[0] if len(cbs) == 1 else None
            if role == "compute":
                wanted = [i for i, p in enumerate(primitives) if p.op != "copy" and any(
                    (p.dst == b) if produces else (b in p.srcs) for b in cbs)]
                wanted = wanted or [i for i, p in enumerate(primitives) if any(p.uses(b) for b in cbs)]
            else:
                wanted = [i for i, p in enumerate(primitives) if p.op == "copy" and any(p.uses(b) for b in cbs | drams)]
            chosen = _pick(wanted, primitives, cursor)
            if chosen is not None:
                cursor = chosen
                mapped[number] = [primitives[chosen].line]
            elif name in facts.declared:
                mapped[number] = [facts.declared[name]]
            continue
        if drams:
            mapped[number] = sorted({facts.declared[b] for b in drams if b in facts.declared})
    _fill_blocks(lines, mapped)
    return {n: lines_ for n, lines_ in sorted(mapped.items()) if lines_}


def _fill_blocks(lines: list[str], mapped: dict[int, list[int]]) -> None:
    """Statements that name nothing (tile_regs_*, an SFPU op on DST, a barrier) take the mapping of the next mapped
    statement of their block, else of the previous one."""
    inside = False
    for number, line in enumerate(lines, 1):
        if line.startswith("void kernel_main()"):
            inside = True
            continue
        code = line.split("//", 1)[0].strip()
        if not inside or number in mapped or not code.endswith(";") or _FOR.match(line):
            continue
        depth = len(line) - len(line.lstrip())
        same_block = []
        for step in (1, -1):
            other = number + step
            while 0 < other <= len(lines):
                text = lines[other - 1]
                if text.strip() and len(text) - len(text.lstrip()) < depth:
                    break
                if other in mapped and len(text) - len(text.lstrip()) == depth:
                    same_block.append(mapped[other])
                    break
                other += step
        if same_block:
            mapped[number] = list(same_block[0])


def build_line_map(loaded, source_text: str, artifacts: dict[str, bytes], plan: dict, *, entry: str | None = None,
                   params: dict | None = None) -> bytes:
    """linemap.json for a compile: loaded is the frontend's LoadedKernel (spans, TileLang line map)."""
    from ..frontend.signature import static_signature

    def to_user(line: int) -> int | None:
        if not loaded.line_map:
            return line
        location = loaded.line_map.get(line)
        if location is None:
            earlier = [n for n in loaded.line_map if n <= line]
            location = loaded.line_map[max(earlier)] if earlier else None
        return location.line if location is not None else None

    signature = static_signature(source_text, entry, params)
    param_lines = {b.name: b.line for b in signature.buffers} if signature else {}
    facts = source_facts(loaded.func, {b["name"] for b in plan["buffers"]}, to_user, param_lines)
    cb_buffers = {cb["name"]: cb["buffer"] for cb in plan["circular_buffers"]}
    files = {}
    for name in KERNELS:
        role = name.removesuffix(".cpp")
        found = map_kernel(artifacts[name].decode(), role, facts, cb_buffers)
        files[name] = {str(n): src for n, src in found.items()}
    return json.dumps({"version": 1, "source": loaded.user_file or loaded.source_file, "files": files},
                      separators=(",", ":")).encode()
