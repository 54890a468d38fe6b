"""The GEMM's compute kernel: one matmul_block per K tile for a DST group that is a run of output tiles (instead of
a matmul_tiles per tile product), and the accumulator kept in L1 across K steps by the packer (L1 accumulation)
instead of being copied back into DST every step. Both verify against the reference."""
from __future__ import annotations

import json
import re

import pytest

from compiler import api
from schemas.target import TargetConfig

from .conftest import ROOT

GEMM = (ROOT / "examples" / "tilelang" / "gemm.py").read_text()


def assert_verifies(compiled, source: str, filename: str, params: dict, target: TargetConfig):
    """The compiled kernel, run on the emulator, matches the NumPy reference."""
    outcome = api.emulate(compiled.artifacts, target=target, source=source, filename=filename, entry=compiled.entry,
                          params=params)
    assert outcome.passed, outcome.verification.render()
    return outcome


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
    # the first K step packs its sums as they are (over the zero version), the later ones add to them
    assert "pack_reconfig_l1_acc((k != 0 ? 1 : 0))" in k_loop and "pack_reconfig_l1_acc(0)" in k_loop
    assert "copy_tile(cb_C_local" not in k_loop  # the partial sums are not reloaded into DST each K step
    # ... so no zeros are packed before the K loop (the zero version's pages are only reserved and pushed), and
    # T.clear of the fresh accumulator is no code at all
    before = compute[compute.index("for (uint32_t i = 0;"):compute.index("for (uint32_t k = 0;")]
    assert "pack_tile" not in before and "tile_regs_acquire" not in before
    # a group waits for its own pages of the accumulator; the K step does not wait for the whole of it (the
    # packer's last group would stall the next step's math): the whole-buffer wait comes after the loop
    n_tiles = int(re.search(r"// C_local: (\d+) x", compute).group(1))
    assert f"cb_wait_front(cb_C_local, {n_tiles});" not in k_loop
    assert re.search(r"tile_regs_acquire\(\);\s*cb_wait_front\(cb_C_local, \d+\);\s*cb_pop_front\(cb_C_local", k_loop)
    # the last K step packs the sums into the output CB, which shares the accumulator's L1 (C is float32 like
    # C_local): no copy of C_local through DST, the writer takes the result group by group
    assert "copy_tile(cb_C_local" not in compute and "cb_wait_front(cb_C_local, {n_tiles});" not in compute
    steps = int(re.search(r"for \(uint32_t k = 0; k < (\d+);", compute).group(1))
    last = compute[compute.index("cb_pop_front(cb_B_shared"):]
    assert "matmul_block(" in last and re.search(r"pack_tile\(\w+, cb_C, \w+\)", last) and "cb_push_back(cb_C," in last
    assert f"cb_reserve_back(cb_C, {n_tiles});" in before and f"cb_pop_front(cb_C_local, {n_tiles});" not in compute
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    cbs = {cb["name"]: cb for cb in plan["circular_buffers"]}
    assert cbs["cb_C"]["shares_with"] == cbs["cb_C_local"]["index"] and cbs["cb_C"]["total_bytes"] == 0
    total = int(re.search(r"\((\d+) steps", " ".join(plan["schedule"]["explain"])).group(1))
    assert cbs["cb_C"]["num_pages"] == n_tiles and steps == total - 1   # the last step is peeled off the loop
    main = compiled.artifacts["main.cpp"].decode()
    assert re.search(r"CircularBufferConfig\(\d+, \{\{tt::CBIndex::c_%d, [^}]*\}, \{tt::CBIndex::c_%d,"
                     % (cbs["cb_C_local"]["index"], cbs["cb_C"]["index"]), main)
    # configured once, before the block loop: nothing in the kernel reconfigures the engines, and the K loop's init
    # and the peeled last step's configure alike (TTHoistInits hoists them as one)
    blocks_loop = compute[compute.index("for (uint32_t i = 0;"):]
    assert compute.count("matmul_block_init") == 1 and "matmul_block_init" not in blocks_loop
    outcome = assert_verifies(compiled, GEMM, "gemm.py", params, TargetConfig(arch=arch))
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
    assert_verifies(compiled, source, "gemm.py", params, TargetConfig())


def test_a_buffer_read_before_the_k_loop_keeps_its_zeros():
    """The first-step overwrite is only for an accumulator nothing reads first: C_local + 1 before the loop
    needs the packed zero version, and every K step adds (checked against the reference, which adds 1)."""
    source = GEMM.replace("T.clear(C_local)\n",
                          "T.clear(C_local)\n            for i, j in T.Parallel(block_M, block_N):\n"
                          "                C_local[i, j] = C_local[i, j] + 1.0\n")
    assert source != GEMM
    params = {"M": 256, "N": 256, "K": 512, "dtype": "bfloat16"}
    compiled = api.compile_source(source, filename="gemm.py", entry="matmul", target=TargetConfig(), params=params)
    compute = compiled.artifacts["compute.cpp"].decode()
    assert "(k != 0 ? 1 : 0)" not in compute
    assert_verifies(compiled, source, "gemm.py", params, TargetConfig())


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_an_accumulator_that_fits_dst_is_one_matmul_block_per_k_tile(arch):
    """A bf16 accumulator of 4 x 4 tiles stays in DST over the whole K loop (a flat window): one matmul_block per
    K tile for the whole block, not a matmul_tiles and an init per output tile."""
    params = {"M": 1024, "N": 1024, "K": 1024, "dtype": "bfloat16", "accum_dtype": "bfloat16"}
    compiled = compile_gemm(arch, **params)
    compute = compiled.artifacts["compute.cpp"].decode()
    assert "matmul_tiles" not in compute and "pack_reconfig_l1_acc" not in compute
    blocks = re.findall(r"matmul_block\((?:[^()]|\([^()]*\))*\)", compute)
    ct, rt, kt = (int(x) for x in blocks[0].rstrip(")").split(", ")[-3:])
    assert len(blocks) == 1 and ct * rt >= 4
    assert_verifies(compiled, GEMM, "gemm.py", params, TargetConfig(arch=arch))


