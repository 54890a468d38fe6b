"""ttnn 0.81.1's own device kernels, read unmodified from the wheel (as `tilefarm sdk fetch-headers` extracts them),
run on the emulator by host programs of ours that reproduce ttnn's program factories (tests/emulator/ttnn_programs),
checked against NumPy."""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from compiler.toolchain import emulate, sdk_headers

PROGRAMS = Path(__file__).parent / "ttnn_programs"
NPY_UTIL = Path(__file__).parent / "bundles" / "common" / "npy_util.hpp"


@pytest.fixture(scope="session")
def ttnn_home() -> Path:
    """The root holding ttnn/cpp/ttnn/operations/**/kernels (TT_METAL_HOME for the emulator's JIT)."""
    return sdk_headers.ensure_kernels()


@pytest.fixture
def run_ttnn(tmp_path, ttnn_home):
    counter = iter(range(1000))

    def go(program: str, inputs: dict[str, np.ndarray], **kwargs) -> emulate.EmulationResult:
        n = next(counter)
        src = tmp_path / f"{program}-{n}"
        src.mkdir()
        shutil.copy(PROGRAMS / f"{program}.cpp", src / "main.cpp")
        shutil.copy(NPY_UTIL, src / "npy_util.hpp")
        env = {"TT_METAL_HOME": str(ttnn_home), **kwargs.pop("env", {})}
        return emulate.run_host_program(src / "main.cpp", inputs, tmp_path / f"work-{n}", env=env, timeout_s=300,
                                        **kwargs)

    return go


def bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 (nearest even), as the host program's packing does. In place on a copy, in uint32:
    the sum wraps only for NaN patterns, and its low 32 bits are the wider sum's (the rounding model calls this on
    whole outputs once per K tile)."""
    u = np.array(x, dtype=np.float32).view(np.uint32)
    u += 0x7FFF + ((u >> 16) & 1)
    u &= 0xFFFF0000
    return u.view(np.float32)


def tile_matmul_model(a: np.ndarray, b: np.ndarray, in0_block_w: int, *, packer_l1_acc: bool,
                      fp32_dest: bool) -> np.ndarray:
    """The result's rounding as the emulator documents it for this program (README "Numerics"): every 32-deep tile
    product is summed in fp32 and added to DST, which holds bf16 unless fp32_dest_acc_en; partials spill to and
    reload from a CB of DST's format; with packer L1 accumulation each K block starts from a zeroed DST and the packer
    adds it to the partials in L1 (bf16), except the last block, which reloads them. Output rounded to bf16."""
    rnd = (lambda x: x) if fp32_dest else bf16
    kt = a.shape[1] // 32
    blocks = [range(i, i + in0_block_w) for i in range(0, kt, in0_block_w)]

    def block_sum(start, ks):
        acc = start
        for k in ks:
            acc = rnd(acc + (a[:, k * 32:(k + 1) * 32] @ b[k * 32:(k + 1) * 32, :]).astype(np.float32, copy=False))
        return acc

    zero = np.zeros((a.shape[0], b.shape[1]), np.float32)
    if not packer_l1_acc or len(blocks) <= 2:
        return bf16(block_sum(zero, [k for blk in blocks for k in blk]))
    partial = block_sum(zero, blocks[0])
    for blk in blocks[1:-1]:
        partial = bf16(partial + block_sum(zero, blk))
    return bf16(block_sum(partial, blocks[-1]))


# ------------------------------------------------------------------------------------------- 2-D multicast matmul
@dataclass
class MatmulConfig:
    """A MatmulMultiCoreReuseMultiCastProgramConfig plus the compute kernel config, as a ttnn user passes them."""
    m: int
    k: int
    n: int
    grid: tuple[int, int]            # compute_with_storage_grid_size (x, y)
    in0_block_w: int
    out_subblock_h: int
    out_subblock_w: int
    per_core_m: int
    per_core_n: int
    fp32_dest_acc_en: bool = False
    packer_l1_acc: bool = False
    math_fidelity: int = 4           # MathFidelity enumerator (LoFi 0, HiFi2 2, HiFi3 3, HiFi4 4)
    math_approx_mode: bool = False
    pad_value: float = 0.0           # what the tile padding of A and B holds
    fault: int = 0                   # host program faults for the diagnostics tests (see matmul_2d_mcast.cpp)
    out_block_h: int = 0             # 0: per_core_m (the program config's out_block_h / out_block_w)
    out_block_w: int = 0
    no_data: bool = False            # run on unwritten buffers, read nothing back (timing runs of large shapes)
    dtype: int = 0                   # inputs' and output's format: 0 bfloat16, 1 bfloat8_b, 2 bfloat4_b (no_data)
    in0_sharded: bool = False        # A block-sharded in L1 over the grid (each core multicasts its K slices)
    out_sharded: bool = False        # C block-sharded in L1 (packed in place, nothing written to DRAM)

    def cfg(self) -> np.ndarray:
        return np.array([[self.m, self.k, self.n, *self.grid, self.in0_block_w, self.out_subblock_h, self.out_subblock_w,
                          self.per_core_m, self.per_core_n, self.fp32_dest_acc_en, self.packer_l1_acc, self.math_fidelity,
                          self.math_approx_mode, self.pad_value, self.fault, self.out_block_h, self.out_block_w,
                          self.no_data, self.dtype, self.in0_sharded, self.out_sharded]], np.float32)


MATMUL_CONFIGS = {
    # 16x16 tiles on 4x4 cores, 8 K blocks, the largest subblock a 16-bit DST holds
    "512^3-4x4": MatmulConfig(512, 512, 512, (4, 4), in0_block_w=2, out_subblock_h=2, out_subblock_w=4, per_core_m=4,
                              per_core_n=4),
    # the tech report's shape family: 8x8 cores, packer L1 accumulation across 8 K blocks, HiFi2
    "1024^3-8x8-l1acc": MatmulConfig(1024, 1024, 1024, (8, 8), in0_block_w=4, out_subblock_h=2, out_subblock_w=4,
                                     per_core_m=4, per_core_n=4, packer_l1_acc=True, math_fidelity=2),
    # non-square and padded: 11 x 10 x 15 tiles (K = 300: 12 valid columns in the last K tile, the padding holds
    # 1000.0 that the in0 reader must zero), a partial last row and column of blocks, fp32 DST (4-tile subblocks),
    # separate partials CB in fp32
    "352x300x480-4x3-padded": MatmulConfig(352, 300, 480, (4, 3), in0_block_w=2, out_subblock_h=2, out_subblock_w=2,
                                           per_core_m=4, per_core_n=4, fp32_dest_acc_en=True, math_approx_mode=True,
                                           pad_value=1000.0),
}


@pytest.mark.parametrize("name", list(MATMUL_CONFIGS))
def test_ttnn_2d_mcast_matmul_matches_numpy(run_ttnn, name):
    cfg = MATMUL_CONFIGS[name]
    rng = np.random.default_rng(7)
    a = bf16(rng.standard_normal((cfg.m, cfg.k)).astype(np.float32))
    b = bf16(rng.standard_normal((cfg.k, cfg.n)).astype(np.float32))
    result = run_ttnn("matmul_2d_mcast", {"a": a, "b": b, "cfg": cfg.cfg()})
    c = result.outputs["c"]
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert c.shape == exact.shape
    # against the exact product: within the bf16 accumulation error (a misplaced block errs by O(sqrt(K)))
    assert np.abs(c - exact).max() < 0.02 * np.abs(exact).max()
    # against the rounding model: equal up to a few bf16 ulps (fp32 summation order differs from NumPy's)
    kp = -(-cfg.k // 32) * 32
    a_pad = np.zeros((cfg.m, kp), np.float32)
    a_pad[:, :cfg.k] = a
    b_pad = np.zeros((kp, cfg.n), np.float32)
    b_pad[:cfg.k] = b
    model = tile_matmul_model(a_pad, b_pad, cfg.in0_block_w, packer_l1_acc=cfg.packer_l1_acc and kp // 32 // cfg.in0_block_w > 2,
                              fp32_dest=cfg.fp32_dest_acc_en)
    # (a bf16 ulp of the value, at least of 1.0: near-cancelled sums carry fp32 summation-order noise)
    ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(model), 1.0))) - 7)
    assert (np.abs(c - model) <= 4 * ulp).mean() > 0.999
    assert np.abs(c - model).max() <= 0.01 * np.abs(exact).max()

    # the data moved the way the 2-D multicast program moves it: every A block read once from DRAM by the left
    # column and multicast along its row, every B block read once by the top row and multicast down its column
    mt, kt, nt = -(-cfg.m // 32), -(-cfg.k // 32), -(-cfg.n // 32)
    blocks_y, blocks_x = -(-mt // cfg.per_core_m), -(-nt // cfg.per_core_n)
    buffers = result.report["buffers"]
    a_read = sum(c["dram"].get(str(buffers[0]["id"]), {}).get("tiles_read", 0) for c in result.report["cores"])
    b_read = sum(c["dram"].get(str(buffers[1]["id"]), {}).get("tiles_read", 0) for c in result.report["cores"])
    assert a_read == mt * kt          # A: each valid tile exactly once (padded block rows are skipped)
    assert b_read == kt * nt          # B: likewise
    num_k_blocks = kt // cfg.in0_block_w
    # one data multicast and one flag multicast per K block per sender (left column and top row)
    expected_mcasts = 2 * num_k_blocks * ((blocks_y if blocks_x > 1 else 0) + (blocks_x if blocks_y > 1 else 0))
    assert result.report["totals"]["noc_multicasts"] == expected_mcasts


@pytest.mark.parametrize("arch, grid, per_core, in0_block_w", [
    ("wormhole_b0", (4, 4), (2, 2), 2),    # A's shard is 2 K blocks wide: each core sends two of the row's 8 K steps
    ("blackhole", (3, 2), (2, 3), 1),
], ids=["wh-4x4", "bh-3x2"])
def test_ttnn_matmul_with_a_and_c_sharded_in_l1_matches_numpy(run_ttnn, arch, grid, per_core, in0_block_w):
    """The factory's in0 block-sharded / output block-sharded path (GEMM_FLOPS' L1 rows): every core multicasts its own
    K slices of A along its row from its shard (reader_bmm_tile_layout_in0_sender_receiver_padding_block_sharded) and
    packs its block of C in place; neither touches DRAM."""
    gx, gy = grid
    m, n, k = per_core[0] * gy * 32, per_core[1] * gx * 32, 4 * gx * 32
    cfg = MatmulConfig(m, k, n, grid, in0_block_w=in0_block_w, out_subblock_h=1, out_subblock_w=per_core[1],
                       per_core_m=per_core[0], per_core_n=per_core[1], packer_l1_acc=True, math_fidelity=4,
                       in0_sharded=True, out_sharded=True)
    rng = np.random.default_rng(9)
    a = bf16(rng.standard_normal((m, k)).astype(np.float32))
    b = bf16(rng.standard_normal((k, n)).astype(np.float32))
    result = run_ttnn("matmul_2d_mcast", {"a": a, "b": b, "cfg": cfg.cfg()}, arch=arch)
    model = tile_matmul_model(a, b, in0_block_w, packer_l1_acc=k // 32 // in0_block_w > 2, fp32_dest=False)
    ulp = np.exp2(np.floor(np.log2(np.maximum(np.abs(model), 1.0))) - 7)
    assert (np.abs(result.outputs["c"] - model) <= 4 * ulp).mean() > 0.999
    buffers = result.report["buffers"]
    assert [(x["kind"], x["sharded"]) for x in buffers] == [("l1", True), ("dram", False), ("l1", True)]
    assert buffers[0]["bytes_read"] == 0 and buffers[2]["bytes_written"] == 0   # no DRAM traffic for A and C
    assert buffers[1]["bytes_read"] == k * n * 2                                # B read once, from DRAM
    # a row multicasts each K block once (its sender's shard slice) to the whole row, itself included
    assert result.report["totals"]["noc_multicasts"] >= gy * (k // 32 // in0_block_w)


def kernel_lines(ttnn_home: Path, kernel: str, text: str) -> list[int]:
    """The lines of ttnn's kernel source that contain `text` (the call a report must point at)."""
    path = ttnn_home / "ttnn/cpp/ttnn/operations/matmul/device/kernels" / kernel
    return [i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line]


