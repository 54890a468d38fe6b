"""Compile latency of the TileLang frontend next to the TIRx frontend, warm process, median of N runs.

The same 256^3 GEMM (fp16 in, fp32 out, 32x32x32 blocks) written both ways, plus the TileLang examples.
`frontend` is source -> PrimFunc (TileLang: evaluate the needed module code + trace + TVMScript parse of the
generated TIRx; of which `trace` is the part TileLang adds); pipeline and codegen are shared.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from compile_latency import GEMM_256  # noqa: E402 -- the TIRx GEMM the compile-latency bench measures

TILELANG = ROOT / "examples" / "tilelang"
CASES = [
    ("tirx gemm_256^3", GEMM_256, None, {}),
    ("tilelang gemm_256^3", (TILELANG / "gemm.py").read_text(), "matmul",
     dict(M=256, N=256, K=256, block_M=32, block_N=32, block_K=32)),
    ("tilelang gemm 64-blocks", (TILELANG / "gemm.py").read_text(), "matmul",
     dict(M=256, N=256, K=256, block_M=64, block_N=64, block_K=64, dtype="bfloat16")),
    ("tilelang elementwise", (TILELANG / "elementwise_add.py").read_text(), "elementwise_add", dict(M=256, N=256)),
    ("tilelang gemm_bias_relu", (TILELANG / "gemm_bias_relu.py").read_text(), "gemm_bias_relu",
     dict(M=256, N=256, K=256)),
]


def main(runs: int = 30) -> None:
    from compiler.api import compile_source
    from compiler.frontend.tilelang import trace

    print(f"medians of {runs} warm runs (ms), wormhole_b0")
    print(f"{'kernel':<26} {'trace':>7} {'frontend':>9} {'pipeline':>9} {'codegen':>8} {'total':>8} {'p90 total':>10}")
    for name, text, entry, params in CASES:
        compile_source(text, filename="k.py", entry=entry, params=params)  # warm-up
        samples = [compile_source(text, filename="k.py", entry=entry, params=params).timings for _ in range(runs)]
        traces = []
        if entry is not None:
            for _ in range(runs):
                t0 = time.perf_counter()
                trace(text, "k.py", entry, params)
                traces.append(time.perf_counter() - t0)
        med = {k: statistics.median(s[k] for s in samples) * 1e3 for k in ("parse", "pipeline", "codegen", "total")}
        p90 = sorted(s["total"] for s in samples)[int(0.9 * (runs - 1))] * 1e3
        tr = f"{statistics.median(traces) * 1e3:7.2f}" if traces else f"{'-':>7}"
        print(f"{name:<26} {tr} {med['parse']:9.2f} {med['pipeline']:9.2f} {med['codegen']:8.2f} {med['total']:8.2f} "
              f"{p90:10.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 30)
