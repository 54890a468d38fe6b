"""One cost model for the matmul LLK calls (compiler/cost_model.py): the block chooser evaluates it, and the emulator's
timing model charges exactly what it says (TTEMU_COSTS' `matmul_block` table)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from compiler.cost_model import (MAX_DST_TILES, dram_bank_xys, dram_read_link_cycles, matmul_block_cycles,
                                  matmul_block_table, matmul_block_terms, noc_links)
from compiler.target import device_costs
from compiler.toolchain import emulate, sdk_headers
from tests.emulator.test_ttnn_kernels import NPY_UTIL, PROGRAMS, MatmulConfig

FIDELITY = {0: "LoFi", 2: "HiFi2", 4: "HiFi4"}


def test_the_table_holds_every_call_shape_a_dst_holds():
    costs = device_costs("wormhole_b0")
    table = matmul_block_table(costs)
    shapes = [(table[i], table[i + 1]) for i in range(0, len(table), 7)]
    assert len(table) % 7 == 0 and len(shapes) == len(set(shapes))
    assert set(shapes) == {(rt, ct) for rt in range(1, 17) for ct in range(1, 17) if rt * ct <= MAX_DST_TILES}
    # the reused operand is unpacked once per tile, the streamed one once per output tile
    _, per_in0, per_in1, _, products = matmul_block_terms(costs, 4, 2)   # ct < rt: in1 reused
    assert products == 8 and per_in1 * costs["unpack_bytes_per_cycle"] == pytest.approx(2) and per_in0 * costs[
        "unpack_bytes_per_cycle"] == pytest.approx(8)
    _, per_in0, per_in1, _, _ = matmul_block_terms(costs, 1, 8)          # ct >= rt: in0 reused
    assert per_in0 * costs["unpack_bytes_per_cycle"] == pytest.approx(1)
    assert per_in1 * costs["unpack_bytes_per_cycle"] == pytest.approx(8)


def _matmul(tmp_path, arch: str, dtype: int, fidelity: int, subblock: tuple, overrides: dict | None = None,
            name: str = "run", in0_block_w: int = 4):
    """ttnn's 2-D multicast matmul, 512^3 on 4 x 4 cores, timing only."""
    cfg = MatmulConfig(512, 512, 512, (4, 4), in0_block_w=in0_block_w, out_subblock_h=subblock[0], out_subblock_w=subblock[1],
                       per_core_m=4, per_core_n=4, packer_l1_acc=True, math_fidelity=fidelity, no_data=True,
                       dtype=dtype)
    src = tmp_path / "mm"
    if not src.exists():
        src.mkdir()
        shutil.copy(PROGRAMS / "matmul_2d_mcast.cpp", src / "main.cpp")
        shutil.copy(NPY_UTIL, src / "npy_util.hpp")
    return emulate.run_host_program(src / "main.cpp", {"cfg": cfg.cfg()}, tmp_path / name, arch=arch,
                                    timing_only=True, timeout_s=300, cost_overrides=overrides,
                                    env={"TT_METAL_HOME": str(sdk_headers.ensure_kernels())})


@pytest.mark.parametrize("arch, dtype, fidelity, subblock", [
    ("wormhole_b0", 0, 2, (4, 2)), ("wormhole_b0", 1, 0, (2, 4)), ("blackhole", 2, 4, (1, 4))])