def test_an_output_in_another_format_is_packed_by_the_last_k_step():
    """TileLang's own GEMM writes C in the input dtype (bf16) from a float32 accumulator: the packer cannot add
    float32 sums into bf16 pages, so the last K step loads the sums into DST (one copy_init per group), adds its
    products and packs the bf16 output as it goes, as ttnn's matmul reloads its partials; no copy pass after."""
    source = (ROOT / "examples" / "tilelang" / "matmul.py").read_text()
    params = {"A": "bfloat16[512,256]", "B": "bfloat16[256,512]", "dtype": "bfloat16"}
    target = TargetConfig(core_grid=(2, 2))
    compiled = api.compile_source(source, filename="matmul.py", entry="matmul", target=target, params=params)
    compute = compiled.artifacts["compute.cpp"].decode()
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    assert all(cb.get("shares_with") is None for cb in plan["circular_buffers"])
    last = compute[compute.index("cb_pop_front(cb_B_shared"):]
    reload = last.index("copy_tile(cb_C_local")
    assert last.count("copy_init(cb_C_local)") == 1 and last.index("copy_init(cb_C_local)") < reload
    assert reload < last.index("matmul_block(") < last.index("pack_tile(") and "cb_push_back(cb_C," in last
    assert "pack_reconfig_l1_acc(1)" not in last and "copy_tile(cb_C_local" not in last[last.index("pack_tile("):]
    assert_verifies(compiled, source, "matmul.py", params, target)


@pytest.mark.parametrize("k", [32, 512])
def test_blocks_that_follow_each_other_on_a_core_keep_their_results(k):
    """One core computing 16 blocks in turn, its output CB sharing the accumulator's L1: the next block's first K
    step must not overwrite a result the writer has not yet sent (the compute reserves the whole output block
    first). A one-step K loop is the peeled step alone (it packs over the zero version)."""
    params = {"M": 512, "N": 512, "K": k, "block_M": 128, "block_N": 128, "dtype": "bfloat16"}  # 16 fp32 tiles
    target = TargetConfig(core_grid=(1, 1), blocking="as_written")
    compiled = api.compile_source(GEMM, filename="gemm.py", entry="matmul", target=target, params=params)
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    assert plan["work"]["cores"][0]["count"] == 16
    assert any(cb.get("shares_with") is not None for cb in plan["circular_buffers"])
    assert_verifies(compiled, GEMM, "gemm.py", params, target)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("accum", ["float32", "bfloat16"])
def test_the_fused_kernels_pass_the_real_header_check(arch, accum):
    """The peeled last step, the output CB over the accumulator's L1 (bf16 sums) and the reload of float32 sums
    into DST (bf16 output) compile against the ttnn 0.81.1 headers as the JIT wraps them."""
    from compiler.toolchain.header_check import check_bundle
    source = (ROOT / "examples" / "tilelang" / "matmul.py").read_text()
    params = {"A": "bfloat16[1024,1024]", "B": "bfloat16[1024,1024]", "dtype": "bfloat16", "accum_dtype": accum}
    target = TargetConfig(arch=arch, core_grid=(2, 2))
    compiled = api.compile_source(source, filename="matmul.py", entry="matmul", target=target, params=params)
    compute = compiled.artifacts["compute.cpp"].decode()
    assert "copy_tile(cb_C_local" not in compute[compute.rindex("pack_tile("):]   # fused: no copy pass after
    report = check_bundle(compiled.artifacts)
    assert report.passed, report.render()


def test_block_shapes_leave_the_float32_accumulator_whole_matmul_calls():
    """448 x 320 on 2 x 2 cores splits into 7 x 5-tile blocks: a float32 accumulator's groups (4 DST tiles) could
    only be single tiles, one matmul call per tile product. The chooser's cost of the matrix engine's calls picks
    7 x 6 (runs of 3) instead; the output ring then takes pushes of 3 and the writer's batches alike."""
    source = (ROOT / "examples" / "tilelang" / "matmul.py").read_text()
    params = {"A": "bfloat16[448,256]", "B": "bfloat16[256,320]", "dtype": "bfloat16"}
    target = TargetConfig(arch="blackhole", core_grid=(2, 2))
    compiled = api.compile_source(source, filename="matmul.py", entry="matmul", target=target, params=params)
    compute = compiled.artifacts["compute.cpp"].decode()
    assert "matmul_tiles" not in compute
    ct, rt = (int(x) for x in re.search(r"matmul_block\((?:[^()]|\([^()]*\))*\)", compute).group(0)
              .rstrip(")").split(", ")[-3:-1])
    assert ct * rt >= 2
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    out = next(cb for cb in plan["circular_buffers"] if cb["name"] == "cb_C")
    assert out["num_pages"] % (ct * rt) == 0
    assert_verifies(compiled, source, "matmul.py", params, target)
