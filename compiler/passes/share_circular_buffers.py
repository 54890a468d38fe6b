"""TTShareCircularBuffers: compute's intermediate values that are never live together share a CB index, when the
program keeps more tile values than the device has CBs (wormhole_b0: 32, blackhole: 64).

A CB index is one FIFO. Two values may take turns on it when, in the one kernel that both pushes and pops them
(compute's intermediates; a value moved between kernels keeps its own index, as two kernels pushing into one FIFO
would race), every page of the first is popped before the first page of the second is reserved, in every
execution. Live ranges are taken over the block loop's statements in program order, loops entered: a range that enters or
leaves a loop covers the whole loop, and so does a value live across a loop's back-edge (a trip that does not start
by reserving it, or leaves pages of it behind). TTTensorize holds each resident value only over its live range
when the table is nearly full (per trip of a loop each of whose trips writes it whole first).

The values on one index agree in data format, page size, page count and unpack mode (the host program gives an
index one CircularBufferConfig; the compute kernel's unpacker and packer are configured per index), and each
advances the FIFO's pointers by a whole number of turns per block, so each finds the pointers where its own CB
would have had them (pages never run past the CB's end). The config entry keeps the first value's name and lists
the others under `holds`.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from .. import attrs, ops
from .split_kernels import _block_loop

CONFIG_ONLY = ("hw_startup_", "pack_reconfig_data_format", "reconfig_data_format")


def _configures_only(name: str) -> bool:
    """An init reads an index's format and tile shape only, never its pages: values on one index agree in those."""
    return name.endswith("_init") or name.startswith(CONFIG_ONLY)


def _cb_args(node) -> list[int]:
    found = ops.intrinsic_of(node)
    if not found or _configures_only(found[0].name):
        return []
    return [int(a) for kind, a in zip(found[0].args, found[1]) if kind == "cb"]


def touched(stmt) -> set[int]:
    """The CB indices whose pages a statement reserves, pushes, waits for, pops, reads or writes."""
    out: set[int] = set()
    tvm_ffi.structural_walk(stmt, [(tvm.ir.Call, lambda c: out.update(_cb_args(c)))], order="pre")
    return out


def advance(stmt, cb: int, pages: int, moved_by: str = "cb_push_back") -> int | None:
    """Pages pushed into `cb` (popped from it: `moved_by`) by one run of `stmt`, modulo the CB's `pages`; None when
    that is not one number (a loop of a run-time trip count whose body does not advance by whole turns, branches
    that differ)."""
    if isinstance(stmt, tirx.SeqStmt):
        total = 0
        for s in stmt.seq:
            a = advance(s, cb, pages, moved_by)
            if a is None:
                return None
            total += a
        return total % pages
    if isinstance(stmt, tirx.For):
        a = advance(stmt.body, cb, pages, moved_by)
        if a is None:
            return None
        if isinstance(stmt.extent, tirx.IntImm):
            return a * int(stmt.extent) % pages
        return 0 if a == 0 else None
    if isinstance(stmt, tirx.IfThenElse):
        a = advance(stmt.then_case, cb, pages, moved_by)
        b = advance(stmt.else_case, cb, pages, moved_by) if stmt.else_case is not None else 0
        return a if a == b else None
    if isinstance(stmt, (tirx.Evaluate,)):
        found = ops.intrinsic_of(stmt)
        if found and found[0].name == moved_by and int(found[1][0]) == cb:
            n = found[1][1]
            return int(n) % pages if isinstance(n, tirx.IntImm) else None
        return 0
    if hasattr(stmt, "body"):
        return advance(stmt.body, cb, pages, moved_by)
    return 0 if cb not in touched(stmt) else None


def _pages(stmt, cb: int, name: str) -> int | None:
    """Pages one run of `stmt` moves through `cb` by the call `name` (None: a run-time trip count or count)."""
    total = [0]

    def visit(node, scale):
        if isinstance(node, tirx.SeqStmt):
            return all(visit(s, scale) for s in node.seq)
        if isinstance(node, tirx.For):
            if isinstance(node.extent, tirx.IntImm):
                return visit(node.body, scale * int(node.extent))
            before = total[0]
            if not visit(node.body, scale):
                return False
            return total[0] == before        # a run-time trip count: only of a body that moves nothing
        if isinstance(node, tirx.IfThenElse):
            return visit(node.then_case, scale) and (node.else_case is None or visit(node.else_case, scale))
        found = ops.intrinsic_of(node)
        if found and found[0].name == name and int(found[1][0]) == cb:
            if not isinstance(found[1][1], tirx.IntImm):
                return False
            total[0] += int(found[1][1]) * scale
        return True
    return total[0] if visit(stmt, 1) else None


def _first_op(stmt, cb: int) -> str | None:
    found = []

    def visit(node):
        f = ops.intrinsic_of(node)
        if not found and f and not _configures_only(f[0].name) and cb in _cb_args(node):
            found.append(f[0].name)
    tvm_ffi.structural_walk(stmt, [(tirx.Evaluate, visit)], order="pre")
    return found[0] if found else None