def test_the_emulator_charges_matmul_calls_what_the_cost_model_says(tmp_path, arch, dtype, fidelity, subblock):
    result = _matmul(tmp_path, arch, dtype, fidelity, subblock)
    lines = result.report["timing"]["programs"][0]["lines"]
    matmul = [entry for entry in lines if entry["kernel"] == "bmm_large_block_zm_fused_bias_activation.cpp"
              and entry["risc"] == "TRISC1" and entry["busy"] > 0]
    line = max(matmul, key=lambda e: e["busy"])     # the matmul_block call
    # what the unpacker fetches through its datum ports: a block format's 64 shared exponents (the rest of its 1088 /
    # 576-byte tile) come through a port of their own
    tile_bytes = {0: 2048, 1: 1024, 2: 512}[dtype]
    costs = device_costs(arch)
    unpack, math = matmul_block_cycles(costs, *subblock, tile_bytes, tile_bytes, FIDELITY[fidelity])
    assert line["busy"] == pytest.approx(line["calls"] * math, rel=1e-6)
    unpacks = next(e for e in lines if e["line"] == line["line"] and e["risc"] == "TRISC0")
    instructions, per_in0, per_in1, _, _ = matmul_block_terms(costs, *subblock)
    data = per_in0 * tile_bytes + per_in1 * tile_bytes
    assert unpack == max(instructions, data)
    # the unpack thread pays the call's instructions; the unpackers the data, and more only where the NoC and the
    # packer take its L1 banks (the kernel's only unpacks are its matmul calls)
    assert unpacks["calls"] == line["calls"]
    assert unpacks["busy"] == pytest.approx(line["calls"] * instructions, rel=1e-6)
    unpackers = sum(s["engine_busy"] for s in result.report["timing"]["programs"][0]["streams"]
                    if s["risc"] == "TRISC0")
    assert line["calls"] * data * (1 - 1e-6) <= unpackers <= line["calls"] * data * 2


def test_an_unpack_calls_instructions_hide_behind_the_previous_calls_data(tmp_path):
    """Back-to-back matmul calls cost the unpacker max(instructions, data), not their sum: the unpack thread prepares
    a call (tt-llk's two config contexts in flight) while the unpackers fetch the one before. A bfloat16 LoFi 4 x 2
    run with the whole K in one block (two runs of 16 calls per core, nothing else unpacked) is bound by the
    unpacker (10 tiles of data a call against 8 LoFi products): a call's fixed cost raised from the table's to just
    under its data moves the math span by little (the first call of each run is not hidden); raised to twice the
    data, every call costs that instead."""
    costs = device_costs("wormhole_b0")
    instructions, per_in0, per_in1, _, _ = matmul_block_terms(costs, 4, 2)
    data = (per_in0 + per_in1) * 2048
    base = costs["unpack_call_cycles"]
    tiles_cost = instructions - base          # the UNPACR address cycles of the call's tiles
    span = {}
    for name, call in (("table", base), ("below", data - tiles_cost - 10), ("above", 2 * data - tiles_cost)):
        result = _matmul(tmp_path, "wormhole_b0", 0, 0, (4, 2), {"unpack_call_cycles": call}, name, in0_block_w=16)
        span[name] = result.report["timing"]["trisc1_cycles"]
    calls = 2 * 16                            # per core: two 4 x 2 subblocks of a 4 x 4 block, 16 K tiles each
    assert span["below"] - span["table"] < 2 * data
    assert span["above"] - span["table"] == pytest.approx(calls * data, rel=0.15)


def _walked_links(width: int, height: int, noc: int, src: tuple, dst: tuple) -> list:
    """The route as the emulator's fabric takes it (NoC 0 right then down, NoC 1 up then left, on a torus), walked
    link by link here, independently of noc_links' memo."""
    (x, y), links = src, []
    step_x, step_y = (1, 1) if noc == 0 else (-1, -1)
    order = ("x", "y") if noc == 0 else ("y", "x")
    for axis in order:
        while (x, y)[0 if axis == "x" else 1] != dst[0 if axis == "x" else 1]:
            links.append((noc, x, y, 0 if axis == "x" else 1))
            if axis == "x":
                x = (x + step_x) % width
            else:
                y = (y + step_y) % height
    return links


def _walked_busiest_link(costs: dict, reads: list) -> float:
    """dram_read_link_cycles' answer by adding every route's bytes link by link, read by read, bank by bank."""
    width, height = (int(v) for v in costs["noc_grid"])
    banks = dram_bank_xys(costs)
    load: dict = {}
    for (cx, cy), nbytes, noc in reads:
        here = (int(costs["worker_noc_x"][cx]), int(costs["worker_noc_y"][cy]))
        for bank in banks:
            for link in _walked_links(width, height, noc, bank, here):
                load[link] = load.get(link, 0.0) + nbytes / len(banks)
    return max(load.values(), default=0.0) / float(costs["noc_bytes_per_cycle"])


