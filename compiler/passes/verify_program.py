"""TTVerifyProgram: the split program is checked before any code is printed.

- CBs: count and indices within the device's CB table; total L1 bytes per core within the free L1;
- runtime args per kernel within the 341 limit;
- every block of the grid is assigned to exactly one core;
- the CB protocol balances per block: each CB's producer reserves and pushes, and its consumer waits and
  pops, the same number of pages (reader/compute/writer must agree or the device deadlocks).
"""
from __future__ import annotations

import tvm
from tvm import tirx

from .. import ops
from ..errors import CompileError
from ..ir import get_attr, stmts_of
from ..target import MAX_RUNTIME_ARGS
from .partition_work import blocks_of

STAGE = "verify"


def cb_page_counts(stmt, counts: dict, scale: int = 1) -> None:
    """Pages per CB call name over one block (loops multiply; the persistent loop counts once)."""
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmts_of(stmt):
            cb_page_counts(s, counts, scale)
    elif isinstance(stmt, tirx.For):
        extent = int(stmt.extent) if isinstance(stmt.extent, tirx.IntImm) else 1
        cb_page_counts(stmt.body, counts, scale * extent)
    elif isinstance(stmt, tirx.IfThenElse):
        cb_page_counts(stmt.then_case, counts, scale)
        if stmt.else_case is not None:
            cb_page_counts(stmt.else_case, counts, scale)
    else:
        found = ops.intrinsic_of(stmt)
        if found and found[0].name in ("cb_reserve_back", "cb_push_back", "cb_wait_front", "cb_pop_front"):
            key = (int(found[1][0]), found[0].name)
            counts[key] = counts.get(key, 0) + int(found[1][1]) * scale


def verify(mod) -> dict:
    compute = mod["compute"]
    target = get_attr(compute, "tt.target")
    cbs = get_attr(compute, "tt.cb_config")
    problems = []
    if len(cbs) > target["num_cbs"] or any(c["index"] >= target["num_cbs"] for c in cbs):
        problems.append(f"{len(cbs)} circular buffers (max index {max(c['index'] for c in cbs)}) exceed the "
                        f"{target['num_cbs']} CBs of {target['arch']}")
    l1 = sum(c["page_bytes"] * c["num_pages"] for c in cbs)
    if l1 > target["l1_available_for_cbs"]:
        detail = ", ".join(f"{c['name']} {c['num_pages']}x{c['page_bytes']} B" for c in cbs)
        problems.append(f"circular buffers need {l1} B of L1 per core ({detail}) but {target['arch']} has "
                        f"{target['l1_available_for_cbs']} B free; use smaller tiles or a lower cb_depth")
    for role in ("reader", "compute", "writer"):
        n = len(get_attr(mod[role], "tt.runtime_args"))
        if n > MAX_RUNTIME_ARGS:
            problems.append(f"the {role} kernel takes {n} runtime args (limit {MAX_RUNTIME_ARGS})")
    work = get_attr(compute, "tt.work_partition")
    seen: dict[int, list] = {}
    for entry in work["cores"]:
        for b in blocks_of(entry):
            seen.setdefault(b, []).append(entry["core"])
    missing = [b for b in range(work["blocks"]) if b not in seen]
    doubled = {b: cores for b, cores in seen.items() if len(cores) > 1 or b >= work["blocks"]}
    if missing or doubled:
        problems.append(f"work partition is wrong: blocks never assigned {missing[:5]}, assigned twice or out of "
                        f"range {dict(list(doubled.items())[:5])}")
    counts: dict = {}
    for role in ("reader", "compute", "writer"):
        cb_page_counts(mod[role].body, counts)
    balance = {}
    for c in cbs:
        i = c["index"]
        pages = {name: counts.get((i, name), 0) for name in ("cb_reserve_back", "cb_push_back", "cb_wait_front", "cb_pop_front")}
        balance[c["name"]] = pages
        if len(set(pages.values())) != 1:
            problems.append(f"CB {c['name']} (c_{i}) is unbalanced per block: " +
                            ", ".join(f"{k} {v}" for k, v in pages.items()))
    if problems:
        raise CompileError("generated program failed verification: " + "; ".join(problems), stage=STAGE,
                           hint="this is a limit of the target or a compiler bug; the message says which")
    return {"l1_bytes_per_core": l1, "cb_pages_per_block": balance}


@tvm.transform.module_pass(opt_level=0, name="TTVerifyProgram")
def verify_program(mod, ctx):
    report = verify(mod)
    return tvm.IRModule({gv: f.with_attr("tt.verification", report) for gv, f in mod.functions.items()},
                        attrs=mod.attrs)
