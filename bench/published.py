"""Published Tenstorrent measurements the timing model is compared with (numbers only; the code is ours).

GEMM: tenstorrent/tt-metal tech_reports/GEMM_FLOPS/GEMM_FLOPS.md (at commit 06bd3735f7df), "All Data" tables, the
traced rows (use_trace True) of "N150 Manually Tuned Configurations" (8x8, 1 GHz) and "P150 Manually Tuned
Configurations (13x10 grid)" (1.35 GHz): per row the traced inference time (host-measured, dispatch included) and the
device-based utilization (ideal cycles / the profiler's TRISC1 kernel duration: the math RISC's span from its first
start to its last end across cores). Device time = ideal time / device-based utilization.

The configs are those of tests/ttnn/unit_tests/benchmarks/test_benchmark.py::test_matmul_2d_host_perf, whose shapes
are given for a 1x1 grid and scaled by the grid (m by its rows, k and n by its columns): per shape in0/out sharded
(in0 block-sharded in L1, out block-sharded in L1, in1 always DRAM-interleaved), in0_block_w_div,
num_out_blocks_h, num_out_blocks_w; in0_block_w = k / grid_x / 32 / div, per_core = m / grid_y / 32 and
n / grid_x / 32, out blocks = per_core / num_out_blocks, the first subblock of SUBBLOCKS dividing the out block
(out sharded: height 1), packer_l1_acc, no fp32 DST, math_approx_mode, dtype for inputs and output.

SDPA: tenstorrent/tt-metal tech_reports/FlashAttention/SDPAPrecisionRecipes.md (P150, full grid).
"""
from __future__ import annotations

from dataclasses import dataclass

GEMM_SOURCE = "tt-metal tech_reports/GEMM_FLOPS/GEMM_FLOPS.md @ 06bd3735f7df (traced rows)"
GRIDS = {"wormhole_b0": (8, 8), "blackhole": (13, 10)}
CLOCK_GHZ = {"wormhole_b0": 1.0, "blackhole": 1.35}
CYCLES_PER_TILE = {"LoFi": 16, "HiFi2": 32, "HiFi3": 48, "HiFi4": 64}

# test_benchmark.py: (m, k, n, in0_sharded, out_sharded, in0_block_w_div, num_out_blocks_h, num_out_blocks_w) per
# 1x1 grid, by dtype
BENCH_SHAPES = {
    "bfloat16": [
        (64, 64, 64, True, True, 1, 1, 1), (64, 128, 128, True, True, 1, 1, 1), (64, 128, 256, True, True, 1, 1, 1),
        (128, 128, 128, True, True, 1, 1, 1), (128, 128, 256, True, True, 1, 1, 1),
        (128, 256, 256, True, True, 1, 1, 1), (256, 256, 256, True, True, 1, 1, 1),
        (256, 256, 384, True, True, 1, 1, 1), (256, 384, 384, True, True, 2, 1, 1),
        (384, 384, 384, True, True, 4, 1, 1), (384, 384, 512, False, False, 2, 1, 1),
        (384, 512, 512, False, False, 2, 1, 1), (416, 320, 320, False, False, 1, 1, 1),
        (512, 512, 512, False, False, 1, 2, 2), (1024, 1024, 1024, False, False, 2, 4, 4),
        (2048, 2048, 2048, False, False, 4, 8, 8)],
    "bfloat8_b": [
        (64, 64, 64, True, True, 1, 1, 1), (64, 128, 128, True, True, 1, 1, 1), (64, 128, 256, True, True, 1, 1, 1),
        (128, 128, 128, True, True, 1, 1, 1), (128, 128, 256, True, True, 1, 1, 1),
        (128, 256, 256, True, True, 1, 1, 1), (256, 256, 256, True, True, 1, 1, 1),
        (256, 256, 384, True, True, 1, 1, 1), (256, 384, 384, True, True, 1, 1, 1),
        (384, 384, 384, True, True, 2, 1, 1), (384, 384, 512, True, True, 2, 1, 1),
        (416, 320, 320, False, False, 1, 1, 1), (512, 512, 512, False, False, 1, 2, 2),
        (1024, 1024, 1024, False, False, 2, 4, 4), (2048, 2048, 2048, False, False, 4, 8, 8)],
    "bfloat4_b": [
        (64, 64, 64, True, True, 1, 1, 1), (64, 128, 128, True, True, 1, 1, 1), (64, 128, 256, True, True, 1, 1, 1),
        (128, 128, 128, True, True, 1, 1, 1), (128, 128, 256, True, True, 1, 1, 1),
        (128, 256, 256, True, True, 1, 1, 1), (256, 256, 256, True, True, 1, 1, 1),
        (256, 256, 384, True, True, 1, 1, 1), (256, 384, 384, True, True, 1, 1, 1),
        (384, 384, 384, True, True, 1, 1, 1), (384, 384, 512, True, True, 1, 1, 1),
        (384, 512, 512, True, True, 2, 1, 1), (416, 320, 320, False, False, 1, 1, 1),
        (512, 512, 512, True, True, 2, 1, 1), (1024, 1024, 1024, False, False, 2, 2, 2),
        (2048, 2048, 2048, False, False, 4, 4, 4)],
}
FIDELITIES = {"bfloat16": ("HiFi2", "HiFi4"), "bfloat8_b": ("HiFi2", "LoFi"), "bfloat4_b": ("LoFi",)}

