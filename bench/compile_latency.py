"""Compile latency per kernel in a warm process: parse / pipeline / codegen, median of N runs.

Target (compiler-core issue): GEMM 256^3 end to end under 30 ms warm.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.samples import tile_gemm  # noqa: E402  (after the path above)

GEMM_256 = tile_gemm(256, 256, 256)


def main(runs: int = 30) -> None:
    t0 = time.perf_counter()
    from compiler.api import compile_source
    from schemas.target import TargetConfig
    import_s = time.perf_counter() - t0
    kernels = {"gemm_256^3": GEMM_256}
    kernels.update({p.stem: p.read_text() for p in sorted((ROOT / "examples").glob("*.py")) if p.stem != "bad_syntax"})
    print(f"import compiler+tvm: {import_s * 1e3:.0f} ms; medians of {runs} warm runs (ms), wormhole_b0")
    print(f"{'kernel':<22} {'parse':>8} {'pipeline':>9} {'codegen':>8} {'total':>8} {'p90 total':>10}")
    for name, text in kernels.items():
        compile_source(text, filename=f"{name}.py", target=TargetConfig())  # warm-up
        samples = [compile_source(text, filename=f"{name}.py", target=TargetConfig()).timings for _ in range(runs)]
        med = {k: statistics.median(s[k] for s in samples) * 1e3 for k in ("parse", "pipeline", "codegen", "total")}
        totals = sorted(s["total"] for s in samples)
        p90 = totals[int(0.9 * (len(totals) - 1))] * 1e3
        print(f"{name:<22} {med['parse']:8.2f} {med['pipeline']:9.2f} {med['codegen']:8.2f} {med['total']:8.2f} {p90:10.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