def test_ttnn_matmul_semaphore_count_mismatch_is_reported_as_deadlock(run_ttnn, ttnn_home):
    # the in0 senders wait for one more receiver than exists: ttnn's own kernel blocks in Semaphore::wait
    cfg = MatmulConfig(128, 128, 128, (2, 2), in0_block_w=2, out_subblock_h=2, out_subblock_w=2, per_core_m=2,
                       per_core_n=2, fault=1)
    a = np.ones((128, 128), np.float32)
    with pytest.raises(emulate.EmulationError) as info:
        run_ttnn("matmul_2d_mcast", {"a": a, "b": a, "cfg": cfg.cfg()}, env={"TTEMU_DEADLOCK_MS": "300"})
    err = info.value
    assert err.kind == "deadlock", err.message
    lines = kernel_lines(ttnn_home, "dataflow/reader_bmm_tile_layout_in0_sender_padding.cpp",
                         "sender_sem.wait(in0_mcast_num_dests);")
    assert ("core (0,0) reader kernel 'reader_bmm_tile_layout_in0_sender_padding.cpp' [RISCV_1]: blocked in "
            "noc_semaphore_wait(") in err.message
    assert any(f", 2) at reader_bmm_tile_layout_in0_sender_padding.cpp:{line}\n" in err.message for line in lines)
    assert "holds 1; the kernel waits for == 2" in err.message


