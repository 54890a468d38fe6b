"""The timing model (compiler/device_costs.json, emulator src/timing*.cpp) against Tenstorrent's published numbers.

1. ttnn 0.81.1's own 2-D multicast matmul kernels, unmodified from the wheel, under our host program
   (tests/emulator/ttnn_programs/matmul_2d_mcast.cpp) at the GEMM_FLOPS tech report's DRAM-interleaved bf16 rows
   on an n150 (8x8 cores, traced). Block sizes as the report's benchmark chooses them
   (tests/ttnn/unit_tests/benchmarks/test_benchmark.py, the version that produced the report:
   in0_block_w = K/8/32/in0_block_w_div, per_core_M = M/8/32, per_core_N = N/8/32, out_block = per_core /
   num_out_blocks, the largest out_subblock of (4,2),(2,4),(8,1),... dividing the block; packer_l1_acc, no fp32 DST,
   math_approx_mode). Measured: tech_reports/GEMM_FLOPS/GEMM_FLOPS.md at tt-metal commit b7c30ff06218 (the rows
   tt_performance_facts.md quotes), traced inference time per op. Only llk_call_cycles was fitted, on the two 4096^3
   rows; every other row runs with the same table. Timing-only mode (no arithmetic) on unwritten buffers.
2. Timing-only against the full run on shapes both can do (device time must be identical).
3. What the timing model costs: functional emulation with and without it (median of 3 runs, one process each).
4. Sensitivity of the 4096^3 rows to the constants that are estimates.
5. Data-movement primitives against tt-low-level-documentation's measured ideal bytes/cycle."""
from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.target import device_costs  # noqa: E402
from compiler.toolchain import emulate, sdk_headers  # noqa: E402
from tests.emulator.test_ttnn_kernels import NPY_UTIL, PROGRAMS, MatmulConfig, bf16  # noqa: E402

FIDELITY = {"LoFi": 0, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}
SUBBLOCKS = [(4, 2), (2, 4), (8, 1), (1, 8), (7, 1), (1, 7), (3, 2), (2, 3), (6, 1), (1, 6), (5, 1), (1, 5), (2, 2),
             (4, 1), (1, 4), (3, 1), (1, 3), (2, 1), (1, 2), (1, 1)]
# (m, k, n, in0_block_w_div, num_out_blocks_h, num_out_blocks_w): the benchmark's DRAM-interleaved bf16 shapes
SHAPES = [(3072, 3072, 4096, 2, 1, 1), (3072, 4096, 4096, 2, 1, 1), (4096, 4096, 4096, 1, 2, 2),
          (8192, 8192, 8192, 2, 4, 4), (16384, 16384, 16384, 4, 8, 8)]
# traced inference time (ms), GEMM_FLOPS.md @ b7c30ff06218
MEASURED = {(3072, 3072, 4096, "HiFi2"): 1.13666, (3072, 4096, 4096, "HiFi2"): 1.37919,
            (4096, 4096, 4096, "HiFi2"): 1.98296, (8192, 8192, 8192, "HiFi2"): 13.634,
            (16384, 16384, 16384, "HiFi2"): 101.918,
            (3072, 3072, 4096, "HiFi4"): 1.63843, (3072, 4096, 4096, "HiFi4"): 2.10337,
            (4096, 4096, 4096, "HiFi4"): 2.71992, (8192, 8192, 8192, "HiFi4"): 20.6619,
            (16384, 16384, 16384, "HiFi4"): 161.645}
CALIBRATION = {(4096, 4096, 4096, "HiFi2"), (4096, 4096, 4096, "HiFi4")}


def subblock(h: int, w: int) -> tuple[int, int]:
    return next(((sh, sw) for sh, sw in SUBBLOCKS if h % sh == 0 and w % sw == 0), (1, 1))


def benchmark_config(m, k, n, div, blocks_h, blocks_w, fidelity: str, *, no_data=True) -> MatmulConfig:
    per_m, per_n = m // 8 // 32, n // 8 // 32
    out_h, out_w = per_m // blocks_h, per_n // blocks_w
    sh, sw = subblock(out_h, out_w)
    return MatmulConfig(m, k, n, (8, 8), in0_block_w=k // 8 // 32 // div, out_subblock_h=sh, out_subblock_w=sw,
                        per_core_m=per_m, per_core_n=per_n, out_block_h=out_h, out_block_w=out_w, packer_l1_acc=True,
                        math_fidelity=FIDELITY[fidelity], math_approx_mode=True, no_data=no_data)


