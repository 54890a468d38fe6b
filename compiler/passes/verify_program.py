"""TTVerifyProgram: the split program is checked before any code is printed.

- CBs: count and indices within the device's CB table; total L1 bytes per core within the free L1;
- runtime args per kernel within the 341 limit;
- every block of the grid is assigned to exactly one core;
- the CB protocol balances per block: each CB's producer reserves and pushes, and its consumer pops, the same
  number of pages (reader/compute/writer must agree or the device deadlocks), and the consumer waits for at least
  the pages it pops (a wait only tests that pages are there: waiting again for pages already waited for is legal,
  as a grouped window does for each group of a buffer it updates in place);
- every page a CB's consumer takes is the DRAM tile its producer made it for, where that can be decided
  (hand_offs.py).
"""
from __future__ import annotations

import tvm
from tvm import tirx

from .. import ops
from ..errors import CompileError, Refusal
from ..ir import stmts_of
from ..target import MAX_RUNTIME_ARGS
from .hand_offs import verify_hand_offs
from .partition_work import partition_problems
from .. import attrs

STAGE = "verify"


def cb_page_counts(stmt, counts: dict, scale: int = 1, loops: dict | None = None) -> None:
    """Pages per CB call name over one block (loops multiply; the persistent loop counts once; a branch taken
    only in a loop's first step, `if kb == 0`, once per loop)."""
    loops = {} if loops is None else loops
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmts_of(stmt):
            cb_page_counts(s, counts, scale, loops)
    elif isinstance(stmt, tirx.For):
        extent = int(stmt.extent) if isinstance(stmt.extent, tirx.IntImm) else 1
        cb_page_counts(stmt.body, counts, scale * extent, {**loops, stmt.loop_var: (stmt.min, extent)})
    elif isinstance(stmt, tirx.IfThenElse):
        cond = stmt.condition
        first = next((extent for var, (lo, extent) in loops.items() if isinstance(cond, tirx.EQ)
                      and cond.a.same_as(var) and isinstance(cond.b, tirx.IntImm) and isinstance(lo, tirx.IntImm)
                      and int(cond.b) == int(lo)), None)
        if first is not None and stmt.else_case is None:
            cb_page_counts(stmt.then_case, counts, scale // first, loops)
            return
        cb_page_counts(stmt.then_case, counts, scale, loops)
        if stmt.else_case is not None:
            cb_page_counts(stmt.else_case, counts, scale, loops)
    else:
        found = ops.intrinsic_of(stmt)
        if found and found[0].name in ("cb_reserve_back", "cb_push_back", "cb_wait_front", "cb_pop_front"):
            if found[0].name == "cb_wait_front" and not isinstance(found[1][1], tirx.IntImm):
                return      # a loop's cumulative wait (stream_reads.py): a test for pages a later wait takes whole
            key = (int(found[1][0]), found[0].name)
            counts[key] = counts.get(key, 0) + int(found[1][1]) * scale


def _kib(n: int) -> str:
    return f"{n / 1024:.0f} KiB" if n < 1024 * 1024 else f"{n / 1024 / 1024:.2f} MiB"


def l1_overflow(cbs: list[dict], l1: int, target: dict) -> CompileError:
    """The kernel's tiles do not fit in L1: said with the user's buffer names, located at the largest one."""
    by_buffer: dict[str, list[dict]] = {}
    for cb in cbs:
        by_buffer.setdefault(cb["buffer"], []).append(cb)
    sizes = {name: sum(c["page_bytes"] * c["num_pages"] for c in found) for name, found in by_buffer.items()}
    largest = max(sizes, key=sizes.get)

    def part(name: str) -> str:
        cb = by_buffer[name][0]
        block = cb["tiles"][0] * cb["tiles"][1] if cb.get("tiles") else 0
        copies = cb["num_pages"] // block if block and len(by_buffer[name]) == 1 else 1
        return f"`{name}` {_kib(sizes[name])}" + (f" ({copies} x {_kib(sizes[name] // copies)})" if copies > 1 else "")

    shown = ", ".join(part(name) for name in sorted(sizes, key=sizes.get, reverse=True))
    return CompileError(
        f"the kernel's tiles need {_kib(l1)} of L1 per core but {target['arch']} leaves "
        f"{_kib(target['l1_available_for_cbs'])} for them: {shown}", stage=STAGE, subject=largest,
        hint=f"use smaller blocks (`{largest}` is the largest), or keep fewer copies of each: a lower cb_depth "
             f"(TileLang: T.Pipelined's num_stages)")


def cb_overflow(cbs: list[dict], target: dict) -> CompileError:
    """More tile values than the core has circular buffers, after TTShareCircularBuffers: said by kind, located at
    the first value left without one (a buffer of the user's, or the scratch tile made for one of their lines)."""
    kinds: dict[str, int] = {}
    for c in cbs:
        kinds[c["role"]] = kinds.get(c["role"], 0) + 1
    over = sorted((c for c in cbs if c["index"] >= target["num_cbs"]), key=lambda c: c["index"])
    named = [c["buffer"] for c in over if c["role"] in ("intermediate", "input", "output")] or \
        [c["buffer"] for c in cbs if c["role"] == "intermediate"]
    counted = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    return CompileError(
        f"the program needs {len(cbs)} circular buffers for its tile values ({counted}) but {target['arch']} has "
        f"{target['num_cbs']}, after compute's values that are never live together share one (values moved "
        f"between kernels, and values live together, keep their own): `{named[0]}` and {len(over) - 1} more have none",
        stage=STAGE, subject=named[0] if named else None,
        hint="compute fewer intermediate values per block (one T.Parallel body instead of several), or run the "
             "prim_func's kernels as separate programs",
        refusal=Refusal.not_lowered(f"more tile values than {target['arch']}'s {target['num_cbs']} circular buffers: "
                                    "CBs are not yet shared between values never live together"))


def verify(mod) -> dict:
    compute = mod["compute"]
    target = attrs.TARGET.get(compute)
    cbs = attrs.CB_CONFIG.get(compute)
    problems = []
    if len(cbs) > target["num_cbs"] or any(c["index"] >= target["num_cbs"] for c in cbs):
        raise cb_overflow(cbs, target)
    l1 = sum(c["page_bytes"] * c["num_pages"] for c in cbs if c.get("shares_with") is None)   # shared L1 once
    if l1 > target["l1_available_for_cbs"]:
        raise l1_overflow(cbs, l1, target)
    for role in ("reader", "compute", "writer"):
        n = len(attrs.RUNTIME_ARGS.get(mod[role]))
        if n > MAX_RUNTIME_ARGS:
            problems.append(f"the {role} kernel takes {n} runtime args (limit {MAX_RUNTIME_ARGS})")
    work = attrs.WORK_PARTITION.get(compute)
    for problem in partition_problems(work["cores"], work["blocks"]):
        problems.append(f"work partition is wrong: {problem}")
    counts: dict = {}
    for role in ("reader", "compute", "writer"):
        cb_page_counts(mod[role].body, counts)
    balance = {}
    for c in cbs:
        i = c["index"]
        pages = {name: counts.get((i, name), 0) for name in ("cb_reserve_back", "cb_push_back", "cb_wait_front", "cb_pop_front")}
        balance[c["name"]] = pages
        moved = (pages["cb_reserve_back"], pages["cb_push_back"], pages["cb_pop_front"])
        if len(set(moved)) != 1 or pages["cb_wait_front"] < pages["cb_pop_front"]:
            problems.append(f"CB {c['name']} (c_{i}) is unbalanced per block: " +
                            ", ".join(f"{k} {v}" for k, v in pages.items()))
    if problems:
        raise CompileError("generated program failed verification: " + "; ".join(problems), stage=STAGE,
                           hint="this is a limit of the target or a compiler bug; the message says which")
    verify_hand_offs(mod, cbs)
    return {"l1_bytes_per_core": l1, "cb_pages_per_block": balance}


@tvm.transform.module_pass(opt_level=0, name="TTVerifyProgram")
def verify_program(mod, ctx):
    report = verify(mod)
    return tvm.IRModule({gv: attrs.VERIFICATION.on(f, report) for gv, f in mod.functions.items()},
                        attrs=mod.attrs)