def test_ttnn_matmul_unswapped_noc1_multicast_is_reported(run_ttnn, ttnn_home):
    cfg = MatmulConfig(128, 128, 192, (3, 2), in0_block_w=2, out_subblock_h=2, out_subblock_w=2, per_core_m=2,
                       per_core_n=2, fault=2)
    a = np.ones((128, 128), np.float32)
    b = np.ones((128, 192), np.float32)
    with pytest.raises(emulate.EmulationError) as info:
        run_ttnn("matmul_2d_mcast", {"a": a, "b": b, "cfg": cfg.cfg()}, env={"TTEMU_DEADLOCK_MS": "300"})
    err = info.value
    assert err.kind == "noc-multicast", err.message
    lines = kernel_lines(ttnn_home, "dataflow/reader_bmm_tile_layout_in0_sender_padding.cpp", "noc.async_write_multicast(")
    assert any(f"reader_bmm_tile_layout_in0_sender_padding.cpp:{line}: Noc::async_write_multicast(" in err.message
               for line in lines)
    assert "on NoC 1" in err.message and "swap start and end" in err.message


# ------------------------------------------------------------------------------------------- element-wise binary
@pytest.mark.parametrize("op, fused_relu, shape, grid, layout", [
    ("add", False, (256, 512), (8, 8), 0),      # interleaved DRAM: 128 tiles, two per core on all 64 cores
    ("sub", True, (160, 224), (4, 3), 0),       # 35 tiles on 12 cores (11 x 3 + 1 x 2), packer ReLU
    ("mul", False, (96, 320), (8, 8), 0),       # 30 tiles: a partial row of cores
    ("add", False, (768, 64), (4, 3), 2),       # L1 height-sharded: 2 x 2 tiles per core, CBs on the shards
    ("mul", True, (64, 512), (4, 2), 3),        # L1 width-sharded: 2 x 2 tiles per core
    ("sub", False, (192, 256), (4, 3), 4),      # L1 block-sharded: 2 x 2 tiles per core
], ids=["add-8x8", "sub-relu-4x3", "mul-8x8", "add-height-sharded", "mul-relu-width-sharded", "sub-block-sharded"])
def test_ttnn_eltwise_binary_matches_numpy(run_ttnn, op, fused_relu, shape, grid, layout):
    rng = np.random.default_rng(3)
    a = bf16(rng.standard_normal(shape).astype(np.float32))
    b = bf16(rng.standard_normal(shape).astype(np.float32))
    code = {"add": 0, "sub": 1, "mul": 2}[op]
    cfg = np.array([[*shape, code, *grid, int(fused_relu), layout]], np.float32)
    result = run_ttnn("eltwise_binary", {"a": a, "b": b, "cfg": cfg})
    c = result.outputs["c"]
    buffers = result.report["buffers"]
    assert all((b["kind"], b["sharded"]) == (("l1", True) if layout else ("dram", False)) for b in buffers)
    if layout:  # all traffic stays in L1: no DRAM reads or writes at all
        assert all(b["bytes_read"] == b["bytes_written"] == 0 for b in buffers)
    ref = {"add": a + b, "sub": a - b, "mul": a * b}[op]
    if fused_relu:
        ref = np.maximum(ref, 0)
    # one fp32 operation rounded once to bf16 (DST) and packed as bf16: exact
    np.testing.assert_array_equal(c, bf16(ref))