def _carried(loop: tirx.For, cb: int) -> bool:
    """Pages of `cb` stay in the FIFO from one trip of `loop` to the next: a trip does not start by reserving
    them, or pops fewer than it pushes."""
    pushed, popped = _pages(loop.body, cb, "cb_push_back"), _pages(loop.body, cb, "cb_pop_front")
    return _first_op(loop.body, cb) != "cb_reserve_back" or pushed is None or pushed != popped


def _at_most_once(loop: tirx.For) -> bool:
    """A loop of at most one trip (a T.Kernel of several, run by the blocks of its part of the grid): no back-edge,
    its body ordered as straight-line code."""
    extent = loop.extent
    if isinstance(extent, tirx.IntImm):
        return int(extent) <= 1
    return isinstance(extent, tirx.Select) and all(isinstance(v, tirx.IntImm) and int(v) <= 1
                                                   for v in (extent.true_value, extent.false_value))


def live_ranges(compute, cbs: list[dict]) -> dict[int, tuple[int, int]]:
    """[first, last] position (statements of the block loop's body in program order, loops entered) that touches
    each intermediate value compute alone pushes and pops, for the values that can share an index (touched only
    inside the block loop, a whole number of turns per block). A range that enters or leaves a loop, or a value a
    loop carries from one trip to the next, covers the whole loop."""
    aliased = {c["shares_with"] for c in cbs if c.get("shares_with") is not None}
    candidates = {c["index"]: c for c in cbs
                  if c["role"] == "intermediate" and c["producer"] == c["consumer"] == ops.COMPUTE
                  and c.get("shares_with") is None and c["index"] not in aliased}
    return ranges_in(compute, candidates)


def input_ranges(mod, cbs: list[dict]) -> dict[int, tuple[tuple[int, int], tuple[int, int]]]:
    """The inputs a data-movement kernel pushes and compute pops (a mask tile, a staged block of one T.Kernel of
    several): each value's range in compute and in its producer, each covering every loop it touches but the block
    loop. Two such values of one producer take turns on an index when both ranges of the first end before those of
    the second begin: the producer pushes all of the first's pages of a block before it reserves the second's, and
    compute pops them all before it waits for the second's, so the FIFO holds them in the order both expect, and
    neither kernel waits on a page the other holds back."""
    aliased = {c["shares_with"] for c in cbs if c.get("shares_with") is not None}
    # a multicast's CB is written by another core at the address its own copy of the CB has reached: left alone
    multicast = {int(g["cb"]) for gv in mod.functions for g in (attrs.MULTICAST.get(mod[gv], None) or [])}
    out = {}
    for role in (ops.READER, ops.WRITER):
        if role not in [str(gv.name_hint) for gv in mod.functions]:
            continue
        candidates = {c["index"]: c for c in cbs
                      if c["role"] == "input" and c["producer"] == role and c["consumer"] == ops.COMPUTE
                      and c.get("shares_with") is None and c["index"] not in aliased and not c.get("shard_of")
                      and c["index"] not in multicast}
        if not candidates:
            continue
        consumed = ranges_in(mod[ops.COMPUTE], candidates, whole_loops=True, moved_by="cb_pop_front")
        produced = ranges_in(mod[role], candidates, whole_loops=True)
        out.update({cb: (consumed[cb], produced[cb]) for cb in consumed.keys() & produced.keys()})
    return out


def ranges_in(func, candidates: dict[int, dict], whole_loops: bool = False,
              moved_by: str = "cb_push_back") -> dict[int, tuple[int, int]]:
    """Each candidate's [first, last] position in `func`'s block loop (None for a value touched outside it, or
    moved by a number of pages per block that is not whole turns of its CB). `whole_loops`: a range covers every
    loop (but the block loop) it touches."""
    split = _block_loop(func.body)
    if split is None:
        return {}
    before, loop, after = split
    outside = set().union(*(touched(s) for s in before + after)) if before or after else set()
    candidates = {cb: c for cb, c in candidates.items() if cb not in outside}
    ranges: dict[int, list[int]] = {}
    loops: list[tuple[int, int, tirx.For]] = []
    position = [0]

    def walk(stmt):
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                walk(s)
        elif isinstance(stmt, tirx.For):
            first = position[0]
            walk(stmt.body)
            loops.append((first, position[0] - 1, stmt))
        elif isinstance(stmt, tirx.IfThenElse):
            walk(stmt.then_case)
            if stmt.else_case is not None:
                walk(stmt.else_case)
        else:
            for cb in touched(stmt) & set(candidates):
                ranges.setdefault(cb, [position[0], position[0]])[1] = position[0]
            position[0] += 1
    walk(loop.body)
    changed = True
    while changed:
        changed = False
        for first, last, inner in loops:
            for cb, span in ranges.items():
                if span[1] < first or span[0] > last or (span[0] <= first and span[1] >= last):
                    continue
                if whole_loops:
                    extend = not _at_most_once(inner)
                else:
                    extend = not (first <= span[0] and span[1] <= last) or _carried(inner, cb)
                if extend:
                    span[0], span[1] = min(span[0], first), max(span[1], last)
                    changed = True
    return {cb: (first, last) for cb, (first, last) in ranges.items()
            if advance(loop.body, cb, candidates[cb]["num_pages"], moved_by) == 0}


