"""One cost model for the matmul LLK calls (compiler/cost_model.py): the block chooser evaluates it, and the emulator's
timing model charges exactly what it says (TTEMU_COSTS' `matmul_block` table)."""
from __future__ import annotations

import shutil

import pytest

from compiler.cost_model import MAX_DST_TILES, matmul_block_cycles, matmul_block_table, matmul_block_terms
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
