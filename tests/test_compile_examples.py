"""Every example compiles for every arch, and the output has the properties a device run depends on."""
from __future__ import annotations

import json
import re

import jsonschema
import pytest

from .conftest import ARCHS, ROOT, good_examples, shared_copies

SCHEMA = json.loads((ROOT / "schemas" / "tt_plan.schema.json").read_text())
CASES = [(p, a) for p in good_examples() + shared_copies() for a in ARCHS]
IDS = [f"{p.parent.name}/{p.stem}-{a}" for p, a in CASES]


def test_published_schema_is_current():
    from schemas.plan import PLAN_JSON_SCHEMA

    assert SCHEMA == json.loads(json.dumps(PLAN_JSON_SCHEMA)), "regenerate schemas/tt_plan.schema.json"


def test_examples_cover_the_required_kernels():
    names = {p.stem for p in good_examples()}
    assert {"gemm_single_tile", "gemm_bf16_blocks", "eltwise_chain", "gemm_ragged"} <= names
    assert (ROOT / "examples" / "bad_syntax.py").exists()


@pytest.mark.parametrize("path,arch", CASES, ids=IDS)
def test_plan_invariants(compiled, path, arch):
    result = compiled(path, arch)
    plan = json.loads(result.artifacts["tt.plan.json"])
    jsonschema.validate(plan, SCHEMA)
    assert set(result.artifacts) == {"reader.cpp", "compute.cpp", "writer.cpp", "main.cpp", "tt.plan.json", "linemap.json"}
    work = plan["work"]
    extents = plan["grid"]["extents"]
    blocks = extents[0] * (extents[1] if len(extents) == 2 else 1)
    assert work["blocks"] == blocks
    assert sum(c["count"] for c in work["cores"]) == blocks
    walked = sorted(b for c in work["cores"] for b in c["blocks"])
    assert walked == list(range(blocks)), "every block exactly once"
    gx, gy = plan["core_grid"]
    assert all(0 <= c["core"][0] < gx and 0 <= c["core"][1] < gy for c in work["cores"])
    assert len({tuple(c["core"]) for c in work["cores"]}) == len(work["cores"])
    in_ranges = {(x, y) for (x0, y0), (x1, y1) in plan["core_ranges"]
                 for x in range(x0, x1 + 1) for y in range(y0, y1 + 1)}
    assert in_ranges == {tuple(c["core"]) for c in work["cores"]}
    # CBs: balanced per block (a consumer may wait again for pages it already waited for), indices legal, L1
    # within the target
    for name, pages in plan["cb_pages_per_block"].items():
        moved = {pages["cb_reserve_back"], pages["cb_push_back"], pages["cb_pop_front"]}
        assert len(moved) == 1 and pages["cb_push_back"] > 0, (name, pages)
        assert pages["cb_wait_front"] >= pages["cb_pop_front"], (name, pages)
    assert all(cb["index"] < plan["target"]["num_cbs"] for cb in plan["circular_buffers"])
    assert plan["l1_bytes_per_core"] == sum(cb["total_bytes"] for cb in plan["circular_buffers"])
    assert plan["l1_bytes_per_core"] <= plan["target"]["l1_available_for_cbs"]
    # tt-metal's Reader/WriterDataMovementConfig: the reader on NCRISC, the writer on BRISC, on the two NoCs (the
    # reader on NoC 0 unless codegen/noc_choice.py swaps them); a multicast's rectangle runs in its mover's NoC
    placement = {k["role"]: (k["processor"], k["noc"]) for k in plan["kernels"]}
    assert placement["reader"][0] == "RISCV_1" and placement["writer"][0] == "RISCV_0"
    assert {placement["reader"][1], placement["writer"][1]} == {"NOC_0", "NOC_1"}
    for group in plan.get("multicast", []):
        assert f"NOC_{group['noc']}" == placement[group["mover"]][1]
    # buffers: DRAM pages cover the padded shape
    for b in plan["buffers"]:
        assert b["dram_pages"] == b["tiles"][0] * b["tiles"][1]
        assert [t * 32 for t in b["tiles"]] == b["padded_shape"] and all(
            p >= s > p - 32 for p, s in zip(b["padded_shape"], b["shape"]))