def share(cbs: list[dict], ranges: dict[int, tuple], unpack_to_dest: set[int]) -> dict[int, int]:
    """Each value's index -> the index it takes turns on (greedy over live ranges by start: for intervals that is
    the fewest indices per kind). A range is (first, last) in compute, or a pair of such ranges (compute's, the
    producer's) for an input, which takes a turn only after both ranges of the turn's last value."""
    by_index = {c["index"]: c for c in cbs}
    kinds: dict[tuple, list[list]] = {}           # kind -> [[lead index, last range], ...]

    def spans(r) -> tuple:
        return r if isinstance(r[0], tuple) else (r,)
    mapping = {}
    for cb, r in sorted(ranges.items(), key=lambda r: (spans(r[1])[0][0], r[0])):
        c = by_index[cb]
        kind = (c["role"], c["producer"], c["data_format"], c["page_bytes"], c["num_pages"], cb in unpack_to_dest)
        turns = kinds.setdefault(kind, [])
        free = next((t for t in turns if all(a[1] < b[0] for a, b in zip(spans(t[1]), spans(r)))), None)
        if free is None:
            turns.append([cb, r])
        else:
            mapping[cb] = free[0]
            free[1] = r
    return mapping


def renumber(stmt, mapping: dict[int, int]):
    def visit(call):
        found = ops.intrinsic_of(call)
        if not found:
            return call
        spec, args = found
        moved = [tirx.IntImm("int32", mapping[int(a)]) if kind == "cb" and int(a) in mapping else a
                 for kind, a in zip(spec.args, args)]
        return call if all(m.same_as(a) for m, a in zip(moved, args)) else ops.call_expr(spec.name, *moved)
    return tvm_ffi.structural_map(stmt, [(tvm.ir.Call, visit)])


def moved(cb: dict, mapping: dict[int, int]) -> dict:
    cb = dict(cb, index=mapping.get(cb["index"], cb["index"]))
    if cb.get("shares_with") is not None:
        cb["shares_with"] = mapping.get(cb["shares_with"], cb["shares_with"])
    return cb


def share_circular_buffers_in(mod) -> tvm.IRModule:
    compute = mod[ops.COMPUTE]
    cbs = attrs.CB_CONFIG.get(compute)
    count = attrs.TARGET.get(compute)["num_cbs"]
    if len(cbs) <= count and all(c["index"] < count for c in cbs):
        return mod
    config = attrs.COMPUTE_CONFIG.get(compute)
    unpack_to_dest = set(config.get("unpack_to_dest_fp32_cbs", []))
    mapping = share(cbs, {**live_ranges(compute, cbs), **input_ranges(mod, cbs)}, unpack_to_dest)
    if not mapping:
        return mod
    holds: dict[int, list[str]] = {}
    for cb, lead in mapping.items():
        holds.setdefault(lead, []).append(next(c["buffer"] for c in cbs if c["index"] == cb))
    kept = [dict(c, holds=holds[c["index"]]) if c["index"] in holds else dict(c)
            for c in cbs if c["index"] not in mapping]
    # indices past the table's end move down into the ones freed
    used = {c["index"] for c in kept}
    free = iter(i for i in range(count) if i not in used)
    for c in sorted(kept, key=lambda c: c["index"]):
        if c["index"] >= count:
            new = next(free, None)
            if new is None:
                break
            mapping.update({cb: new for cb, lead in mapping.items() if lead == c["index"]})
            mapping[c["index"]] = new
    kept = [moved(c, mapping) for c in kept]
    kept.sort(key=lambda c: c["index"])
    config = dict(config, unpack_to_dest_fp32_cbs=sorted({mapping.get(i, i) for i in unpack_to_dest}))
    funcs = {}
    for gv, func in mod.functions.items():
        func = func.with_body(renumber(func.body, mapping))
        updates = {attrs.CB_CONFIG: kept}
        if attrs.COMPUTE_CONFIG.get(func, None) is not None:
            updates[attrs.COMPUTE_CONFIG] = config
        if attrs.MULTICAST.get(func, None):
            updates[attrs.MULTICAST] = [dict(g, cb=mapping.get(g["cb"], g["cb"])) for g in attrs.MULTICAST.get(func)]
        args = attrs.RUNTIME_ARGS.get(func, None)
        if args:
            updates[attrs.RUNTIME_ARGS] = [dict(a, cb=mapping.get(a["cb"], a["cb"])) if a.get("cb") is not None
                                           else a for a in args]
        funcs[gv] = attrs.put(func, updates)
    return tvm.IRModule(funcs, attrs=mod.attrs)


@tvm.transform.module_pass(opt_level=0, name="TTShareCircularBuffers")
def share_circular_buffers(mod, ctx):
    return share_circular_buffers_in(mod)