# ------------------------------------------------------------------------------------------- softmax (Metal 2.0)
def softmax_rows(x: np.ndarray) -> np.ndarray:
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("shape, ht, grid, numeric_stable, fp32_dest, blk", [
    ((64, 256), 2, (2, 2), True, False, 0),     # blk 8 = Wt: one block per row, intermediates bf16
    ((256, 512), 4, (8, 8), True, True, 0),     # the whole grid (8 rows on 64 cores: idle cores get zeros), fp32 DST
    ((96, 320), 3, (2, 2), True, False, 4),     # Wt 10, blk 4: partial blocks; the kernels realign CBs with pad tiles
    ((128, 320), 2, (4, 2), False, True, 3),    # without the max subtraction, blk 3 of Wt 10
], ids=["stable-2x2", "stable-fp32-8x8", "stable-partial-blocks", "plain-fp32-partial-blocks"])
def test_ttnn_softmax_metal2_kernels_match_numpy(run_ttnn, shape, ht, grid, numeric_stable, fp32_dest, blk):
    """ttnn 0.81.1's attention softmax kernels: Metal 2.0 named arguments (args::, dfb::, tensor::) and ttnn's compute
    kernel library (reduce helpers, eltwise chains) on the emulator, unmodified."""
    rng = np.random.default_rng(11)
    x = bf16(3 * rng.standard_normal(shape).astype(np.float32))
    cfg = np.array([[*shape, ht, *grid, int(numeric_stable), int(fp32_dest), blk, 0]], np.float32)
    result = run_ttnn("softmax", {"x": x, "cfg": cfg})
    y = result.outputs["y"]
    exact = softmax_rows(x)
    # bf16 output (rounding 2^-9 relative) of exp, 1/sum and the product, each rounded to bf16 in DST and the
    # intermediate CBs unless fp32_dest_acc_en: a few roundings of values at most 1
    assert np.abs(y - exact).max() <= (0.005 if fp32_dest else 0.02)
    assert np.abs(y.sum(axis=1) - 1).max() <= (0.005 if fp32_dest else 0.02)
    # the data moved as the program moves it: every input tile read from DRAM once, every output tile written once
    tiles = shape[0] * shape[1] // 1024
    buffers = result.report["buffers"]
    assert [b["bytes_read"] for b in buffers] == [tiles * 2048, 0]
    assert [b["bytes_written"] for b in buffers] == [0, tiles * 2048]


def test_ttnn_softmax_with_its_default_approximate_exp(run_ttnn):
    """ttnn::softmax turns math_approx_mode on by default (EXP_APPROX=1: the LLK's approximate exp): the program's
    optional tenth cfg value. The outputs differ from the precise kernel's and stay within the approximate exp's
    error (a few percent of each probability, normalized by the row's own sum)."""
    rng = np.random.default_rng(12)
    x = bf16(3 * rng.standard_normal((64, 256)).astype(np.float32))
    precise, approx = (run_ttnn("softmax", {"x": x, "cfg": np.array([[64, 256, 2, 2, 2, 1, 0, 0, 0, a]], np.float32)})
                       .outputs["y"] for a in (0, 1))
    exact = softmax_rows(x)
    assert not np.array_equal(precise, approx)
    assert np.abs(approx - exact).max() > np.abs(precise - exact).max()
    assert (np.abs(approx - exact) <= 0.07 * exact + 0.004).all()
    assert np.abs(approx.sum(axis=1) - 1).max() <= 0.02


def test_ttnn_softmax_missing_named_arg_is_a_host_error_naming_it(run_ttnn):
    x = np.zeros((64, 256), np.float32)
    cfg = np.array([[64, 256, 2, 2, 2, 1, 0, 0, 1]], np.float32)
    with pytest.raises(emulate.EmulationError) as info:
        run_ttnn("softmax", {"x": x, "cfg": cfg})
    assert info.value.kind == "host-api"
    assert "SetNamedRuntimeArgs: kernel 'softmax.cpp' expects the argument 'start_ht', which was not given" in \
        info.value.message


