"""The GEMM's compute kernel: one matmul_block per K tile for a DST group that is a run of output tiles (instead of
a matmul_tiles per tile product), and the accumulator kept in L1 across K steps by the packer (L1 accumulation)
instead of being copied back into DST every step. Both verify against the reference."""
from __future__ import annotations

import re

import pytest

from compiler import api
from schemas.target import TargetConfig

from .conftest import ROOT

GEMM = (ROOT / "examples" / "tilelang" / "gemm.py").read_text()


def compile_gemm(arch: str, **params):
    return api.compile_source(GEMM, filename="gemm.py", entry="matmul", target=TargetConfig(arch=arch), params=params)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_k_steps_accumulate_in_l1_with_block_matmuls(arch):
    params = {"M": 1024, "N": 1024, "K": 256, "dtype": "bfloat16"}  # 128 x 128 per core: grouped DST windows
    compiled = compile_gemm(arch, **params)
    compute = compiled.artifacts["compute.cpp"].decode()
    k_loop = compute[compute.index("for (uint32_t k = 0;"):]
    k_loop = k_loop[:k_loop.index("cb_pop_front(cb_B_shared")]
    blocks = re.findall(r"matmul_block\((?:[^()]|\([^()]*\))*\)", k_loop)
    assert blocks and "matmul_tiles" not in k_loop
    ct, rt, kt = (int(x) for x in blocks[0].rstrip(")").split(", ")[-3:])
    assert ct * rt >= 2 and kt >= 1
    assert "pack_reconfig_l1_acc(1)" in k_loop and "pack_reconfig_l1_acc(0)" in k_loop
    assert "copy_tile(cb_C_local" not in k_loop  # the partial sums are not reloaded into DST each K step
    # configured once per K step, before the groups (nothing in the group loop reconfigures the engines)
    assert k_loop.count("matmul_block_init") == 1 and k_loop.index("matmul_block_init") < k_loop.index("tile_regs_acquire")
    outcome = api.emulate(compiled.artifacts, target=TargetConfig(arch=arch), source=GEMM, filename="gemm.py",
                          entry=compiled.entry, params=params)
    assert outcome.passed, outcome.verification.render()
    # every pack lands where the compiler meant it (pack_tile's third argument, checked by the emulator)
    assert not outcome.report.get("warnings"), outcome.report["warnings"][:2]


def test_an_accumulator_the_window_also_reads_is_loaded_into_dst():
    """C_local scaled after the K loop: the accumulation itself may still use L1, but the window that reads
    C_local's value (the scale) must load it -- the generated kernel verifies either way."""
    source = GEMM.replace("T.copy(C_local, C[by * block_M, bx * block_N])",
                          "for i, j in T.Parallel(block_M, block_N):\n                C_local[i, j] = C_local[i, j] * 2.0\n"
                          "            T.copy(C_local, C[by * block_M, bx * block_N])")
    assert source != GEMM
    params = {"M": 128, "N": 128, "K": 512, "dtype": "bfloat16"}
    compiled = api.compile_source(source, filename="gemm.py", entry="matmul", target=TargetConfig(), params=params)
    outcome = api.emulate(compiled.artifacts, target=TargetConfig(), source=source, filename="gemm.py",
                          entry=compiled.entry, params=params)
    assert outcome.passed, outcome.verification.render()