class Runner:
    def __init__(self, work: Path):
        self.work = work
        self.home = sdk_headers.ensure_kernels()
        self.src = work / "matmul"
        self.src.mkdir()
        shutil.copy(PROGRAMS / "matmul_2d_mcast.cpp", self.src / "main.cpp")
        shutil.copy(NPY_UTIL, self.src / "npy_util.hpp")
        self.n = 0

    def matmul(self, cfg: MatmulConfig, **kwargs) -> emulate.EmulationResult:
        self.n += 1
        inputs = {"cfg": cfg.cfg()}
        if not cfg.no_data:
            rng = np.random.default_rng(0)
            inputs["a"] = bf16(rng.standard_normal((cfg.m, cfg.k)).astype(np.float32))
            inputs["b"] = bf16(rng.standard_normal((cfg.k, cfg.n)).astype(np.float32))
        return emulate.run_host_program(self.src / "main.cpp", inputs, self.work / f"run-{self.n}",
                                        env={"TT_METAL_HOME": str(self.home)}, timeout_s=3600, **kwargs)


def ms(result: emulate.EmulationResult) -> float:
    timing = result.report["timing"]
    return timing["device_cycles"] / timing["clock_ghz"] / 1e6


def calibration(runner: Runner) -> None:
    print("## ttnn's 2-D multicast matmul, n150 8x8, bf16, in0/in1/out DRAM-interleaved (traced)\n")
    print("| M x K x N | fidelity | in0_block_w | per core | out block | subblock | model ms | measured ms | error | "
          "model util | |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    errors = []
    for fidelity in ("HiFi2", "HiFi4"):
        for m, k, n, div, bh, bw in SHAPES:
            cfg = benchmark_config(m, k, n, div, bh, bw, fidelity)
            measured = MEASURED[(m, k, n, fidelity)]
            row = (f"| {m}x{k}x{n} | {fidelity} | {cfg.in0_block_w} | {cfg.per_core_m}x{cfg.per_core_n} | "
                   f"{cfg.out_block_h}x{cfg.out_block_w} | {cfg.out_subblock_h}x{cfg.out_subblock_w} |")
            try:
                result = runner.matmul(cfg, timing_only=True)
            except emulate.EmulationError as err:
                print(f"{row} not run | {measured:.3f} | - | - | {err.kind}: {err.message.split(':')[-1].strip()} |")
                continue
            model = ms(result)
            err = model / measured - 1
            ideal = m * k * n / 32768 * device_costs("wormhole_b0")[f"fpu_cycles_{fidelity.lower()}"] / 64
            util = ideal / result.report["timing"]["device_cycles"]
            note = "calibration" if (m, k, n, fidelity) in CALIBRATION else ""
            errors.append((note, abs(err)))
            print(f"{row} {model:.3f} | {measured:.3f} | {err:+.1%} | {util:.1%} | {note} |")
    worst_cal = max(e for note, e in errors if note)
    worst_other = max((e for note, e in errors if not note), default=0.0)
    print(f"\nlargest error: calibration rows {worst_cal:.1%} (bound 20%), other rows {worst_other:.1%} (bound 25%)\n")


def equality(runner: Runner) -> None:
    print("## timing-only against the full run (same device time required)\n")
    print("| config | full run cycles | timing-only cycles | equal | full run s | timing-only s |")
    print("|---|---|---|---|---|---|")
    for cfg in (MatmulConfig(512, 512, 512, (4, 4), in0_block_w=2, out_subblock_h=2, out_subblock_w=4, per_core_m=4,
                             per_core_n=4, packer_l1_acc=True, math_fidelity=2),
                benchmark_config(1024, 1024, 1024, 1, 1, 1, "HiFi4", no_data=False),
                benchmark_config(2048, 2048, 2048, 1, 1, 1, "HiFi2", no_data=False)):
        full = runner.matmul(cfg)
        only = runner.matmul(cfg, timing_only=True)
        a, b = full.report["timing"]["device_cycles"], only.report["timing"]["device_cycles"]
        print(f"| {cfg.m}^3 {cfg.grid[0]}x{cfg.grid[1]} fidelity {cfg.math_fidelity} | {a:.0f} | {b:.0f} | {a == b} | "
              f"{full.report['run_seconds']:.2f} | {only.report['run_seconds']:.2f} |")
    print()


def overhead(runner: Runner) -> None:
    print("## what timing costs: functional emulation with and without the model (report run_seconds, median of 3)\n")
    print("| config | without timing s | with timing s | ratio |")
    print("|---|---|---|---|")
    for cfg in (benchmark_config(1024, 1024, 1024, 1, 1, 1, "HiFi2", no_data=False),
                benchmark_config(2048, 2048, 2048, 1, 1, 1, "HiFi2", no_data=False)):
        off = statistics.median(runner.matmul(cfg, timing=False).report["run_seconds"] for _ in range(3))
        on = statistics.median(runner.matmul(cfg).report["run_seconds"] for _ in range(3))
        print(f"| {cfg.m}^3 8x8 | {off:.2f} | {on:.2f} | {on / off:.2f} |")
    print()


def sensitivity(runner: Runner) -> None:
    print("## sensitivity of the 4096^3 rows to the estimated constants (model ms)\n")
    print("| change | HiFi2 | HiFi4 |")
    print("|---|---|---|")
    base = device_costs("wormhole_b0")
    changes = [("none", {}), ("dram_latency_cycles x0.5", {"dram_latency_cycles": base["dram_latency_cycles"] / 2}),
               ("dram_latency_cycles x2", {"dram_latency_cycles": base["dram_latency_cycles"] * 2}),
               ("noc_cmd_cycles x2", {"noc_cmd_cycles": base["noc_cmd_cycles"] * 2}),
               ("dispatch_ns x2", {"dispatch_ns": base["dispatch_ns"] * 2}),
               ("unpack_bytes_per_cycle 32", {"unpack_bytes_per_cycle": 32}),
               ("llk_call_cycles +20%", {"llk_call_cycles": base["llk_call_cycles"] * 1.2})]
    for name, override in changes:
        cells = []
        for fidelity in ("HiFi2", "HiFi4"):
            cfg = benchmark_config(4096, 4096, 4096, 1, 2, 2, fidelity)
            cells.append(f"{ms(runner.matmul(cfg, timing_only=True, cost_overrides=override)):.3f}")
        print(f"| {name} | {' | '.join(cells)} |")
    print()


def primitives(work: Path) -> None:
    print("## data-movement primitives (bytes/cycle) against tt-low-level-documentation's measured ideal\n")
    print("| primitive | model | measured (WH) |")
    print("|---|---|---|")
    bundle = work / "traffic"
    shutil.copytree(ROOT / "tests/emulator/bundles/traffic", bundle)
    shutil.copy(ROOT / "tests/emulator/bundles/common/npy_util.hpp", bundle / "npy_util.hpp")

    def cycles(*cfg) -> float:
        result = emulate.run_host_program(bundle / "main.cpp", {"cfg": np.array([cfg], np.float32)},
                                          work / f"traffic-{'-'.join(map(str, cfg))}")
        return result.report["timing"]["programs"][0]["kernel_cycles"]

    tiles = 512
    print(f"| DRAM read, one core, 32 tiles in flight | {tiles * 2048 / cycles(0, 1, tiles, 32, 32, 0):.1f} | 22 |")
    print(f"| DRAM read, 64 cores, every bank | {64 * 64 * 2048 / cycles(0, 64, 64, 16, 16, 0):.1f} | "
          f"267 GB/s = 267 (Saturating_DRAM_bandwidth.md) |")
    print(f"| one to seven by unicast writes | {64 * 7 * 2048 / cycles(1, 8, 64, 8, 8, 1):.1f} | 31 (one to all, unicast) |")
    print(f"| one to seven by multicast (bytes sent) | {64 * 2048 / cycles(1, 8, 64, 8, 8, 0):.1f} | "
          f"22 (multicast + linked) |")
    print()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        runner = Runner(work)
        calibration(runner)
        equality(runner)
        overhead(runner)
        sensitivity(runner)
        primitives(work)


if __name__ == "__main__":
    main()
