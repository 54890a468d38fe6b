"""profile.json of the generated kernels (compiler/profile.py, the emulator's timing model): the TileLang GEMM of
examples/tilelang/gemm.py from 256^3 to 4096^3 (timing-only where the arithmetic would take long: the same device
time), flash attention and layer norm; device time, matrix-engine utilization, DRAM reads against the minimum,
the verdict and the costliest source lines; and what the timing model costs over a functional run.

Yardstick (GEMM_FLOPS, ttnn's 2-D multicast matmul on an n150, bf16, DRAM-interleaved): 4096^3 HiFi2 1.983 ms =
52.9% utilization; bench/timing_model.py runs ttnn's own kernels under the same model. Usage: python bench/profiles.py
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TILELANG = ROOT / "examples" / "tilelang"
CASES = [  # (label, file, entry, params, timing only)
    ("gemm 256^3 bf16", "gemm.py", "matmul", {"M": 256, "N": 256, "K": 256, "dtype": "bfloat16"}, False),
    ("gemm 1024^3 bf16", "gemm.py", "matmul", {"M": 1024, "N": 1024, "K": 1024, "dtype": "bfloat16"}, False),
    ("gemm 2048^3 bf16", "gemm.py", "matmul", {"M": 2048, "N": 2048, "K": 2048, "dtype": "bfloat16"}, True),
    ("gemm 4096^3 bf16", "gemm.py", "matmul", {"M": 4096, "N": 4096, "K": 4096, "dtype": "bfloat16"}, True),
    ("flash attention 1x8x1024x64", "flash_attention.py", "flash_attention",
     {"batch": 1, "heads": 8, "seq_len": 1024, "dim": 64, "causal": False}, False),
    ("layer norm 2048x1024", "layer_norm.py", "layer_norm", {"rows": 2048, "cols": 1024}, False),
]


def main() -> None:
    from compiler import api
    from schemas.target import TargetConfig

    target = TargetConfig()
    print("| kernel (wormhole_b0, 8x8) | device us | matrix util | DRAM read / min | bottleneck |")
    print("|---|---|---|---|---|")
    details = []
    for label, file, entry, params, timing_only in CASES:
        source = (TILELANG / file).read_text()
        compiled = api.compile_source(source, filename=file, entry=entry, target=target, params=params)
        outcome = api.emulate(compiled.artifacts, target=target, source=source, filename=file, entry=compiled.entry,
                              params=params, timing_only=timing_only)
        profile = api.profile(compiled.artifacts, outcome.report)
        ratio = profile["dram_read_ratio"]
        print(f"| {label}{' (timing only)' if timing_only else ''} | {profile['device_time_ns'] / 1000:.1f} | "
              f"{profile['matrix_utilization']:.1%} | {ratio:.1f}x | {profile['bottleneck']} |", flush=True)
        lines = source.splitlines()
        top = sorted((r for r in profile["lines"] if r["line"]), key=lambda r: -r["cycles"])[:3]
        details.append(f"{label}: " + "; ".join(f"line {r['line']} {r['share']:.0%} `{lines[r['line'] - 1].strip()[:48]}`"
                                               for r in top))
    print("\ncostliest source lines (share of the cycles attributed to lines):")
    for line in details:
        print(f"  {line}")

    # what the model costs: the same run with and without it (emulator run time, median of 3)
    from compiler.toolchain import emulate as emu
    source = (TILELANG / "gemm.py").read_text()
    params = {"M": 1024, "N": 1024, "K": 1024, "dtype": "bfloat16"}
    compiled = api.compile_source(source, filename="gemm.py", entry="matmul", target=target, params=params)
    import json
    import tempfile

    import numpy as np
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    inputs = {b["name"]: np.random.default_rng(0).uniform(-1, 1, b["shape"]).astype(np.float32)
              for b in plan["buffers"] if b["role"] == "input"}
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "bundle"
        bundle.mkdir()
        for name, data in compiled.artifacts.items():
            (bundle / name).write_bytes(data)
        runs = {True: [], False: []}
        for n in range(3):
            for timing in (False, True):
                t0 = time.perf_counter()
                result = emu.run_program(bundle, inputs, Path(tmp) / f"run-{n}-{timing}", timing=timing)
                runs[timing].append(result.report.get("run_seconds", time.perf_counter() - t0))
    without, with_ = sorted(runs[False])[1], sorted(runs[True])[1]
    print(f"\ntiming model cost, gemm 1024^3 (emulator run seconds, median of 3): without {without:.2f} s, "
          f"with {with_:.2f} s, ratio {with_ / without:.2f} (bound 1.5)")


if __name__ == "__main__":
    main()