@pytest.mark.parametrize("noc", [0, 1])
def test_a_routes_links_are_those_the_fabric_walks(noc):
    """noc_links (remembered by its arguments) on two torus sizes, every source to every destination: a memo that
    forgot the grid's size or the NoC would hand one route the other's links."""
    for width, height in ((5, 4), (4, 5)):
        for src in ((x, y) for x in range(width) for y in range(height)):
            for dst in ((x, y) for x in range(width) for y in range(height)):
                assert list(noc_links(width, height, noc, src, dst)) == _walked_links(width, height, noc, src, dst)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_the_busiest_read_link_is_the_sum_of_every_routes_bytes_in_order(arch):
    """dram_read_link_cycles (routes counted once per core, answers remembered by the device geometry and the reads)
    is exactly -- not approximately: the block chooser compares these -- the link-by-link sum, for random reads, the
    same reads again, and the same reads on a device whose banks or grid moved (a memo keyed by the reads alone
    would answer those with the first device's links)."""
    rng = np.random.default_rng(3)
    costs = device_costs(arch)
    cores = [(x, y) for x in range(len(costs["worker_noc_x"])) for y in range(len(costs["worker_noc_y"]))]
    moved_banks = {**costs, "dram_noc_xy": list(costs["dram_noc_xy"][2:]) + list(costs["dram_noc_xy"][:2])}
    wider = {**costs, "noc_grid": [int(costs["noc_grid"][0]) + 1, costs["noc_grid"][1]]}
    fewer_banks = {**costs, "dram_noc_xy": list(costs["dram_noc_xy"][:-2])}
    for trial in range(20):
        picked = rng.choice(len(cores), size=int(rng.integers(1, 40)), replace=False)
        reads = [(cores[i], float(rng.integers(1, 64)) * 2048 / 3, int(rng.integers(0, 2))) for i in picked]
        for device in (costs, moved_banks, wider, fewer_banks, costs):
            assert dram_read_link_cycles(device, reads) == _walked_busiest_link(device, reads)
    answers = {dram_read_link_cycles(d, reads) for d in (costs, moved_banks, wider, fewer_banks)}
    assert len(answers) > 1          # the devices differ where these reads go: the check above can tell them apart


SFPU_KERNEL = '''
import tilelang.language as T


@T.prim_func
def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
    with T.Kernel(2) as bx:
        x = T.alloc_fragment((32, 64), "float32")
        y = T.alloc_fragment((32, 64), "float32")
        T.copy(X[bx * 32, 0], x)
        for i, j in T.Parallel(32, 64):
            y[i, j] = T.exp(x[i, j])
        for i, j in T.Parallel(32, 64):
            y[i, j] = T.sqrt(y[i, j]) * x[i, j]
        T.copy(y, Y[bx * 32, 0])
'''


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_the_emulator_charges_sfpu_calls_what_the_cost_model_says(arch):
    """Every SFPU call line of a compiled kernel (an exp, a sqrt, a float binary multiply) costs the math thread
    cost_model.sfpu_call_cycles at registry.sfpu_call_instructions' count a call: the estimate TTTensorize balances
    the packer against is the emulator's charge."""
    from compiler import api, registry
    from compiler.cost_model import sfpu_call_cycles
    from schemas.target import TargetConfig

    target = TargetConfig(arch=arch)
    compiled = api.compile_source(SFPU_KERNEL, filename="sfpu.py", entry="main", target=target)
    outcome = api.emulate(compiled.artifacts, target=target, source=SFPU_KERNEL, filename="sfpu.py",
                          entry=compiled.entry, timing_only=True)
    costs = device_costs(arch)
    instructions = registry.sfpu_call_instructions(costs)
    source = compiled.artifacts["compute.cpp"].decode().splitlines()
    charged = {(e["line"]): e for e in outcome.report["timing"]["programs"][0]["lines"]
               if e["kernel"] == "compute.cpp" and e["risc"] == "TRISC1"}
    seen = set()
    for number, text in enumerate(source, 1):
        call = text.strip().split("(")[0]
        if call in instructions and number in charged:
            entry = charged[number]
            assert entry["busy"] == pytest.approx(entry["calls"] * sfpu_call_cycles(costs, instructions[call]),
                                                  rel=1e-5), (call, entry)
            seen.add(call)
    assert {"exp_tile", "sqrt_tile", "mul_binary_tile"} <= seen, seen
