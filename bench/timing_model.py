"""The timing model (compiler/device_costs.json, emulator src/timing*.cpp) against Tenstorrent's published device times.

1. ttnn 0.81.1's own 2-D multicast matmul kernels, unmodified from the wheel, under our host program
   (tests/emulator/ttnn_programs/matmul_2d_mcast.cpp) with the GEMM_FLOPS benchmark's configs (bench/published.py),
   every traced row of the report's manually tuned tables on both archs: bfloat16 (HiFi2, HiFi4), bfloat8_b (HiFi2,
   LoFi), bfloat4_b (LoFi); DRAM rows (in0, in1, out interleaved in DRAM) and L1 rows (in0 and out block-sharded in
   L1, in1 in DRAM). Compared like with like: the model's TRISC1 span (the math RISC's first start to its last end
   across cores, report["timing"]["trisc1_cycles"]) against the measured one (ideal cycles / device-based
   utilization). The model's device time (the last kernel's end + the launch) is shown beside it.
   The fitting set is declared in FIT: each calibrated constant of the cost table names the one row it is fitted on;
   every other row is held out. Timing-only runs (no arithmetic) on unwritten buffers.
2. Timing-only against the full run (the device time must be identical).
3. What the timing model costs: functional emulation with and without it.
4. Data-movement primitives against tt-low-level-documentation's measured ideal bytes/cycle.

Usage: python bench/timing_model.py [--quick] [--arch wormhole_b0|blackhole] [--max-mproducts N] [--fit] [--jobs 2]
  --fit           fits the FIT constants on their rows (alternating bisection) and prints the values
  --max-mproducts rows with more tile products run only below this many millions (default 60; --all: no limit)
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import queue
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compiler.target import device_costs  # noqa: E402
from compiler.toolchain import emulate, sdk_headers  # noqa: E402
from published import CLOCK_GHZ, GEMM_SOURCE, GemmRow, gemm_rows  # noqa: E402
from tests.emulator.test_ttnn_kernels import NPY_UTIL, PROGRAMS, MatmulConfig, bf16  # noqa: E402

FIDELITY = {"LoFi": 0, "HiFi2": 2, "HiFi3": 3, "HiFi4": 4}
DTYPE = {"bfloat16": 0, "bfloat8_b": 1, "bfloat4_b": 2}
SUBBLOCKS = [(4, 2), (2, 4), (8, 1), (1, 8), (7, 1), (1, 7), (3, 2), (2, 3), (6, 1), (1, 6), (5, 1), (1, 5), (2, 2),
             (4, 1), (1, 4), (3, 1), (1, 3), (2, 1), (1, 2), (1, 1)]

# The fitting set: (arch, constant) -> the row (dtype, fidelity, m, k, n) it is fitted on. One constant per row, the
# same two on both archs: the unpackers' sustained bytes per cycle (on a HiFi2 row whose 4 x 2 subblocks unpack 10
# tiles per 8 products, bound by the unpacker; the unpack thread's call instructions overlap the previous call's
# fetch, so the rate is what such a row measures; Blackhole's 4160^3 rows' 1 x 5 subblocks leave its HiFi2 bound by
# the FPU, so the rate would not show there) and the math thread's cost per tile (HiFi4, bound by the FPU).
FIT = {
    ("wormhole_b0", "unpack_bytes_per_cycle"): ("bfloat16", "HiFi2", 4096, 4096, 4096),
    ("wormhole_b0", "math_tile_cycles"): ("bfloat16", "HiFi4", 4096, 4096, 4096),
    ("blackhole", "unpack_bytes_per_cycle"): ("bfloat16", "HiFi2", 3840, 6656, 6656),
    ("blackhole", "math_tile_cycles"): ("bfloat16", "HiFi4", 4160, 4160, 4160),
}
FIT_RANGES = {"math_tile_cycles": (0.0, 60.0), "unpack_bytes_per_cycle": (32.0, 160.0)}


def subblock(h: int, w: int, out_sharded: bool) -> tuple[int, int]:
    """test_benchmark.py's get_subblock_sizes: the first of SUBBLOCKS dividing the block (height 1 when out sharded)."""
    return next(((sh, sw) for sh, sw in SUBBLOCKS if h % sh == 0 and w % sw == 0 and (sh == 1 or not out_sharded)),
                (1, 1))