# (arch, dtype, fidelity) -> [(m, k, n, traced inference ns, device-based utilization %)], in the report's order
GEMM_ROWS: dict[tuple[str, str, str], list[tuple[int, int, int, float, float]]] = {
    ("wormhole_b0", "bfloat16", "HiFi2"): [
        (512, 512, 512, 12545.59, 20.61), (512, 1024, 1024, 28338.43, 31.42), (512, 1024, 2048, 50821.30, 34.04),
        (1024, 1024, 1024, 37293.43, 47.79), (1024, 1024, 2048, 65734.39, 53.61),
        (1024, 2048, 2048, 123534.20, 57.63), (2048, 2048, 2048, 224154.00, 64.87),
        (2048, 2048, 3072, 334920.88, 64.50), (2048, 3072, 3072, 500411.99, 65.52),
        (3072, 3072, 3072, 773649.22, 64.56), (3072, 3072, 4096, 1149344.44, 74.19),
        (3072, 4096, 4096, 1386282.44, 75.09), (3328, 2560, 2560, 727927.68, 63.13),
        (4096, 4096, 4096, 2007951.74, 59.45), (8192, 8192, 8192, 13551716.80, 66.47),
        (16384, 16384, 16384, 103051669.60, 71.34)],
    ("wormhole_b0", "bfloat16", "HiFi4"): [
        (512, 512, 512, 12753.01, 40.77), (512, 1024, 1024, 29408.93, 61.25), (512, 1024, 2048, 54254.53, 65.52),
        (1024, 1024, 1024, 46966.08, 77.17), (1024, 1024, 2048, 90940.00, 80.67),
        (1024, 2048, 2048, 171875.95, 85.03), (2048, 2048, 2048, 332493.78, 89.59),
        (2048, 2048, 3072, 502057.08, 90.18), (2048, 3072, 3072, 730600.36, 92.03),
        (3072, 3072, 3072, 1117739.68, 92.40), (3072, 3072, 4096, 1636314.39, 91.68),
        (3072, 4096, 4096, 2020318.51, 92.18), (3328, 2560, 2560, 1009585.86, 89.40),
        (4096, 4096, 4096, 2711439.13, 83.19), (8192, 8192, 8192, 20846247.67, 88.70),
        (16384, 16384, 16384, 162119269.37, 91.45)],
    ("wormhole_b0", "bfloat8_b", "HiFi2"): [
        (512, 512, 512, 10795.59, 26.13), (512, 1024, 1024, 20890.24, 43.97), (512, 1024, 2048, 34127.24, 51.64),
        (1024, 1024, 1024, 27542.11, 67.47), (1024, 1024, 2048, 49431.32, 72.10),
        (1024, 2048, 2048, 91581.34, 78.55), (2048, 2048, 2048, 178198.81, 84.30),
        (2048, 2048, 3072, 262610.91, 85.53), (2048, 3072, 3072, 387239.46, 86.94),
        (3072, 3072, 3072, 580282.21, 88.56), (3072, 3072, 4096, 771944.52, 89.15),
        (3328, 2560, 2560, 509407.52, 85.09), (4096, 4096, 4096, 1451368.33, 79.43),
        (8192, 8192, 8192, 10994498.73, 83.95), (16384, 16384, 16384, 85866348.74, 86.65)],
    ("wormhole_b0", "bfloat8_b", "LoFi"): [
        (512, 512, 512, 11241.44, 13.16), (512, 1024, 1024, 19986.63, 23.14), (512, 1024, 2048, 32010.08, 27.54),
        (1024, 1024, 1024, 23140.91, 39.72), (1024, 1024, 2048, 38383.01, 45.99),
        (1024, 2048, 2048, 69217.68, 52.68), (2048, 2048, 2048, 124399.66, 58.89),
        (2048, 2048, 3072, 185031.89, 59.29), (2048, 3072, 3072, 272057.06, 61.18),
        (3072, 3072, 3072, 409138.20, 61.56), (3072, 3072, 4096, 537052.15, 63.26),
        (3328, 2560, 2560, 390379.43, 58.62), (4096, 4096, 4096, 977981.09, 58.85),
        (8192, 8192, 8192, 7068297.86, 64.77), (16384, 16384, 16384, 53902544.98, 69.50)],
    ("wormhole_b0", "bfloat4_b", "LoFi"): [
        (512, 512, 512, 9992.12, 14.38), (512, 1024, 1024, 16939.64, 27.21), (512, 1024, 2048, 25794.51, 34.89),
        (1024, 1024, 1024, 18477.44, 50.85), (1024, 1024, 2048, 29826.16, 60.69),
        (1024, 2048, 2048, 51717.76, 70.64), (2048, 2048, 2048, 93846.32, 78.81),
        (2048, 2048, 3072, 139184.00, 79.79), (2048, 3072, 3072, 202205.18, 82.18),
        (3072, 3072, 3072, 296132.56, 84.58), (3072, 3072, 4096, 392537.12, 85.49),
        (3072, 4096, 4096, 530505.18, 86.70), (3328, 2560, 2560, 266108.51, 81.62),
        (4096, 4096, 4096, 698316.10, 87.66), (8192, 8192, 8192, 5612254.14, 82.59),
        (16384, 16384, 16384, 44041671.75, 84.75)],
    ("blackhole", "bfloat16", "HiFi2"): [
        (640, 832, 832, 13282.30, 20.59), (640, 1664, 1664, 23472.31, 44.56), (640, 1664, 3328, 37662.98, 54.64),
        (1280, 1664, 1664, 28655.53, 73.03), (1280, 1664, 3328, 52068.23, 78.10),
        (1280, 3328, 3328, 97250.94, 82.50), (2560, 3328, 3328, 183117.39, 87.05),
        (2560, 3328, 4992, 271618.37, 87.71), (2560, 4992, 4992, 401725.77, 88.81),
        (3840, 4992, 4992, 604395.87, 88.42), (3840, 4992, 6656, 952718.26, 89.60),
        (3840, 6656, 6656, 1201236.25, 90.24), (4160, 4160, 4160, 540421.01, 88.30),
        (5120, 6656, 6656, 1609930.99, 80.37), (10240, 13312, 13312, 12722597.12, 85.15),
        (20480, 26624, 26624, 121321547.03, 88.66)],
    ("blackhole", "bfloat16", "HiFi4"): [
        (640, 832, 832, 13475.42, 41.34), (640, 1664, 1664, 27432.44, 76.58), (640, 1664, 3328, 49912.93, 81.82),
        (1280, 1664, 1664, 48174.86, 85.19), (1280, 1664, 3328, 91440.68, 88.02),
        (1280, 3328, 3328, 176091.19, 90.53), (2560, 3328, 3328, 340666.77, 93.17),
        (2560, 3328, 4992, 508291.72, 93.49), (2560, 4992, 4992, 757009.98, 94.08),
        (3840, 4992, 4992, 1137721.54, 93.83), (3840, 4992, 6656, 1647534.37, 94.53),
        (3840, 6656, 6656, 2130529.88, 94.88), (4160, 4160, 4160, 909597.87, 93.82),
        (5120, 6656, 6656, 2818577.29, 90.36), (10240, 13312, 13312, 24077782.63, 92.98),
        (20480, 26624, 26624, 205641906.26, 94.44)],
    ("blackhole", "bfloat8_b", "HiFi2"): [
        (640, 832, 832, 12385.85, 22.39), (640, 1664, 1664, 20432.47, 52.10), (640, 1664, 3328, 30994.42, 68.21),
        (1280, 1664, 1664, 28252.60, 74.43), (1280, 1664, 3328, 51298.14, 79.44),
        (1280, 3328, 3328, 94885.83, 84.74), (2560, 3328, 3328, 180659.29, 88.28),
        (2560, 3328, 4992, 268156.53, 88.79), (2560, 4992, 4992, 397031.31, 89.93),
        (3840, 4992, 4992, 592327.12, 90.26), (3840, 4992, 6656, 784502.03, 90.75),
        (4160, 4160, 4160, 478374.96, 89.55), (5120, 6656, 6656, 1475803.85, 86.31),
        (10240, 13312, 13312, 11736917.50, 89.05), (20480, 26624, 26624, 107297601.70, 90.53)],
    ("blackhole", "bfloat8_b", "LoFi"): [
        (640, 832, 832, 12285.71, 11.17), (640, 1664, 1664, 20086.77, 26.15), (640, 1664, 3328, 29890.54, 34.69),
        (1280, 1664, 1664, 20833.02, 51.90), (1280, 1664, 3328, 31895.64, 66.05),
        (1280, 3328, 3328, 53722.86, 76.30), (2560, 3328, 3328, 97005.37, 83.15),
        (2560, 3328, 4992, 142884.25, 83.75), (2560, 4992, 4992, 208795.07, 85.89),
        (3840, 4992, 4992, 309948.92, 86.53), (3840, 4992, 6656, 407702.92, 87.49),
        (4160, 4160, 4160, 282473.56, 85.10), (5120, 6656, 6656, 837078.09, 77.48),
        (10240, 13312, 13312, 6188557.15, 82.53), (20480, 26624, 26624, 62425124.65, 86.21)],
    ("blackhole", "bfloat4_b", "LoFi"): [
        (640, 832, 832, 11794.57, 11.70), (640, 1664, 1664, 18849.37, 28.30), (640, 1664, 3328, 27050.97, 38.56),
        (1280, 1664, 1664, 19550.32, 54.74), (1280, 1664, 3328, 30477.05, 68.20),
        (1280, 3328, 3328, 52626.13, 77.67), (2560, 3328, 3328, 96364.02, 83.26),
        (2560, 3328, 4992, 141954.42, 84.39), (2560, 4992, 4992, 207443.24, 86.36),
        (3840, 4992, 4992, 305113.79, 87.83), (3840, 4992, 6656, 403075.22, 88.48),
        (3840, 6656, 6656, 534386.63, 88.87), (4160, 4160, 4160, 247037.41, 86.27),
        (5120, 6656, 6656, 707356.93, 89.48), (10240, 13312, 13312, 5686080.46, 89.29),
        (20480, 26624, 26624, 52535061.84, 90.45)],
}


