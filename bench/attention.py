"""Attention forward and the memory-bound row kernels (layer norm, RMS norm, softmax) under the timing model, beside
Tenstorrent's published figures (issue 27).

Attention: the TileLang examples (examples/tilelang/flash_attention.py, gqa_attention.py) unmodified, compiled with
the default blocking and emulated timing-only (the same device time as a full run; tests/emulator/test_timing.py).
Per case: modelled device time, TFLOP/s (non-causal 4 B H S^2 D; causal half of it, as ttnn counts), TFLOP/s per core
used, matrix-engine utilization (ideal cycles at the kernel's fidelity / device cycles), and ttnn's figure where one
is published:
  SDPAPrecisionRecipes.md (tt-metal tech_reports/FlashAttention, P150, full grid, 1 x 10 x 8192 x 128, Q256/K512):
  non-causal 1.78 ms (~193 TFLOP/s, ~1.48 per core of 130), causal 1.96 ms (legacy BF16-dest kernel); one core with
  K/V in L1, D128, K 8192: 1.99 TFLOP/s.
Row kernels: modelled time, DRAM bytes moved (read + written) against the minimum (every input read once, every
output written once) and the time the minimum needs at the arch's DRAM bandwidth (banks x GB/s x measured
efficiency, compiler/device_costs.json): memory-bound kernels should sit within 1.5x of it.

ttnn (--ttnn): ttnn 0.81.1's softmax and layer norm / RMS norm kernels from the wheel under our host programs
(tests/emulator/ttnn_programs/softmax.cpp, layernorm.cpp), timing-only at the row kernels' shape, with bf16 and with
fp32 intermediates (fp32_dest_acc_en).

--approx-exp: exp lowered to the LLK's approximate exp (TargetConfig.approx_exp; ttnn's SDPA runs its approximate
exp by default, and so does ttnn::softmax: init_device_compute_kernel_config(..., HiFi4, default_approx_mode=true,
...) in softmax_device_operation.cpp), for the attention rows and the softmax row (ours and, with --ttnn, ttnn's with
EXP_APPROX=1 and math_approx_mode); the norms have no exp. --bf16-scores: the scores held in bfloat16 tiles
(TargetConfig.intermediate_dtype; ttnn's SDPA holds S and P in BF16 in its default kernel and STANDARD recipe).

Usage: .venv/bin/python bench/attention.py [--large] [--only SUBSTRING] [--ttnn] [--approx-exp]
(--large adds BH 1x10x8192x128). Attention rows also print the DRAM bytes read against the minimum (Q, K, V read once)
and which inputs are multicast (TTShareReads: buffer x number of core groups).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TILELANG = ROOT / "examples" / "tilelang"
SDPA_NONCAUSAL_8K_MS = 1.78       # P150 full grid, 1x10x8192x128
SDPA_CAUSAL_8K_MS = 1.96
SDPA_PER_CORE_TFLOPS = 193.0 / 130
SDPA_ONE_CORE_TFLOPS = 1.99

# (label, file, entry, params, arch, ttnn figure)
ATTENTION = [
    ("mha 1x10x2048x128", "flash_attention.py", "flash_attention",
     {"batch": 1, "heads": 10, "seq_len": 2048, "dim": 128, "causal": False}, "blackhole",
     f"ttnn SDPA ~{SDPA_PER_CORE_TFLOPS:.2f} TFLOP/s/core (8k); 1.99 one core"),
    ("mha 1x10x2048x128 causal", "flash_attention.py", "flash_attention",
     {"batch": 1, "heads": 10, "seq_len": 2048, "dim": 128, "causal": True}, "blackhole", ""),
    ("mha 1x10x2048x128", "flash_attention.py", "flash_attention",
     {"batch": 1, "heads": 10, "seq_len": 2048, "dim": 128, "causal": False}, "wormhole_b0", ""),
    ("mha 1x10x2048x128 causal", "flash_attention.py", "flash_attention",
     {"batch": 1, "heads": 10, "seq_len": 2048, "dim": 128, "causal": True}, "wormhole_b0", ""),
    ("gqa 1x8x1024x128, 2 KV heads", "gqa_attention.py", "gqa_attention",
     {"batch": 1, "heads": 8, "groups": 4, "seq_len": 1024, "dim": 128, "causal": False}, "blackhole", ""),
    ("gqa 1x8x1024x128, 2 KV heads", "gqa_attention.py", "gqa_attention",
     {"batch": 1, "heads": 8, "groups": 4, "seq_len": 1024, "dim": 128, "causal": False}, "wormhole_b0", ""),
    ("gqa 1x8x1024x128, 2 KV heads causal", "gqa_attention.py", "gqa_attention",
     {"batch": 1, "heads": 8, "groups": 4, "seq_len": 1024, "dim": 128, "causal": True}, "blackhole", ""),
    ("gqa 1x8x1024x128, 2 KV heads causal", "gqa_attention.py", "gqa_attention",
     {"batch": 1, "heads": 8, "groups": 4, "seq_len": 1024, "dim": 128, "causal": True}, "wormhole_b0", ""),
]
LARGE = [
    ("mha 1x10x8192x128", "flash_attention.py", "flash_attention",
     {"batch": 1, "heads": 10, "seq_len": 8192, "dim": 128, "causal": False}, "blackhole",
     f"ttnn SDPA {SDPA_NONCAUSAL_8K_MS * 1000:.0f} us"),
    ("mha 1x10x8192x128 causal", "flash_attention.py", "flash_attention",
     {"batch": 1, "heads": 10, "seq_len": 8192, "dim": 128, "causal": True}, "blackhole",
     f"ttnn SDPA {SDPA_CAUSAL_8K_MS * 1000:.0f} us"),
]
ROWS = [
    ("layer norm 2048x1024 bf16", "layer_norm.py", "layer_norm", {"rows": 2048, "cols": 1024}),
    ("rms norm 2048x1024 bf16", "rms_norm.py", "rms_norm",
     {"X": "bfloat16[2048,1024]", "W": "bfloat16[1024]", "dtype": "bfloat16"}),
    ("softmax 2048x1024 bf16", "softmax.py", "softmax", {"M": 2048, "N": 1024}),
]


def run(file: str, entry: str, params: dict, arch: str, approx_exp: bool = False, with_multicast: bool = False,
        intermediate_dtype: str = "declared"):
    """The profile of one compile + timing-only run; with_multicast: also the inputs TTShareReads multicasts
    (buffer name x groups of cores, from the plan)."""
    import json

    from compiler import api
    from schemas.target import TargetConfig

    target = TargetConfig(arch=arch, approx_exp=approx_exp, intermediate_dtype=intermediate_dtype)
    source = (TILELANG / file).read_text()
    compiled = api.compile_source(source, filename=file, entry=entry, target=target, params=params)
    outcome = api.emulate(compiled.artifacts, target=target, source=source, filename=file, entry=compiled.entry,
                          params=params, timing_only=True)
    profile = api.profile(compiled.artifacts, outcome.report)
    if not with_multicast:
        return profile
    plan = json.loads(compiled.artifacts["tt.plan.json"])
    shared = ", ".join(f"{m['buffer']} x{m['groups']}" for m in plan.get("multicast", []))
    return profile, shared


def ttnn_softmax_us(rows: int, cols: int, arch: str, fp32: bool, approx_exp: bool = False) -> float:
    """ttnn's softmax (the attention-optimized factory, no mask, numerically stable) on the whole grid, timing-only;
    approx_exp: math_approx_mode (EXP_APPROX=1), ttnn::softmax's default."""
    import numpy as np

    from compiler.target import core_grid_for
    from schemas.target import TargetConfig

    gx, gy = core_grid_for(TargetConfig(arch=arch))
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    cfg = np.array([[rows, cols, rows // 32, gx, gy, 1, int(fp32), 0, 0, int(approx_exp)]], np.float32)
    return ttnn_program(arch, "softmax", {"x": x, "cfg": cfg})[0]


def ttnn_norm(rows: int, cols: int, arch: str, rms: bool, fp32: bool) -> tuple[float, int]:
    """ttnn's layer norm (gamma and beta) or RMS norm (gamma), the interleaved multi-core factory, timing-only:
    (us, DRAM bytes moved)."""
    import numpy as np

    from compiler.target import core_grid_for
    from schemas.target import TargetConfig

    gx, gy = core_grid_for(TargetConfig(arch=arch))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    gamma, beta = (rng.standard_normal((1, cols)).astype(np.float32) for _ in range(2))
    eps = 1e-6 if rms else 1e-5
    cfg = np.array([[rows, cols, gx, gy, int(rms), int(fp32), 1, 1, eps]], np.float32)
    return ttnn_program(arch, "layernorm", {"x": x, "gamma": gamma, "beta": beta, "cfg": cfg})


def ttnn_program(arch: str, program: str, inputs: dict) -> tuple[float, int]:
    """One of tests/emulator/ttnn_programs run timing-only on ttnn's kernels from the wheel: (us, DRAM bytes)."""
    import shutil
    import tempfile

    from compiler.toolchain import emulate, sdk_headers

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shutil.copy(ROOT / "tests" / "emulator" / "ttnn_programs" / f"{program}.cpp", work / "main.cpp")
        shutil.copy(ROOT / "tests" / "emulator" / "bundles" / "common" / "npy_util.hpp", work / "npy_util.hpp")
        result = emulate.run_host_program(work / "main.cpp", inputs, work / "run", arch=arch,
                                          env={"TT_METAL_HOME": str(sdk_headers.ensure_kernels())},
                                          timeout_s=1200, timing_only=True)
    timing = result.report["timing"]
    moved = sum(b["bytes_read"] + b["bytes_written"] for b in result.report["buffers"])
    return timing["device_cycles"] / timing["clock_ghz"] / 1000, moved


def attention_flops(p: dict) -> float:
    heads = p["heads"]
    flops = 4.0 * p["batch"] * heads * p["seq_len"] ** 2 * p["dim"]
    return flops / 2 if p["causal"] else flops


def dram_bytes_per_second(arch: str) -> float:
    from compiler.target import device_costs

    costs = device_costs(arch)
    return costs["dram_banks"] * costs["dram_bank_gbps"] * 1e9 * costs["dram_efficiency"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--large", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--ttnn", action="store_true", help="ttnn's softmax at the row kernels' shape")
    parser.add_argument("--approx-exp", action="store_true",
                        help="attention and softmax with the LLK's approximate exp")
    parser.add_argument("--bf16-scores", action="store_true",
                        help="attention with TargetConfig.intermediate_dtype bfloat16 (the scores held in bfloat16 "
                             "in L1, as ttnn's SDPA holds them)")
    args = parser.parse_args()

    print("| arch | kernel | modelled us | TFLOP/s | TFLOP/s per core | matrix util | cores | DRAM read MB "
          "(minimum, ratio) | multicast CBs | ttnn |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for label, file, entry, params, arch, ttnn in ATTENTION + (LARGE if args.large else []):
        if args.only not in label:
            continue
        t0 = time.perf_counter()
        p, shared = run(file, entry, params, arch, args.approx_exp, with_multicast=True,
                        intermediate_dtype="bfloat16" if args.bf16_scores else "declared")
        seconds = p["device_time_ns"] * 1e-9
        tflops = attention_flops(params) / seconds / 1e12
        print(f"| {arch} | {label} | {seconds * 1e6:.1f} | {tflops:.1f} | {tflops / p['cores_used']:.3f} | "
              f"{p['matrix_utilization']:.1%} | {p['cores_used']} | {p['dram_read_bytes'] / 1e6:.1f} "
              f"({p['dram_read_min_bytes'] / 1e6:.1f}, {p['dram_read_bytes'] / p['dram_read_min_bytes']:.2f}x) | "
              f"{shared or '-'} | {ttnn} |  <!-- {time.perf_counter() - t0:.0f} s -->",
              flush=True)

    print("\n| arch | kernel | modelled us | DRAM bytes moved | minimum | ratio | time of the minimum us | "
          "modelled / minimum time |")
    print("|---|---|---|---|---|---|---|---|")
    for label, file, entry, params in ROWS:
        if args.only not in label:
            continue
        for arch in ("wormhole_b0", "blackhole"):
            p = run(file, entry, params, arch, args.approx_exp)
            if args.approx_exp and entry == "softmax":
                label = label.removesuffix(", approximate exp") + ", approximate exp"
            moved = p["dram_read_bytes"] + p["dram_written_bytes"]
            minimum = p["dram_read_min_bytes"] + p["dram_write_min_bytes"]
            floor_us = minimum / dram_bytes_per_second(arch) * 1e6
            us = p["device_time_ns"] / 1000
            print(f"| {arch} | {label} | {us:.1f} | {moved / 1e6:.2f} MB | {minimum / 1e6:.2f} MB | "
                  f"{moved / minimum:.2f}x | {floor_us:.1f} | {us / floor_us:.2f}x |", flush=True)
            if args.ttnn and entry == "softmax":
                bf16, fp32 = (ttnn_softmax_us(params["M"], params["N"], arch, f, args.approx_exp) for f in (False, True))
                print(f"| {arch} | ttnn softmax (bf16 / fp32 intermediates) | {bf16:.1f} / {fp32:.1f} | | | | "
                      f"{floor_us:.1f} | {bf16 / floor_us:.2f}x / {fp32 / floor_us:.2f}x |", flush=True)
            if args.ttnn and entry in ("layer_norm", "rms_norm"):
                rows, cols = ((int(n) for n in params["X"].split("[")[1].rstrip("]").split(","))
                              if entry == "rms_norm" else (params["rows"], params["cols"]))
                (bf16, moved), (fp32, _) = (ttnn_norm(rows, cols, arch, entry == "rms_norm", f) for f in (False, True))
                what = "RMS norm, gamma" if entry == "rms_norm" else "layer norm, gamma and beta"
                print(f"| {arch} | ttnn {what} (bf16 / fp32 intermediates) | {bf16:.1f} / {fp32:.1f} | "
                      f"{moved / 1e6:.2f} MB | | {moved / minimum:.2f}x | {floor_us:.1f} | "
                      f"{bf16 / floor_us:.2f}x / {fp32 / floor_us:.2f}x |", flush=True)


if __name__ == "__main__":
    main()