def row_config(row: GemmRow, *, no_data: bool = True) -> MatmulConfig:
    gx, gy = row.grid
    per_m, per_n = row.m // gy // 32, row.n // gx // 32
    out_h, out_w = per_m // row.out_blocks_h, per_n // row.out_blocks_w
    sh, sw = subblock(out_h, out_w, row.out_sharded)
    return MatmulConfig(row.m, row.k, row.n, (gx, gy), in0_block_w=row.k // gx // 32 // row.in0_block_w_div,
                        out_subblock_h=sh, out_subblock_w=sw, per_core_m=per_m, per_core_n=per_n, out_block_h=out_h,
                        out_block_w=out_w, packer_l1_acc=True, math_fidelity=FIDELITY[row.fidelity],
                        math_approx_mode=True, no_data=no_data, dtype=DTYPE[row.dtype], in0_sharded=row.in0_sharded,
                        out_sharded=row.out_sharded)


def benchmark_config(m, k, n, div, blocks_h, blocks_w, fidelity: str, *, no_data=True, grid=(8, 8)) -> MatmulConfig:
    """The benchmark's DRAM-interleaved bf16 config for a shape (bench/gemm_vs_ttnn.py's yardstick)."""
    row = GemmRow("wormhole_b0" if grid == (8, 8) else "blackhole", "bfloat16", fidelity, m, k, n, False, False, div,
                  blocks_h, blocks_w, 0.0, 100.0)
    return row_config(row, no_data=no_data)


class Runner:
    def __init__(self, work: Path):
        self.work = work
        self.home = sdk_headers.ensure_kernels()
        self.src = work / "matmul"
        self.src.mkdir(exist_ok=True)
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
                                        env={"TT_METAL_HOME": str(self.home)}, timeout_s=7200, **kwargs)


def ms(result: emulate.EmulationResult) -> float:
    timing = result.report["timing"]
    return timing["device_cycles"] / timing["clock_ghz"] / 1e6


def model_cycles(runner: Runner, row: GemmRow, overrides: dict | None = None) -> dict:
    """The model's TRISC1 span and device cycles for a row (timing-only), or the reason it did not run."""
    try:
        result = runner.matmul(row_config(row), timing_only=True, arch=row.arch, cost_overrides=overrides)
    except emulate.EmulationError as err:
        return {"error": f"{err.kind}: {err.message.splitlines()[0][:110]}"}
    timing = result.report["timing"]
    return {"trisc1": timing["trisc1_cycles"], "device": timing["device_cycles"],
            "seconds": result.report.get("run_seconds", 0.0)}


def fit_key(row: GemmRow) -> tuple:
    return (row.dtype, row.fidelity, row.m, row.k, row.n)


def fitted_constants(row: GemmRow) -> list[str]:
    return [const for (arch, const), key in FIT.items() if arch == row.arch and key == fit_key(row) and
            row.storage == "DRAM"]


def run_rows(rows: list[GemmRow], jobs: int, overrides: dict | None = None):
    """(row, model) for every row in order, `jobs` emulator processes at a time (each with its own runner)."""
    with tempfile.TemporaryDirectory() as tmp:
        runners: queue.Queue[Runner] = queue.Queue()
        for i in range(jobs):
            (Path(tmp) / f"w{i}").mkdir()
            runners.put(Runner(Path(tmp) / f"w{i}"))

        def one(row: GemmRow) -> dict:
            runner = runners.get()
            try:
                return model_cycles(runner, row, overrides)
            finally:
                runners.put(runner)

        with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
            for row, model in zip(rows, pool.map(one, rows)):
                yield row, model


