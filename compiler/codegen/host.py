"""main.cpp from the plan: the complete MeshDevice-style host program (buffers, CBs, kernels, runtime args,
input upload, launch, output download). The same file builds against the TT-Metalium SDK and the emulator."""
from __future__ import annotations

from functools import lru_cache

import jinja2

from ..version import COMPILER_VERSION


@lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.PackageLoader("compiler.codegen", "templates"),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    return env.get_template("main.cpp.j2")


MCAST_FIELDS = ("role", "sender_x", "sender_y", "start_x", "start_y", "end_x", "end_y", "receivers", "loopback")
NOC_FIELDS = {"sender_x": (1, "x"), "sender_y": (1, "y"), "start_x": (3, "x"), "start_y": (3, "y"), "end_x": (5, "x"),
              "end_y": (5, "y")}


def _mcast_arg(arg: dict, groups: dict) -> str:
    """A multicast runtime arg from the per-core table m[group][field]; coordinates as the NoC sees them."""
    g = groups[arg["cb"]]
    if arg["field"] in NOC_FIELDS:
        first, axis = NOC_FIELDS[arg["field"]]
        return f"static_cast<uint32_t>(noc(m[{g}][{first}], m[{g}][{first + 1}]).{axis})"
    return f"m[{g}][{MCAST_FIELDS.index(arg['field'])}]"


STAGGER_FIELDS = {"waits": "s[0]", "next": "s[1]", "next_x": "static_cast<uint32_t>(noc(s[2], s[3]).x)",
                  "next_y": "static_cast<uint32_t>(noc(s[2], s[3]).y)"}


def _stagger_arg(arg: dict) -> str:
    """A staggered read's runtime arg from the per-core table s: waits, has a next core, its logical x, y."""
    return STAGGER_FIELDS[arg["field"]]


def stagger_table(plan: dict) -> list[list[int]]:
    """Per core (in plan.work.cores order): signals it waits for, whether it signals a next core, that core (logical)."""
    by_core = {tuple(c["core"]): c for c in plan["stagger"]["cores"]}
    rows = []
    for core in plan["work"]["cores"]:
        c = by_core[tuple(core["core"])]
        rows.append([c["waits"], int(c["next"] is not None), *(c["next"] or (0, 0))])
    return rows


def mcast_table(plan: dict) -> list[list[list[int]]]:
    """Per core (in plan.work.cores order), per multicast group: the MCAST_FIELDS in logical coordinates."""
    rows = []
    for core in plan["work"]["cores"]:
        row = []
        for g in plan["multicast"]:
            c = next(e for e in g["cores"] if e["core"] == core["core"])
            row.append([c["role"], *c["sender"], *c["start"], *c["end"], c["receivers"], c["loopback"]])
        rows.append(row)
    return rows


def print_host(plan: dict) -> str:
    work_args = plan["work"]["work_args"]
    groups = {g["cb"]: k for k, g in enumerate(plan["multicast"])}
    kernels = []
    for k in plan["kernels"]:
        args = []
        for a in k["runtime_args"]:
            if a["kind"] == "buffer_address":
                args.append(f"static_cast<uint32_t>(t_{a['buffer']}->address())")   # t_<name>: no clash with ours
            elif a["kind"] == "multicast":
                args.append(_mcast_arg(a, groups))
            elif a["kind"] == "stagger":
                args.append(_stagger_arg(a))
            else:
                args.append(f"w[{2 + work_args.index(a['name'])}]")
        kernels.append(dict(k, cpp_args=args))
    view = dict(plan, kernels=kernels, mcast_table=mcast_table(plan) if plan["multicast"] else [],
                stagger_table=stagger_table(plan) if plan.get("stagger") else [])
    buffers = [b for b in plan["buffers"] if b["role"] != "unused"]
    constants = [dict(b, generator=dict(b["generator"], true_cpp=_cpp_float(b["generator"]["true_value"]),
                                        false_cpp=_cpp_float(b["generator"]["false_value"])))
                 if b["generator"]["kind"] == "affine_mask" else b for b in buffers if b["role"] == "constant"]
    return _template().render(
        version=COMPILER_VERSION, plan=view, buffers=buffers, constants=constants,
        inputs=[b for b in buffers if is_input(b)], outputs=[dict(b, accumulate=b.get("accumulate", False))
                                                             for b in buffers if b["role"] == "output"],
        dataflow=[k for k in kernels if k["role"] != "compute"],
        replicated=any(b.get("replicated_rows") for b in buffers if is_input(b)))


def is_input(buffer: dict) -> bool:
    """A buffer the host writes before the launch: an input, or an output the kernel adds into (its starting
    contents, T.atomic_add)."""
    return buffer["role"] == "input" or bool(buffer.get("accumulate"))


def _cpp_float(value) -> str:
    """A generator value from the plan (a number, or "inf" / "-inf") as a C++ float."""
    if value in ("inf", "-inf"):
        return ("-" if value == "-inf" else "") + "std::numeric_limits<float>::infinity()"
    return f"{float(value)!r}f"
