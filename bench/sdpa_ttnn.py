"""ttnn 0.81.1's own SDPA kernels (transformer/sdpa: reader_interleaved, writer_interleaved, compute/sdpa.cpp) on the
emulator, unmodified, under our host program (tests/emulator/ttnn_programs/sdpa.cpp), timing-only, beside the P150
op times of tt-metal's tech_reports/FlashAttention/SDPAPrecisionRecipes.md (issue 26.3). Nothing is fitted on these
rows: the model is compiler/device_costs.json as it stands.

Per row: the modelled device time (the last stream's end plus the launch), the TRISC1 span (the math RISC's first
start to last end across cores, what the device profiler reports), TFLOP/s (non-causal 4 B H S^2 D; causal half of
it), the matrix engine's share (ideal cycles at HiFi2 / the TRISC1 span), the published time and model / measured.

The kernel path: the streaming kernel (compute_streaming.hpp, compile arg 24 = 1), which the factory picks when the
QK subblock is at most 2 rows and divides the K chunk (Q256/K512: 2 x 4) and which the report calls "Legacy (no
precision)"; rows marked "legacy loop" run compute_common.hpp's sdpa_standard (compile arg 24 = 0) for comparison.
The report's non-causal 1.78 ms is its STANDARD recipe (a different kernel, 1.07x the streaming kernel's per-core
throughput at Q256/K512 in its one-core table); its causal 1.96 ms is the streaming kernel itself.

Per row also: each TRISC's busy share of its own span, averaged over cores (UNPACK / MATH / PACK), which says which
thread bounds the kernel under the model.

Two rows that are not the factory's 8192 configuration: one core (the report's per-core throughput table, 1.99
TFLOP/s for the streaming kernel at Q256/K512, D128, K 8192, given as the op time of 1x1x8192x128), which compares
the compute alone; and a head-aligned work split (each head's Q chunks on its own 13 cores, the host program's
cfg[14]): the split the report documents for the recipes' factory, whose STANDARD kernel the 1.78 ms is ("Up to one
batch/head per core, each head's Q chunks run on a chain of cores that forwards K/V"), run here with the streaming
kernel (the report's one-core table: STANDARD 1.07x its throughput). The factory's own split for the streaming
kernel puts four cores on two heads, whose readers fetch the second head's K/V from DRAM tile by tile.

Usage: .venv/bin/python bench/sdpa_ttnn.py [--only SUBSTRING] [--sweep]
(--sweep: the comparison rows, the shapes of bench/attention.py's rows on both archs, at every Q chunk 64/128/256 x
K chunk 128/256/512; the fastest is the figure tilefarm's kernels are held to)
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.toolchain import emulate, sdk_headers  # noqa: E402

PROGRAM = ROOT / "tests" / "emulator" / "ttnn_programs" / "sdpa.cpp"
NPY_UTIL = ROOT / "tests" / "emulator" / "bundles" / "common" / "npy_util.hpp"
SOURCE = "tt-metal tech_reports/FlashAttention/SDPAPrecisionRecipes.md (P150, full grid 13x10)"
HIFI2_CYCLES_PER_TILE = 32
# the report's one-core throughput of the streaming ("legacy") kernel at Q256/K512, as the op time of 1x1x8192x128
ONE_CORE_TFLOPS = 1.99
ONE_CORE_FLOPS = 4 * 8192 * 8192 * 128


class Row(NamedTuple):
    label: str
    b: int
    nqh: int
    nkh: int
    s: int
    d: int
    q_chunk: int
    k_chunk: int
    grid: tuple[int, int]
    causal: bool
    chains: bool       # non-causal: K/V forwarding chains; causal: the reader's prefix chains (kv_chain_mode 2)
    streaming: int     # compile arg 24: the streaming kernel (1) or compute_common.hpp's loop (0)
    published: float | None    # ms
    head_aligned: bool = False
    arch: str = "blackhole"


ROWS = [Row(*row) for row in [
    ("1x10x8192x128 Q256/K512 (K/V chains)", 1, 10, 10, 8192, 128, 256, 512, (13, 10), False, True, 1, 1.78),
    ("1x10x8192x128 Q256/K512 causal", 1, 10, 10, 8192, 128, 256, 512, (13, 10), True, False, 1, 1.96),
    # the reader's causal prefix chains under our own linking rule (the factory's causal chain builder is not in the
    # wheel): per head, the cores whose Q range starts in it, in core order
    ("1x10x8192x128 Q256/K512 causal, prefix chains (our rule)", 1, 10, 10, 8192, 128, 256, 512, (13, 10), True, True,
     1, 1.96),
    ("1x10x2048x128 Q256/K512 (K/V chains)", 1, 10, 10, 2048, 128, 256, 512, (13, 10), False, True, 1, None),
    ("1x10x2048x128 Q256/K512 causal", 1, 10, 10, 2048, 128, 256, 512, (13, 10), True, False, 1, None),
    ("1x10x2048x128 Q256/K512 causal, prefix chains (our rule)", 1, 10, 10, 2048, 128, 256, 512, (13, 10), True, True,
     1, None),
    ("1x10x8192x128 Q256/K512 (K/V chains), legacy loop", 1, 10, 10, 8192, 128, 256, 512, (13, 10), False, True, 0,
     1.78),
    ("1x10x8192x128 Q256/K512 causal, legacy loop", 1, 10, 10, 8192, 128, 256, 512, (13, 10), True, False, 0, 1.96),
    # one core (the report's per-core throughput table: the streaming kernel at Q256/K512, D128, K 8192, 1.99 TFLOP/s
    # per core with K/V in L1; here K/V come from DRAM, which one core's reader keeps ahead of compute)
    ("1x1x8192x128 Q256/K512, one core", 1, 1, 1, 8192, 128, 256, 512, (1, 1), False, False, 1,
     ONE_CORE_FLOPS / ONE_CORE_TFLOPS / 1e9),
    # not the streaming factory's split: each head's 32 Q chunks on its own 13 cores (no core on two heads, every
    # core in its head's K/V chain), the split the report documents for the recipes' factory ("Up to one batch/head
    # per core, each head's Q chunks run on a chain of cores that forwards K/V"), which its STANDARD 1.78 ms ran
    ("1x10x8192x128 Q256/K512 (K/V chains), head-aligned split", 1, 10, 10, 8192, 128, 256, 512, (13, 10), False,
     True, 1, 1.78, True),
]] + [
    # the shapes of bench/attention.py's other rows (issue 27's comparisons at the same shape): Q256/K512 where the
    # sequence allows, the factory's defaults otherwise; no published time
    Row("1x8x1024x128 GQA, 2 KV heads, Q256/K512", 1, 8, 2, 1024, 128, 256, 512, (13, 10), False, False, 1, None),
    Row("1x8x1024x128 GQA, 2 KV heads, Q256/K512 causal", 1, 8, 2, 1024, 128, 256, 512, (13, 10), True, False, 1,
        None),
    Row("wormhole_b0 1x10x2048x128 Q256/K512 (K/V chains)", 1, 10, 10, 2048, 128, 256, 512, (8, 8), False, True, 1,
        None, arch="wormhole_b0"),
    Row("wormhole_b0 1x10x2048x128 Q256/K512 causal", 1, 10, 10, 2048, 128, 256, 512, (8, 8), True, False, 1, None,
        arch="wormhole_b0"),
    Row("wormhole_b0 1x8x1024x128 GQA, 2 KV heads, Q256/K512", 1, 8, 2, 1024, 128, 256, 512, (8, 8), False, False, 1,
        None, arch="wormhole_b0"),
    Row("wormhole_b0 1x8x1024x128 GQA, 2 KV heads, Q256/K512 causal", 1, 8, 2, 1024, 128, 256, 512, (8, 8), True,
        False, 1, None, arch="wormhole_b0"),
]


def run_row(row: Row, workdir: Path) -> emulate.EmulationResult:
    src = workdir / "src"
    src.mkdir(parents=True, exist_ok=True)
    shutil.copy(PROGRAM, src / "main.cpp")
    shutil.copy(NPY_UTIL, src / "npy_util.hpp")
    cfg = np.array([[row.b, row.nqh, row.nkh, row.s, row.d, row.q_chunk, row.k_chunk, *row.grid, row.causal,
                     row.streaming, 1, 2, row.chains and not row.causal, row.head_aligned,
                     row.chains and row.causal]], np.float32)
    return emulate.run_host_program(src / "main.cpp", {"cfg": cfg}, workdir / "run", arch=row.arch,
                                    env={"TT_METAL_HOME": str(sdk_headers.ensure_kernels())}, timeout_s=3600,
                                    timing_only=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", default="")
    parser.add_argument("--sweep", action="store_true",
                        help="the comparison rows (no published time) at every Q chunk 64/128/256 x K chunk "
                             "128/256/512: ttnn's kernels at their best chunk sizes for the shape")
    args = parser.parse_args()
    if args.sweep:
        sweep(args.only)
        return
    print("| case | model device us | model TRISC1 us | TFLOP/s | HiFi2 engine share | UNPACK / MATH / PACK busy | "
          "published ms | model / measured | forced waits | run s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in ROWS:
        if args.only not in row.label:
            continue
        label, b, nqh, s, d, grid, causal, published = (row.label, row.b, row.nqh, row.s, row.d, row.grid,
                                                        row.causal, row.published)
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            result = run_row(row, Path(tmp))
            seconds = time.perf_counter() - t0
        timing = result.report["timing"]
        ghz = timing["clock_ghz"]
        device_us = timing["device_cycles"] / ghz / 1e3
        trisc1_us = timing["trisc1_cycles"] / ghz / 1e3
        flops = 4 * b * nqh * s * s * d / (2 if causal else 1)
        products = 2 * b * nqh * (s // 32) * (s // 32) * (d // 32) / (2 if causal else 1)
        ideal_cycles = products * HIFI2_CYCLES_PER_TILE / (grid[0] * grid[1])
        ratio = f"{device_us / 1e3 / published:.2f}" if published else ""
        shown = f"{published:.3g}" if published else ""
        print(f"| {label} | {device_us:.1f} | {trisc1_us:.1f} | {flops / device_us / 1e6:.1f} | "
              f"{ideal_cycles / timing['trisc1_cycles']:.1%} | {thread_busy(timing)} | {shown} | {ratio} | "
              f"{sum(p['forced_waits'] for p in timing['programs'])} | {seconds:.0f} |",
              flush=True)


def sweep(only: str) -> None:
    """Each comparison row (no published time) at every chunk pair; the fastest is ttnn's figure for that shape."""
    print("| case | Q chunk / K chunk: model device us | best |")
    print("|---|---|---|")
    for row in ROWS:
        if row.published is not None or row.head_aligned or only not in row.label:
            continue
        times = {}
        for q_chunk in (64, 128, 256):
            for k_chunk in (128, 256, 512):
                trial = row._replace(q_chunk=q_chunk, k_chunk=k_chunk)
                with tempfile.TemporaryDirectory() as tmp:
                    timing = run_row(trial, Path(tmp)).report["timing"]
                times[q_chunk, k_chunk] = timing["device_cycles"] / timing["clock_ghz"] / 1e3
        best = min(times, key=times.get)
        label = row.label.replace(f"Q{row.q_chunk}/K{row.k_chunk}", "").replace(", ,", ",").strip(" ,")
        print(f"| {label} | {', '.join(f'Q{q}/K{k} {t:.1f}' for (q, k), t in times.items())} | "
              f"Q{best[0]}/K{best[1]} {times[best]:.1f} |", flush=True)


def thread_busy(timing: dict) -> str:
    """Each compute TRISC's busy cycles over its own span (its end), averaged over the cores that run compute."""
    shares = {"TRISC0": [], "TRISC1": [], "TRISC2": []}
    for program in timing["programs"]:
        for stream in program["streams"]:
            if stream["risc"] in shares and stream["end"] > 0:
                shares[stream["risc"]].append(stream["busy"] / stream["end"])
    return " / ".join(f"{np.mean(v):.0%}" if v else "-" for v in shares.values())


if __name__ == "__main__":
    main()
