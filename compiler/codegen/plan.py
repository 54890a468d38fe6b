"""tt.plan.json from the split module: every number is read from the IR attributes (one source of truth)."""
from __future__ import annotations

import json

from ..ir import get_attr
from ..passes.partition_work import blocks_of
from ..version import COMPILER_VERSION

KERNEL_PLACEMENT = {  # which RISC-V and NoC each kernel uses (TT-Metalium's reader/writer conventions)
    "reader": ("RISCV_1", "RISCV_1_default"),
    "writer": ("RISCV_0", "RISCV_0_default"),
    "compute": ("TRISC0/1/2", None),
}


def build_plan(mod) -> dict:
    compute = mod["compute"]
    layouts = get_attr(compute, "tt.layout_desc")
    work = dict(get_attr(compute, "tt.work_partition"))
    work["cores"] = [dict(core, blocks=blocks_of(core)) for core in work["cores"]]
    buffers = []
    for name, info in get_attr(compute, "tt.buffers").items():
        if info["scope"] != "global":
            continue
        lay = layouts[name]
        buffers.append({"name": name, "role": info["role"], "shape": info["shape"], "dtype": info["dtype"],
                        "data_format": lay["data_format"], "layout": lay["layout"], "memory": "DRAM",
                        "padded_shape": lay["padded_shape"], "tiles": lay["tiles"], "dram_pages": lay["pages"],
                        "page_bytes": lay["page_bytes"], "size_bytes": lay["pages"] * lay["page_bytes"]})
    cbs = [dict(c, total_bytes=c["page_bytes"] * c["num_pages"]) for c in get_attr(compute, "tt.cb_config")]
    kernels = []
    for role in ("reader", "compute", "writer"):
        func = mod[role]
        args = get_attr(func, "tt.runtime_args")
        per_core = []
        for core in work["cores"]:
            values = [f"address({a['buffer']})" if a["kind"] == "buffer_address" else core[a["name"].removeprefix("block_")]
                      for a in args]
            per_core.append({"core": core["core"], "values": values})
        processor, noc = KERNEL_PLACEMENT[role]
        kernels.append({"role": role, "file": f"{role}.cpp", "processor": processor, "noc": noc,
                        "runtime_args": args, "compile_time_args": get_attr(func, "tt.compile_time_args"),
                        "per_core_args": per_core})
    verification = get_attr(compute, "tt.verification")
    return {
        "schema_version": 1,
        "compiler": {"name": "tilefarm", "version": COMPILER_VERSION},
        "kernel": get_attr(compute, "tt.entry", "main"),
        "source_file": get_attr(compute, "tt.source_file"),
        "target": get_attr(compute, "tt.target"),
        "grid": get_attr(compute, "tt.grid"),
        "core_grid": get_attr(compute, "tt.core_grid"),
        "core_ranges": get_attr(compute, "tt.core_ranges"),
        "work": work,
        "buffers": buffers,
        "circular_buffers": cbs,
        "kernels": kernels,
        "compute_config": get_attr(compute, "tt.compute_config"),
        "l1_bytes_per_core": verification["l1_bytes_per_core"],
        "cb_pages_per_block": verification["cb_pages_per_block"],
    }


def plan_json(plan: dict) -> str:
    """One top-level key per line, values compact: readable, and fast (json's C encoder has no indent mode)."""
    lines = [f"  {json.dumps(key)}: {json.dumps(value, separators=(', ', ': '))}" for key, value in plan.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"