@dataclass(frozen=True)
class GemmRow:
    """One published matmul row with the benchmark's config for it."""
    arch: str
    dtype: str
    fidelity: str
    m: int
    k: int
    n: int
    in0_sharded: bool
    out_sharded: bool
    in0_block_w_div: int
    out_blocks_h: int
    out_blocks_w: int
    host_ns: float          # traced inference time (host-measured)
    device_util: float      # device-based utilization, %

    @property
    def label(self) -> str:
        return f"{self.arch} {self.m}x{self.k}x{self.n} {self.dtype} {self.fidelity} {self.storage}"

    @property
    def storage(self) -> str:
        return "L1" if self.in0_sharded else "DRAM"

    @property
    def grid(self) -> tuple[int, int]:
        return GRIDS[self.arch]

    def ideal_cycles(self) -> float:
        gx, gy = self.grid
        return self.m * self.k * self.n / 32768 * CYCLES_PER_TILE[self.fidelity] / (gx * gy)

    def device_cycles(self) -> float:
        """The measured TRISC1 span: ideal cycles / device-based utilization."""
        return self.ideal_cycles() / (self.device_util / 100)

    def device_us(self) -> float:
        return self.device_cycles() / CLOCK_GHZ[self.arch] / 1000


def gemm_rows() -> list[GemmRow]:
    """Every traced row of the two manually tuned tables, with the benchmark's config."""
    out = []
    for (arch, dtype, fidelity), rows in GEMM_ROWS.items():
        gx, gy = GRIDS[arch]
        shapes = {(m * gy, k * gx, n * gx): rest for m, k, n, *rest in BENCH_SHAPES[dtype]}
        for m, k, n, host_ns, util in rows:
            in0_sh, out_sh, div, bh, bw = shapes[(m, k, n)]
            out.append(GemmRow(arch, dtype, fidelity, m, k, n, in0_sh, out_sh, div, bh, bw, host_ns, util))
    return out


# SDPAPrecisionRecipes.md (P150, full grid, 1 x 10 heads x 8192 x 8192, head dim 128, Q chunk 256, K chunk 512)
SDPA_SOURCE = "tt-metal tech_reports/FlashAttention/SDPAPrecisionRecipes.md"
