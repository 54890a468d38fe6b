"""How long a user waits for the timing model (issue 26.5): timing-only runs (TTEMU_TIMING_ONLY: every check, CB,
semaphore and NoC call and the replay, no arithmetic) of the shapes the targets name.

- GEMM 4096^3 bf16 HiFi2 on Wormhole 8x8: ttnn 0.81.1's 2-D multicast matmul (the timing model's fitting row,
  bench/timing_model.py) and tilefarm's GEMM (examples/tilelang/matmul.py, as bench/gemm_vs_ttnn.py compiles it).
  Target: <= 10 s.
- Attention 1 x 10 heads x 8192 x 128 on Blackhole's 13x10 grid: tilefarm's flash attention
  (examples/tilelang/flash_attention.py), non-causal and causal. Target: <= 60 s.

Per case: the first run's wall time (the kernels' JIT objects may be cached by an earlier run: the column says how
many kernels were compiled), then the median of the next runs' wall time (compile, inputs, emulator process,
report read), the CPU seconds of the child processes (user + sys: on a machine other jobs share, wall time
measures the load as much as the model), the emulator's run_seconds (launch to the replay's end), and the modelled
device time (identical every run).
Usage: python bench/model_speed.py [--repeat N] [--quick]   (--quick: GEMM only)
"""
from __future__ import annotations

import argparse
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compiler import api  # noqa: E402
from published import gemm_rows  # noqa: E402
from schemas.target import TargetConfig  # noqa: E402
from timing_model import Runner, row_config  # noqa: E402

ATTENTION = ROOT / "examples" / "tilelang" / "flash_attention.py"
GEMM = ROOT / "examples" / "tilelang" / "matmul.py"


def ttnn_gemm(runner: Runner):
    row = next(r for r in gemm_rows() if r.arch == "wormhole_b0" and r.dtype == "bfloat16" and
               r.fidelity == "HiFi2" and (r.m, r.k, r.n) == (4096, 4096, 4096))

    def once() -> tuple[dict, float]:
        result = runner.matmul(row_config(row), timing_only=True, arch=row.arch)
        return result.report, result.run_seconds
    return once


def tilefarm(path: Path, entry: str, params: dict, target: TargetConfig, work: Path):
    source = path.read_text()

    def once() -> tuple[dict, float]:
        compiled = api.compile_source(source, filename=path.name, entry=entry, target=target, params=params)
        outcome = api.emulate(compiled.artifacts, target=target, source=source, filename=path.name,
                              entry=compiled.entry, params=params, timing_only=True, workdir=work)
        return outcome.report, outcome.report.get("run_seconds", 0.0)
    return once


def measure(label: str, once, repeat: int) -> str:
    walls, runs, cpus = [], [], []
    report: dict = {}
    for _ in range(repeat + 1):
        t = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        report, run_seconds = once()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        walls.append(time.perf_counter() - t)
        runs.append(run_seconds)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    timing = report["timing"]
    device_us = timing["device_cycles"] / timing["clock_ghz"] / 1000
    jit = report.get("jit", {}).get("compiled", "-")
    return (f"| {label} | {walls[0]:.1f} (JIT {jit}) | {statistics.median(walls[1:]):.1f} | "
            f"{statistics.median(cpus[1:]):.1f} | {statistics.median(runs[1:]):.1f} | {device_us:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    print("| timing-only run | first wall s | wall s (median) | child CPU s (median) | emulator run s (median) | "
          "modelled device us |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print(measure("ttnn matmul 4096^3 bf16 HiFi2, WH 8x8", ttnn_gemm(Runner(work)), args.repeat), flush=True)
        gemm = {"A": "bfloat16[4096,4096]", "B": "bfloat16[4096,4096]", "dtype": "bfloat16",
                "accum_dtype": "bfloat16"}
        print(measure("tilefarm GEMM 4096^3 bf16, WH 8x8", tilefarm(GEMM, "matmul", gemm, TargetConfig(arch="wormhole_b0", math_fidelity="HiFi2", core_grid=(8, 8)),
                               work / "g"),
                      args.repeat), flush=True)
        if args.quick:
            return
        for causal in (False, True):
            params = {"batch": 1, "heads": 10, "seq_len": 8192, "dim": 128, "causal": causal}
            label = f"tilefarm attention 1x10x8192x128{' causal' if causal else ''}, BH 13x10"
            print(measure(label, tilefarm(ATTENTION, "flash_attention", params, TargetConfig(arch="blackhole"),
                                            work / f"a{causal}"),
                          args.repeat), flush=True)


if __name__ == "__main__":
    main()
