"""tt.plan.json from the split module: every number is read from the IR attributes (one source of truth)."""
from __future__ import annotations

import json

from ..passes.partition_work import blocks_of
from ..passes.share_reads import FIELDS as MCAST_FIELDS
from ..version import COMPILER_VERSION
from .. import attrs
from ..errors import CompileError
from ..target import device_costs
from .noc_choice import choose_nocs, sender_read_nocs

# which RISC-V and NoC each kernel uses: tt-metal's ReaderDataMovementConfig / WriterDataMovementConfig, the reader
# on NCRISC with the NoC preferred for DRAM reads (NoC 0: the responses of the banks in their two columns spread
# over the rows), the writer on BRISC with the one preferred for DRAM writes (NoC 1) -- detail::
# preferred_noc_for_dram_read / _write. The RISCs' own default NoCs are the other way round, and then a DRAM
# read's responses and the writes share links (softmax 2048x1024 on Blackhole: busiest link 23.3 k cycles, 12.7 k).
# A GEMM whose DRAM readers line up so that the default would load one link longer than the matrix engine works
# swaps the two (noc_choice.py).
KERNEL_PROCESSOR = {"reader": "RISCV_1", "writer": "RISCV_0", "compute": "TRISC0/1/2"}
COORDINATE_FIELDS = {"sender_x": ("sender", "x"), "sender_y": ("sender", "y"), "start_x": ("start", "x"),
                     "start_y": ("start", "y"), "end_x": ("end", "x"), "end_y": ("end", "y")}


def multicast_plan(groups: list[dict], cbs: dict, nocs: dict, read_nocs: dict | None = None) -> list[dict]:
    """tt.multicast with each group's mover and NoC: a multicast rectangle runs start -> end on NoC 0 and
    end -> start on NoC 1, so for a NoC 1 mover the corners are swapped here (logical coordinates; the host
    program turns them into NoC coordinates). `read_nocs`: CB -> the NoC its senders read on, where that is not
    the mover's (noc_choice.sender_read_nocs): the group's `read_noc`."""
    out = []
    for g in groups:
        mover = cbs[g["cb"]]["producer"]
        noc = nocs[mover]
        cores = []
        for row in g["cores"]:
            c = dict(zip(("x", "y") + MCAST_FIELDS, row))
            c["core"] = [c["x"], c["y"]]
            start, end = [c["start_x"], c["start_y"]], [c["end_x"], c["end_y"]]
            if noc == 1:
                start, end = end, start
            cores.append({"core": c["core"], "role": c["role"], "sender": [c["sender_x"], c["sender_y"]],
                          "start": start, "end": end, "receivers": c["receivers"], "loopback": c["loopback"]})
        out.append({"cb": g["cb"], "buffer": g["buffer"], "mover": mover, "noc": noc,
                    "sender_semaphore": g["sender_semaphore"], "receiver_semaphore": g["receiver_semaphore"],
                    "depends_on": g["axes"],
                    "groups": g["groups"], "cores": cores})
        if (read_nocs or {}).get(g["cb"], noc) != noc:
            out[-1]["read_noc"] = read_nocs[g["cb"]]
    return out


def stagger_plan(stagger: dict | None) -> dict | None:
    """tt.stagger for the plan: per core the signals it waits for and the core it signals next (logical)."""
    if not stagger:
        return None
    return {"semaphore": stagger["semaphore"], "groups": stagger["groups"], "cb": stagger["cb"],
            "cores": [{"core": [x, y], "waits": waits, "next": [nx, ny] if has_next else None}
                      for x, y, waits, has_next, nx, ny in stagger["cores"]]}


def arg_value(arg: dict, core: dict, multicast: dict, stagger: dict | None = None):
    """One runtime arg's value on one core: an int, `address(<buffer>)` or `noc_x(x,y)` / `noc_y(x,y)` for the
    host program to fill in."""
    if arg["kind"] == "buffer_address":
        return f"address({arg['buffer']})"
    if arg["kind"] == "work":
        return core[arg["name"].removeprefix("block_")]
    if arg["kind"] == "stagger":
        entry = stagger[tuple(core["core"])]
        if arg["field"] == "waits":
            return entry["waits"]
        if arg["field"] == "next":
            return int(entry["next"] is not None)
        x, y = entry["next"] or (0, 0)
        return f"noc_{arg['field'].removeprefix('next_')}({x},{y})"
    entry = multicast[arg["cb"]][tuple(core["core"])]
    if arg["field"] in COORDINATE_FIELDS:
        which, axis = COORDINATE_FIELDS[arg["field"]]
        x, y = entry[which]
        return f"noc_{axis}({x},{y})"
    return entry[arg["field"]]