@pytest.mark.parametrize("path,arch", CASES, ids=IDS)
def test_cb_calls_sit_on_the_right_side(compiled, path, arch):
    result = compiled(path, arch)
    plan = json.loads(result.artifacts["tt.plan.json"])
    text = {k: result.artifacts[f"{k}.cpp"].decode() for k in ("reader", "compute", "writer")}
    for cb in plan["circular_buffers"]:
        name = re.escape(cb["name"])
        for role, src in text.items():
            pushes = re.findall(rf"cb_(?:reserve_back|push_back)\({name},", src)
            pops = re.findall(rf"cb_(?:wait_front|pop_front)\({name},", src)
            assert bool(pushes) == (role == cb["producer"]), (cb["name"], role)
            assert bool(pops) == (role == cb["consumer"]), (cb["name"], role)
            declared = re.search(rf"constexpr uint32_t {name} = tt::CBIndex::c_(\d+);", src)
            if pushes or pops:
                assert declared and int(declared.group(1)) == cb["index"]


MCAST_FIELDS = ("role", "sender_x", "sender_y", "start_x", "start_y", "end_x", "end_y", "receivers", "loopback")


def _top_level_args(text: str) -> list[str]:
    """A C++ argument list split at its top-level commas."""
    out, depth, current = [], 0, ""
    for ch in text:
        if ch == "," and depth == 0:
            out.append(current.strip())
            current = ""
            continue
        depth += ch in "([{"
        depth -= ch in ")]}"
        current += ch
    return out + [current.strip()]


@pytest.mark.parametrize("path,arch", CASES, ids=IDS)
def test_runtime_args_match_between_host_and_kernels(compiled, path, arch):
    result = compiled(path, arch)
    plan = json.loads(result.artifacts["tt.plan.json"])
    host = result.artifacts["main.cpp"].decode()
    for kernel in plan["kernels"]:
        src = result.artifacts[kernel["file"]].decode()
        reads = {int(i): name for name, i in re.findall(r"const uint32_t (\w+) = get_arg_val<uint32_t>\((\d+)\);", src)}
        names = [a["name"] for a in kernel["runtime_args"]]
        assert reads == dict(enumerate(names)), f"{kernel['role']} reads {reads}, plan says {names}"
        call = re.search(rf"SetRuntimeArgs\(program, {kernel['role']}, core, \{{(.*?)\}}\);", host)
        assert call, kernel["role"]
        host_args = _top_level_args(call.group(1))
        assert len(host_args) == len(names)
        groups = [g["cb"] for g in plan["multicast"]]
        for host_arg, arg in zip(host_args, kernel["runtime_args"]):
            if arg["kind"] == "buffer_address":
                assert host_arg == f"static_cast<uint32_t>(t_{arg['buffer']}->address())"
            elif arg["kind"] == "multicast":   # m[group][field]: the group of the arg's CB, the field's column
                g, column = groups.index(arg["cb"]), MCAST_FIELDS.index(arg["field"])
                if arg["field"].endswith(("_x", "_y")):
                    first = column - (arg["field"].endswith("_y"))
                    assert host_arg == f"static_cast<uint32_t>(noc(m[{g}][{first}], m[{g}][{first + 1}]).{arg['field'][-1]})"
                else:
                    assert host_arg == f"m[{g}][{column}]"
            else:
                index = int(re.fullmatch(r"w\[(\d+)\]", host_arg).group(1))
                assert plan["work"]["work_args"][index - 2] == arg["name"]
        per_core = {tuple(c["core"]): c["values"] for c in kernel["per_core_args"]}
        for core in plan["work"]["cores"]:
            values = per_core[tuple(core["core"])]
            for arg, value in zip(kernel["runtime_args"], values):
                if arg["kind"] == "work":
                    assert value == core[arg["name"].removeprefix("block_")]
                elif arg["kind"] == "multicast":
                    entry = next(c for g in plan["multicast"] if g["cb"] == arg["cb"] for c in g["cores"]
                                 if c["core"] == core["core"])
                    if arg["field"].endswith(("_x", "_y")):
                        x, y = entry[arg["field"][:-2]]
                        assert value == f"noc_{arg['field'][-1]}({x},{y})"
                    else:
                        assert value == entry[arg["field"]]
        accessors = re.findall(r"TensorAccessorArgs<", src)
        assert len(accessors) == len(kernel["compile_time_args"])
        appended = re.findall(r"TensorAccessorArgs\(\*(\w+)\)\.append_to\(" + kernel["role"] + r"_compile_args\)", host)
        assert appended == [f"t_{a['buffer']}" for a in kernel["compile_time_args"]]