# ------------------------------------------------------------------------------------ layer norm / RMS norm (Metal 2.0)
@pytest.mark.parametrize("arch, shape, grid, rms, fp32_dest", [
    ("wormhole_b0", (64, 256), (2, 2), False, True),    # one tile row per core, two cores idle (no kernels there)
    ("blackhole", (96, 256), (2, 1), False, False),     # three tile rows on two cores, bf16 intermediates
    ("wormhole_b0", (64, 384), (1, 1), True, False),    # RMS norm, Wt 12 in blocks of 6 (bf16 intermediates: 8 max)
    ("blackhole", (64, 256), (2, 2), True, True),       # RMS norm, fp32 DST
], ids=["layernorm-wh-fp32", "layernorm-bh-bf16-uneven", "rmsnorm-wh-bf16", "rmsnorm-bh-fp32"])
def test_ttnn_layernorm_metal2_kernels_match_numpy(run_ttnn, arch, shape, grid, rms, fp32_dest):
    """ttnn 0.81.1's interleaved layer norm / RMS norm kernels (reader_unary_interleaved_ln, the two-pass
    compute/layernorm.cpp, gamma and beta fused) on the emulator, unmodified, against float64."""
    rng = np.random.default_rng(5)
    x = bf16(rng.standard_normal(shape).astype(np.float32) + 0.5)
    gamma, beta = (bf16(rng.standard_normal((1, shape[1])).astype(np.float32)) for _ in range(2))
    eps = 1e-5
    cfg = np.array([[*shape, *grid, int(rms), int(fp32_dest), 1, 1, eps]], np.float32)
    result = run_ttnn("layernorm", {"x": x, "gamma": gamma, "beta": beta, "cfg": cfg}, arch=arch)
    y = result.outputs["y"]
    x64 = x.astype(np.float64)
    if rms:
        exact = x64 / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + eps) * gamma
    else:
        exact = (x64 - x64.mean(axis=1, keepdims=True)) / np.sqrt(x64.var(axis=1, keepdims=True) + eps) * gamma + beta
    # bf16 output (2^-9 relative); with bf16 intermediates each of x - E[x], its square, the variance, rsqrt and the
    # two products is rounded to bf16 too: a handful of 2^-9 roundings, relative to the values (up to ~4)
    tol = 0.008 if fp32_dest else 0.03
    assert np.abs(y - exact).max() <= tol * (np.abs(exact).max() + 1)
    assert np.abs(y - exact).mean() <= tol / 4
    # the data moved as the program moves it: X read once, gamma (and beta) read by every core with work, Y written
    tiles, wt = shape[0] * shape[1] // 1024, shape[1] // 32
    cores = min(shape[0] // 32, grid[0] * grid[1])
    buffers = result.report["buffers"]
    weights = 1 if rms else 2
    assert sum(b["bytes_read"] for b in buffers) == tiles * 2048 + weights * cores * wt * 2048
    assert sum(b["bytes_written"] for b in buffers) == tiles * 2048


# ------------------------------------------------------------------------------------------- SDPA (flash attention)
def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, b: int, nqh: int, nkh: int, s: int, d: int,
              causal: bool) -> np.ndarray:
    """softmax(Q K^T / sqrt(D) [+ causal mask]) V in float64, query head h reading K/V head h // (NQH / NKH)."""
    q = q.reshape(b, nqh, s, d).astype(np.float64)
    k = np.repeat(k.reshape(b, nkh, s, d).astype(np.float64), nqh // nkh, axis=1)
    v = np.repeat(v.reshape(b, nkh, s, d).astype(np.float64), nqh // nkh, axis=1)
    scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(d)
    if causal:
        scores = np.where(np.tril(np.ones((s, s), bool)), scores, -np.inf)
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return ((p / p.sum(axis=-1, keepdims=True)) @ v).reshape(b * nqh * s, d)


@pytest.mark.parametrize("arch, b, nqh, nkh, s, d, q_chunk, k_chunk, grid, causal, streaming", [
    ("wormhole_b0", 1, 2, 2, 256, 64, 64, 64, (2, 2), False, 0),   # 8 Q chunks on 4 cores: K/V chains of 2 cores
    ("wormhole_b0", 1, 4, 2, 256, 64, 64, 64, (2, 2), True, 0),    # GQA, causal: zigzag-balanced Q chunks
    ("blackhole", 1, 4, 2, 256, 64, 64, 128, (2, 2), False, 0),    # GQA, K chunk twice the Q chunk
    ("blackhole", 2, 2, 2, 256, 64, 32, 64, (3, 2), True, 0),      # batch 2, 16 Q chunks on 6 cores (3, 3, 3, 3, 2, 2)
    ("wormhole_b0", 1, 2, 2, 512, 32, 32, 64, (3, 3), False, 0),   # chains of 4 and 5 cores, mixed counts (4 then 3s)
    # the streaming kernel (compute_streaming.hpp): no-MOP matmuls, block row-max reduce with the packer's trigger,
    # block bcast-cols subtract, exp on the pack thread, SALAD corrections across K chunks
    ("wormhole_b0", 1, 2, 2, 256, 64, 64, 64, (2, 2), False, 1),
    ("blackhole", 1, 4, 2, 256, 64, 64, 128, (2, 2), False, 1),
    ("blackhole", 2, 2, 2, 256, 64, 32, 64, (3, 2), True, 1),
    ("wormhole_b0", 1, 4, 2, 256, 64, 64, 64, (2, 2), True, 1),
    # Q chunks of 4 and 8 tiles: several QK row groups, each pushed with the write pointer held at the chunk start
    ("blackhole", 1, 2, 2, 512, 64, 128, 256, (2, 2), True, 1),
    ("wormhole_b0", 1, 2, 1, 512, 128, 256, 256, (2, 2), False, 1),
], ids=["wh-mha", "wh-gqa-causal", "bh-gqa", "bh-b2-causal", "wh-long-chains",
        "streaming-wh-mha", "streaming-bh-gqa", "streaming-bh-b2-causal", "streaming-wh-gqa-causal",
        "streaming-bh-row-groups-causal", "streaming-wh-row-groups-gqa-d128"])
def test_ttnn_sdpa_kernels_match_numpy_attention(run_ttnn, arch, b, nqh, nkh, s, d, q_chunk, k_chunk, grid, causal,
                                                 streaming):
    """ttnn 0.81.1's SDPA kernels (reader_interleaved with its K/V forwarding chains, writer_interleaved,
    compute/sdpa.cpp: the legacy loop in compute_common.hpp or the streaming one in compute_streaming.hpp, online
    softmax over K chunks, the writer's lightweight causal mask) on the emulator, unmodified, against float64
    attention."""
    rng = np.random.default_rng(13)
    q = bf16(rng.standard_normal((b * nqh * s, d)).astype(np.float32))
    k = bf16(rng.standard_normal((b * nkh * s, d)).astype(np.float32))
    v = bf16(rng.standard_normal((b * nkh * s, d)).astype(np.float32))
    cfg = np.array([[b, nqh, nkh, s, d, q_chunk, k_chunk, *grid, causal, streaming, 0, 2]], np.float32)
    result = run_ttnn("sdpa", {"q": q, "k": k, "v": v, "cfg": cfg}, arch=arch)
    o = result.outputs["o"]
    exact = attention(q, k, v, b, nqh, nkh, s, d, causal)
    # bf16 scores, probabilities, statistics and running output (the legacy kernel's BF16 state), and the factory's
    # approximate exp (EXP_APPROX_MODE), emulated as the LLK computes it: each probability within 3.13% of exp (its
    # Schraudolph error), the output's and the row sum's errors not cancelling: ~2.0-2.2% rel-L2 measured (0.5% with
    # libm's exp in its place)
    assert np.linalg.norm(o - exact) / np.linalg.norm(exact) < 0.035
    assert np.abs(o - exact).max() < 0.06
    # the other masking would be far off (the check can tell causal from not)
    other = attention(q, k, v, b, nqh, nkh, s, d, not causal)
    assert np.linalg.norm(o - other) / np.linalg.norm(other) > 0.2

    # the data moved as the kernels move it: Q read once; one K and one V chunk read from DRAM per (Q chunk, K chunk)
    # pair the kernel visits (causal: only chunks starting at or below the Q chunk's last row), except that a
    # non-causal head spread over several cores (each on that head alone) reads its K/V once per Q chunk of one
    # core and forwards it along the chain; every output tile written once
    st, dt, sq, sk, nq = s // 32, d // 32, q_chunk // 32, k_chunk // 32, s // q_chunk
    total, cores = b * nqh * nq, min(b * nqh * nq, grid[0] * grid[1])
    starts = [i * (total // cores) + min(i, total % cores) for i in range(cores + 1)]
    heads_of_core = [{g // nq for g in range(starts[i], starts[i + 1])} for i in range(cores)]
    kv_tiles = 0
    for head in range(b * nqh):
        counts = [sum(1 for g in range(starts[i], starts[i + 1]) if g // nq == head) for i in range(cores)]
        segments = [(i, n) for i, n in enumerate(counts) if n]
        if causal:
            kv_tiles += sum(-(-min((qc + 1) * sq, st) // sk) for qc in range(nq)) * sk * dt
        elif len(segments) >= 2 and all(len(heads_of_core[i]) == 1 for i, _ in segments):
            kv_tiles += max(n for _, n in segments) * st * dt
        else:
            kv_tiles += nq * st * dt
    buffers = result.report["buffers"]
    assert [x["bytes_read"] for x in buffers] == [b * nqh * st * dt * 2048, kv_tiles * 2048, kv_tiles * 2048, 0]
    assert [x["bytes_written"] for x in buffers] == [0, 0, 0, b * nqh * st * dt * 2048]


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_ttnn_sdpa_head_aligned_split_matches_numpy(run_ttnn, arch):
    """The host program's head-aligned work split (cfg[14], bench/sdpa_ttnn.py's what-if row): each head's Q chunks
    over its own run of grid / heads cores (8 chunks on 3 cores: 3, 3, 2), so every core is in its head's K/V chain.
    The streaming kernel's output matches float64 attention, and K/V are read from DRAM only by each chain's injector
    (the heaviest core, once per Q chunk of its own): 3 x S/32 x D/32 tiles per head, not one read per Q chunk."""
    b, nqh, nkh, s, d, q_chunk, k_chunk, grid = 1, 2, 2, 512, 64, 64, 64, (3, 2)
    rng = np.random.default_rng(29)
    q = bf16(rng.standard_normal((b * nqh * s, d)).astype(np.float32))
    k = bf16(rng.standard_normal((b * nkh * s, d)).astype(np.float32))
    v = bf16(rng.standard_normal((b * nkh * s, d)).astype(np.float32))
    cfg = np.array([[b, nqh, nkh, s, d, q_chunk, k_chunk, *grid, 0, 1, 0, 2, 1, 1]], np.float32)
    result = run_ttnn("sdpa", {"q": q, "k": k, "v": v, "cfg": cfg}, arch=arch)
    o, exact = result.outputs["o"], attention(q, k, v, b, nqh, nkh, s, d, False)
    assert np.linalg.norm(o - exact) / np.linalg.norm(exact) < 0.035
    assert np.abs(o - exact).max() < 0.06
    st, dt = s // 32, d // 32
    kv_tiles = b * nqh * 3 * st * dt
    buffers = result.report["buffers"]
    assert [x["bytes_read"] for x in buffers] == [b * nqh * st * dt * 2048, kv_tiles * 2048, kv_tiles * 2048, 0]
    assert [x["bytes_written"] for x in buffers] == [0, 0, 0, b * nqh * st * dt * 2048]


@pytest.mark.parametrize("arch, streaming", [("wormhole_b0", 1), ("blackhole", 1), ("blackhole", 0)])
def test_ttnn_sdpa_causal_prefix_chains_match_numpy(run_ttnn, arch, streaming):
    """The reader's causal K/V prefix chains (kv_chain_mode 2, host program cfg[15]): per head the cores whose Q range
    starts in it, in core order. 16 zigzag Q chunks on 4 cores (4 each: head 0 on cores 0-1, head 1 on 2-3). Output
    against float64 causal attention; K/V read from DRAM: for its i-th chunk a core gets from the previous core the
    prefix both i-th chunks need when its own chunk is in the heavy half, and reads the rest itself."""
    b, nqh, nkh, s, d, q_chunk, k_chunk, grid = 1, 2, 2, 512, 64, 64, 64, (2, 2)
    rng = np.random.default_rng(31)
    q = bf16(rng.standard_normal((b * nqh * s, d)).astype(np.float32))
    k = bf16(rng.standard_normal((b * nkh * s, d)).astype(np.float32))
    v = bf16(rng.standard_normal((b * nkh * s, d)).astype(np.float32))
    cfg = np.array([[b, nqh, nkh, s, d, q_chunk, k_chunk, *grid, 1, streaming, 0, 2, 1, 0, 1]], np.float32)
    result = run_ttnn("sdpa", {"q": q, "k": k, "v": v, "cfg": cfg}, arch=arch)
    o, exact = result.outputs["o"], attention(q, k, v, b, nqh, nkh, s, d, True)
    assert np.linalg.norm(o - exact) / np.linalg.norm(exact) < 0.035
    assert np.abs(o - exact).max() < 0.06

    nq, st, dt, sq, sk = s // q_chunk, s // 32, d // 32, q_chunk // 32, k_chunk // 32
    zigzag = [p // 2 if p % 2 == 0 else nq - 1 - p // 2 for p in range(nq)]  # a head's chunk at each position
    needed = [-(-min((c + 1) * sq, st) // sk) for c in range(nq)]              # K chunks each Q chunk reads
    per_core = b * nqh * nq // (grid[0] * grid[1])
    kv_chunks = 0
    for head in range(b * nqh):
        cores = [[zigzag[p] for p in range(j * per_core, (j + 1) * per_core)] for j in range(nq // per_core)]
        for j, chunks in enumerate(cores):
            for i, c in enumerate(chunks):
                received = min(needed[c], needed[cores[j - 1][i]]) if j > 0 and c >= nq // 2 else 0
                kv_chunks += needed[c] - received
    assert kv_chunks < b * nqh * sum(needed)  # the chains save reads
    buffers = result.report["buffers"]
    assert [x["bytes_read"] for x in buffers][1:3] == [kv_chunks * sk * dt * 2048] * 2
