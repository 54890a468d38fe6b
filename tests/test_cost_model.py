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
    assert products == 8 and per_in1 * costs["unpack_bytes_per_cycle"] == 2 and per_in0 * costs[
        "unpack_bytes_per_cycle"] == 8
    _, per_in0, per_in1, _, _ = matmul_block_terms(costs, 1, 8)          # ct >= rt: in0 reused
    assert per_in0 * costs["unpack_bytes_per_cycle"] == 1 and per_in1 * costs["unpack_bytes_per_cycle"] == 8


@pytest.mark.parametrize("arch, dtype, fidelity, subblock", [
    ("wormhole_b0", 0, 2, (4, 2)), ("wormhole_b0", 1, 0, (2, 4)), ("blackhole", 2, 4, (1, 4))])
def test_the_emulator_charges_matmul_calls_what_the_cost_model_says(tmp_path, arch, dtype, fidelity, subblock):
    cfg = MatmulConfig(512, 512, 512, (4, 4), in0_block_w=4, out_subblock_h=subblock[0], out_subblock_w=subblock[1],
                       per_core_m=4, per_core_n=4, packer_l1_acc=True, math_fidelity=fidelity, no_data=True,
                       dtype=dtype)
    src = tmp_path / "mm"
    src.mkdir()
    shutil.copy(PROGRAMS / "matmul_2d_mcast.cpp", src / "main.cpp")
    shutil.copy(NPY_UTIL, src / "npy_util.hpp")
    result = emulate.run_host_program(src / "main.cpp", {"cfg": cfg.cfg()}, tmp_path / "run", arch=arch,
                                      timing_only=True, timeout_s=300,
                                      env={"TT_METAL_HOME": str(sdk_headers.ensure_kernels())})
    lines = result.report["timing"]["programs"][0]["lines"]
    matmul = [entry for entry in lines if entry["kernel"] == "bmm_large_block_zm_fused_bias_activation.cpp"
              and entry["risc"] == "TRISC1" and entry["busy"] > 0]
    line = max(matmul, key=lambda e: e["busy"])     # the matmul_block call
    # what the unpacker fetches through its datum ports: a block format's 64 shared exponents (the rest of its 1088 /
    # 576-byte tile) come through a port of their own
    tile_bytes = {0: 2048, 1: 1024, 2: 512}[dtype]
    unpack, math = matmul_block_cycles(device_costs(arch), *subblock, tile_bytes, tile_bytes, FIDELITY[fidelity])
    assert line["busy"] == pytest.approx(line["calls"] * math, rel=1e-6)
    unpacks = next(e for e in lines if e["line"] == line["line"] and e["risc"] == "TRISC0")
    # the unpacker pays the model's cycles, and more only where the NoC and the packer take its L1 banks
    assert unpacks["calls"] == line["calls"]
    assert line["calls"] * unpack * (1 - 1e-6) <= unpacks["busy"] <= line["calls"] * unpack * 2