def build_plan(mod) -> dict:
    compute = mod["compute"]
    layouts = attrs.LAYOUT_DESC.get(compute)
    work = dict(attrs.WORK_PARTITION.get(compute))
    work["cores"] = [dict(core, blocks=blocks_of(core)) for core in work["cores"]]
    logical = attrs.LOGICAL_SHAPES.get(compute, {}) or {}
    declared = attrs.DECLARED_DTYPES.get(compute, {}) or {}
    buffers = []
    for name, info in attrs.BUFFERS.get(compute).items():
        if info["scope"] != "global":
            continue
        lay = layouts[name]
        shape, tile_axes = list(info["shape"]), list(lay["tile_axes"])
        if name in logical:   # a vector the user passes as (n,): its (n, 1) or (1, n) tensor in the kernel, whose
            # layout runs it along the tile rows or the tile columns (a (64, 1) tensor written from a row of a tile
            # is a row: tile axes (UNIT, 0)); the vector's own axis takes that place
            along = 0 if info["shape"][1] == 1 and info["shape"][0] == logical[name][0] else 1
            shape, tile_axes = list(logical[name]), [0 if a == along else -1 for a in tile_axes]
        entry = {"name": name, "role": info["role"], "shape": shape, "dtype": info["dtype"],
                 "data_format": lay["data_format"], "layout": lay["layout"], "memory": lay["memory"],
                 "tile_axes": tile_axes, "padded_shape": lay["padded_shape"], "tiles": lay["tiles"],
                 "dram_pages": lay["pages"], "page_bytes": lay["page_bytes"],
                 "size_bytes": lay["pages"] * lay["page_bytes"]}
        if name in declared:
            entry["declared_dtype"] = declared[name]
        if "generator" in info:
            entry["generator"] = info["generator"]
        if info.get("accumulate"):
            entry["accumulate"] = True
        if lay.get("replicated_rows"):
            entry["replicated_rows"] = True
        if "row_offsets" in info:
            entry["row_offsets"] = info["row_offsets"]
        if "shard" in lay:
            entry["shard"] = lay["shard"]
        buffers.append(entry)
    # a CB that shares another's L1 (an output CB over the accumulator it is packed from) adds no bytes
    cbs = [dict(c, shares_with=c.get("shares_with"), shard_of=c.get("shard_of"),
                tile_order=c.get("tile_order", "row_major"),
                total_bytes=0 if c.get("shares_with") is not None else c["page_bytes"] * c["num_pages"])
           for c in attrs.CB_CONFIG.get(compute)]
    verification = attrs.VERIFICATION.get(compute)
    groups = attrs.MULTICAST.get(compute, []) or []
    blocking = attrs.BLOCKING.get(compute)
    target = attrs.TARGET.get(compute)
    try:
        costs = device_costs(target["arch"])
    except CompileError:   # an architecture without a cost table: the default NoCs
        costs = None
    nocs, noc_reason = choose_nocs(costs, work["cores"], cbs, verification["cb_pages_per_block"], groups,
                                   blocking.get("compute_cycles"))
    read_nocs = sender_read_nocs(costs, work["cores"], cbs, verification["cb_pages_per_block"], groups, nocs)
    multicast = multicast_plan(groups, {c["index"]: c for c in cbs}, nocs, read_nocs)
    by_cb = {g["cb"]: {tuple(c["core"]): c for c in g["cores"]} for g in multicast}
    stagger = stagger_plan(attrs.STAGGER.get(compute, None))
    stagger_of = {tuple(c["core"]): c for c in stagger["cores"]} if stagger else None
    kernels = []
    for role in ("reader", "compute", "writer"):
        func = mod[role]
        args = attrs.RUNTIME_ARGS.get(func)
        per_core = []
        for core in work["cores"]:
            values = [arg_value(a, core, by_cb, stagger_of) for a in args]
            per_core.append({"core": core["core"], "values": values})
        noc = f"NOC_{nocs[role]}" if role in nocs else None
        kernels.append({"role": role, "file": f"{role}.cpp", "processor": KERNEL_PROCESSOR[role], "noc": noc,
                        "runtime_args": args, "compile_time_args": attrs.COMPILE_TIME_ARGS.get(func),
                        "per_core_args": per_core})
    schedule = schedule_of(blocking)
    if noc_reason:
        schedule["explain"].append(noc_reason)
    return {
        "schema_version": 1,
        "compiler": {"name": "tilefarm", "version": COMPILER_VERSION},
        "kernel": attrs.ENTRY.get(compute, "main"),
        "source_file": attrs.SOURCE_FILE.get(compute),
        "target": attrs.TARGET.get(compute),
        "grid": attrs.GRID.get(compute),
        "schedule": schedule,
        "core_grid": attrs.CORE_GRID.get(compute),
        "core_ranges": attrs.CORE_RANGES.get(compute),
        "work": work,
        "buffers": buffers,
        "circular_buffers": cbs,
        "multicast": multicast,
        "stagger": stagger,
        "semaphores_per_core": max([max(g["sender_semaphore"], g["receiver_semaphore"]) + 1 for g in multicast]
                                   + ([stagger["semaphore"] + 1] if stagger else []), default=0),
        "kernels": kernels,
        "compute_config": attrs.COMPUTE_CONFIG.get(compute),
        "l1_bytes_per_core": verification["l1_bytes_per_core"],
        "cb_pages_per_block": verification["cb_pages_per_block"],
    }


def schedule_of(blocking: dict) -> dict:
    return {"blocking": blocking["mode"], "changed": blocking["changed"],
            "explain": list(blocking["explain"]) + [f"math fidelity {blocking['math_fidelity']}"]}


def plan_json(plan: dict) -> str:
    """One top-level key per line, values compact: readable, and fast (json's C encoder has no indent mode)."""
    lines = [f"  {json.dumps(key)}: {json.dumps(value, separators=(', ', ': '))}" for key, value in plan.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"