def calibration(rows: list[GemmRow], jobs: int) -> list[tuple[GemmRow, dict]]:
    print(f"## ttnn's 2-D multicast matmul against {GEMM_SOURCE}\n")
    print("Measured = the device profiler's TRISC1 span (ideal cycles / device-based utilization); model = the same "
          "span in the model (timing-only run), model device = the model's device time (the last kernel's end + the "
          "launch). Fitting rows are marked `fit: <constant>`; every other row is held out.\n")
    print("| arch | M x K x N | dtype | fidelity | storage | in0_block_w | per core | out block | subblock | "
          "measured us | model us | error | model device us | |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for row, model in run_rows(rows, jobs):
        results.append((row, model))
        print(table_row(row, model), flush=True)
    summary(results)
    return results


def table_row(row: GemmRow, model: dict) -> str:
    cfg = row_config(row)
    clock = CLOCK_GHZ[row.arch] * 1000
    head = (f"| {row.arch} | {row.m}x{row.k}x{row.n} | {row.dtype} | {row.fidelity} | {row.storage} | "
            f"{cfg.in0_block_w} | {cfg.per_core_m}x{cfg.per_core_n} | {cfg.out_block_h}x{cfg.out_block_w} | "
            f"{cfg.out_subblock_h}x{cfg.out_subblock_w} | {row.device_us():.1f} |")
    fitted = fitted_constants(row)
    note = f"fit: {', '.join(fitted)}" if fitted else ""
    if "error" in model:
        return f"{head} not run | - | - | {model['error']} |"
    err = model["trisc1"] / row.device_cycles() - 1
    return f"{head} {model['trisc1'] / clock:.1f} | {err:+.1%} | {model['device'] / clock:.1f} | {note} |"


def summary(results: list[tuple[GemmRow, dict]]) -> None:
    print("\nHeld-out rows, |model / measured - 1| of the TRISC1 span:\n")
    print("| arch | dtype | rows | median | max | within 15% | within 25% |")
    print("|---|---|---|---|---|---|---|")
    groups: dict[tuple[str, str], list[float]] = {}
    for row, model in results:
        if "error" in model or fitted_constants(row):
            continue
        groups.setdefault((row.arch, row.dtype), []).append(abs(model["trisc1"] / row.device_cycles() - 1))
    for (arch, dtype), errs in sorted(groups.items()):
        print(f"| {arch} | {dtype} | {len(errs)} | {statistics.median(errs):.1%} | {max(errs):.1%} | "
              f"{sum(e <= 0.15 for e in errs)} | {sum(e <= 0.25 for e in errs)} |")
    print()


def fit(runner: Runner, arch: str, rounds: int = 3) -> dict[str, float]:
    """Alternating bisection of each FIT constant of `arch` on its row until the rows match within 0.2%."""
    rows = {fit_key(r): r for r in gemm_rows() if r.arch == arch and r.storage == "DRAM"}
    targets = {const: rows[key] for (a, const), key in FIT.items() if a == arch}
    values = {const: float(device_costs(arch)[const]) for const in targets}
    for _ in range(rounds):
        for const, row in targets.items():
            lo, hi = FIT_RANGES[const]
            for _ in range(14):
                mid = (lo + hi) / 2
                trial = model_cycles(runner, row, {**values, const: mid})["trisc1"]
                slower_with_more = const != "unpack_bytes_per_cycle"
                if (trial < row.device_cycles()) == slower_with_more:
                    lo = mid
                else:
                    hi = mid
            values[const] = round((lo + hi) / 2, 1)
            print(f"{arch} {const} = {values[const]} on {row.label}", flush=True)
    return values


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
    # tt-low-level-documentation data_movement_doc/perf_plots/wormhole_b0/csv/"Noc Estimator - DRAM Interleaved All to
    # All.csv" / "... All from All.csv": 64 cores, 64 pages of 2 KB each, every bank in turn, one barrier
    for noc, write, read in ((0, 51.4, 186.2), (1, 143.2, 66.3)):
        print(f"| DRAM write, 64 cores x 64 pages, NoC {noc} | {64 * 64 * 2048 / cycles(3, 64, 64, 1, 1, noc):.1f} | "
              f"{write} (DRAM Interleaved All to All) |")
        print(f"| DRAM read, 64 cores x 64 pages, NoC {noc} | {64 * 64 * 2048 / cycles(4, 64, 64, 64, 64, noc):.1f} | "
              f"{read} (DRAM Interleaved All from All) |")
    print()


def select_rows(args) -> list[GemmRow]:
    rows = [r for r in gemm_rows() if args.arch in (None, r.arch)]
    if args.quick:
        rows = [r for r in rows if r.m * r.k * r.n <= 4160 ** 3 and (r.storage == "DRAM" or r.m <= 1280)]
    budget = math.inf if args.all else args.max_mproducts * 1e6
    return [r for r in rows if r.m * r.k * r.n / 32768 <= budget]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--arch", choices=["wormhole_b0", "blackhole"])
    parser.add_argument("--fit", action="store_true")
    parser.add_argument("--all", action="store_true")
    parser.add_argument("--max-mproducts", type=float, default=60.0)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--only-gemm", action="store_true")
    parser.add_argument("--no-gemm", action="store_true", help="only the equality, overhead and primitive sections")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        runner = Runner(work)
        if args.fit:
            for arch in ([args.arch] if args.arch else ["wormhole_b0", "blackhole"]):
                print(json.dumps(fit(runner, arch)))
            return
        if not args.no_gemm:
            calibration(select_rows(args), args.jobs)
        if args.only_gemm:
            return
        equality(runner)
        overhead(runner)
        primitives(work)


if __name__ == "__main__":
    main()
