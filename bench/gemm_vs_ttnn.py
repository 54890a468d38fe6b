"""tilefarm's GEMM (examples/tilelang/matmul.py, written as TileLang's current GEMM example: eager JIT, bf16 output)
against ttnn's own 2-D multicast matmul, both under the emulator's one timing model (compiler/device_costs.json),
shape for shape.

ttnn: the wheel's kernels under tests/emulator/ttnn_programs/matmul_2d_mcast.cpp with the block sizes of the
GEMM_FLOPS benchmark (bench/timing_model.py: `benchmark_config`; 1024^3 and 2048^3 are its (1, 1, 1) rows:
in0_block_w = K/8/32, one out block per core; 4096^3 in0_block_w_div 1, 2 x 2 out blocks), packer L1 accumulation,
bf16 DST as the report ran it (fp32_dest_acc_en False). The same kernels with fp32_dest_acc_en (an fp32 DST holds
half the tiles: the largest subblock of at most 4 tiles; in0_block_w halved until the CBs fit L1) are the yardstick
for a float32 accumulator. Measured: GEMM_FLOPS.md's DRAM-interleaved traced rows (bf16 DST) where it has them.

tilefarm: the same kernel file compiled for each accumulator dtype (`accum_dtype` bfloat16 or float32), bf16 inputs
and output, default blocking, timing-only runs on the emulator; DRAM reads from its counters.

Both archs at 8x8 cores (the ttnn host program's grid); Blackhole also at tilefarm's default 13x10 grid; Wormhole
also with the output kept block-sharded in L1 (`l1_shard`), beside GEMM_FLOPS' rows with in0 and out in L1.
The ratio is reported twice (issue 26.4): against ttnn's kernels at the config ttnn's benchmark picks, and against
ttnn's kernels given tilefarm's block structure (`ttnn_at_blocks`: tilefarm's per-core block, K step and matmul call
shape read off the compiled program, as a MatmulConfig: per_core and out block = tilefarm's block, in0_block_w =
its K step in tiles, out subblock = its matmul_block rt x ct, packer L1 accumulation) - what of the difference is
the blocking and what is the kernels. bench/gemm_sensitivity.py moves every fitted or estimated constant.
Usage: python bench/gemm_vs_ttnn.py [--quick] [--n N] [--shape ARCH M K N DIV]   (--quick: 1024^3 and 2048^3 on
wormhole_b0 only; --n: one shape; --shape: one M x K x N shape, bf16 HiFi2 bf16 accumulator, tilefarm at its default
grid against ttnn's kernels at the benchmark's DRAM config with in0_block_w_div DIV on the arch's full grid)
"""
from __future__ import annotations

import dataclasses
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from compiler import api  # noqa: E402
from compiler.toolchain import emulate  # noqa: E402
from compiler.toolchain.verification import zero_inputs  # noqa: E402
from schemas.target import TargetConfig  # noqa: E402
from tests.emulator.test_ttnn_kernels import MatmulConfig  # noqa: E402
from timing_model import FIDELITY, SUBBLOCKS, Runner, benchmark_config  # noqa: E402

GEMM = ROOT / "examples" / "tilelang" / "matmul.py"
# (n, in0_block_w_div, num_out_blocks_h, num_out_blocks_w): test_benchmark.py's bf16 rows at tt-metal b7c30ff06218
SHAPES = [(1024, 1, 1, 1), (2048, 1, 1, 1), (4096, 1, 2, 2)]
# GEMM_FLOPS.md, N150 out-of-box table, DRAM-interleaved, traced, bf16, HiFi2 (inference time, us)
# tt_performance_facts.md (GEMM_FLOPS manually tuned rows): in0 and the output sharded in L1, in1 DRAM, bf16
MEASURED_L1_US = {(1024, "HiFi4"): 46.3, (2048, "HiFi2"): 218.2, (2048, "HiFi4"): 326.5}
MEASURED_US = {(1024, "HiFi2"): 68.98, (2048, "HiFi2"): 298.92, (4096, "HiFi2"): 1983.0, (4096, "HiFi4"): 2720.0}


def ttnn_fp32_dest(cfg):
    """The benchmark's config with an fp32 DST: the largest subblock of at most 4 tiles that divides the block."""
    h, w = cfg.out_block_h or cfg.per_core_m, cfg.out_block_w or cfg.per_core_n
    sh, sw = next((a, b) for a, b in SUBBLOCKS if a * b <= 4 and h % a == 0 and w % b == 0)
    return dataclasses.replace(cfg, fp32_dest_acc_en=True, out_subblock_h=sh, out_subblock_w=sw)


def ttnn_us(runner: Runner, cfg, arch: str, overrides: dict | None = None) -> tuple[float | None, str]:
    """Modelled device time of ttnn's kernels (us); halves in0_block_w while the CBs do not fit L1."""
    while True:
        try:
            result = runner.matmul(cfg, timing_only=True, arch=arch, cost_overrides=overrides)
        except emulate.EmulationError as err:
            if err.kind == "host-api" and "L1" in err.message and cfg.in0_block_w % 2 == 0:
                cfg = dataclasses.replace(cfg, in0_block_w=cfg.in0_block_w // 2)
                continue
            return None, f"{err.kind}: {err.message.splitlines()[0][:80]}"
        timing = result.report["timing"]
        note = f"in0_block_w {cfg.in0_block_w}, subblock {cfg.out_subblock_h}x{cfg.out_subblock_w}"
        return timing["device_cycles"] / timing["clock_ghz"] / 1000, note


def tilefarm_compile(n: int, accum: str, arch: str, fidelity: str, grid, l1_shard=()):
    target = TargetConfig(arch=arch, math_fidelity=fidelity, core_grid=grid, l1_shard=list(l1_shard))
    params = {"A": f"bfloat16[{n},{n}]", "B": f"bfloat16[{n},{n}]", "dtype": "bfloat16", "accum_dtype": accum}
    return api.compile_source(GEMM.read_text(), filename=GEMM.name, entry="matmul", target=target, params=params)


def tilefarm_run(n: int, accum: str, arch: str, fidelity: str, grid, l1_shard=()) -> dict:
    compiled = tilefarm_compile(n, accum, arch, fidelity, grid, l1_shard)
    target = TargetConfig(arch=arch, math_fidelity=fidelity, core_grid=grid, l1_shard=list(l1_shard))
    outcome = api.emulate(compiled.artifacts, target=target, timing_only=True)
    return api.profile(compiled.artifacts, outcome.report)


def tilefarm_us(compiled, arch: str, work: Path, overrides: dict | None = None) -> float:
    """Modelled device time (us) of a compiled tilefarm program, timing-only, under the cost table with
    `overrides` (the kernels stay as compiled)."""
    bundle = work / "bundle"
    bundle.mkdir(parents=True, exist_ok=True)
    for name, data in compiled.artifacts.items():
        (bundle / name).write_bytes(data)
    result = emulate.run_program(bundle, zero_inputs(compiled.plan), work / "run", arch=arch, timeout_s=3600,
                                 timing_only=True, cost_overrides=overrides)
    timing = result.report["timing"]
    return timing["device_cycles"] / timing["clock_ghz"] / 1000


def ttnn_at_blocks(compiled, n: int, fidelity: str, fp32_dest: bool) -> MatmulConfig:
    """ttnn's 2-D multicast matmul given tilefarm's block structure: the per-core block and K step of the A and B
    circular buffers (tiles [rows, cols]) and the output run of its matmul_block calls (rt x ct, from the compute
    kernel's matmul_block_init(in0, in1, transpose, ct, rt, kt)), as the program config's out block, in0_block_w
    and out subblock."""
    cbs = {cb["buffer"]: cb for cb in compiled.plan["circular_buffers"]}
    (per_m, k_tiles), (_, per_n) = cbs["A_shared"]["tiles"], cbs["B_shared"]["tiles"]
    compute = compiled.artifacts["compute.cpp"].decode()
    call = re.search(r"matmul_block_init\(\s*\w+,\s*\w+,\s*\d+,\s*(\d+),\s*(\d+),\s*(\d+)\)", compute)
    ct, rt = int(call.group(1)), int(call.group(2))
    gx, gy = compiled.plan["core_grid"]
    # ttnn gives each core one M x N slice of the grid; tilefarm's blocks are its out blocks (two or more per core
    # when tilefarm's block is smaller than the slice)
    return MatmulConfig(n, n, n, (gx, gy), in0_block_w=k_tiles, out_subblock_h=rt, out_subblock_w=ct,
                        per_core_m=n // 32 // gy, per_core_n=n // 32 // gx, out_block_h=per_m, out_block_w=per_n,
                        packer_l1_acc=True, math_fidelity=FIDELITY[fidelity], math_approx_mode=True, no_data=True,
                        fp32_dest_acc_en=fp32_dest)


def shape_row(arch: str, m: int, k: int, n: int, div: int) -> None:
    """One non-cubic shape: device time and TRISC1 span of tilefarm (default grid and blocking) and of ttnn's
    kernels at the benchmark's config (one out block per core)."""
    grid = (8, 8) if arch == "wormhole_b0" else (13, 10)
    target = TargetConfig(arch=arch, math_fidelity="HiFi2", core_grid=None if arch == "blackhole" else grid)
    params = {"A": f"bfloat16[{m},{k}]", "B": f"bfloat16[{k},{n}]", "dtype": "bfloat16", "accum_dtype": "bfloat16"}
    compiled = api.compile_source(GEMM.read_text(), filename=GEMM.name, entry="matmul", target=target, params=params)
    prof = api.profile(compiled.artifacts, api.emulate(compiled.artifacts, target=target, timing_only=True).report)
    cfg = benchmark_config(m, k, n, div, 1, 1, "HiFi2", grid=grid)
    with tempfile.TemporaryDirectory() as tmp:
        result = Runner(Path(tmp)).matmul(cfg, timing_only=True, arch=arch)
    timing = result.report["timing"]
    clock = timing["clock_ghz"] * 1000
    ours, theirs = prof["device_time_ns"] / 1000, timing["device_cycles"] / clock
    nocs = {kk["role"]: kk["noc"] for kk in compiled.plan["kernels"]}
    print(f"| {arch} | {m}x{k}x{n} | {ours:.1f} | {prof['trisc1_span_ns'] / 1000:.1f} | "
          f"{prof['matrix_utilization_trisc1']:.1%} | {theirs:.1f} | {timing['trisc1_cycles'] / clock:.1f} | "
          f"{ours / theirs:.2f} | in0_block_w {cfg.in0_block_w}, subblock {cfg.out_subblock_h}x{cfg.out_subblock_w} | "
          f"reader {nocs['reader']}, {prof['cores_used']} cores |", flush=True)


def main() -> None:
    if "--shape" in sys.argv:
        i = sys.argv.index("--shape")
        shape_row(sys.argv[i + 1], *(int(v) for v in sys.argv[i + 2:i + 6]))
        return
    quick = "--quick" in sys.argv
    archs = ["wormhole_b0"] if quick else ["wormhole_b0", "blackhole"]
    shapes = SHAPES[:2] if quick else SHAPES
    if "--n" in sys.argv:   # one shape only (e.g. --n 4096, the shape the claim is made at)
        only = int(sys.argv[sys.argv.index("--n") + 1])
        shapes = [s for s in shapes if s[0] == only]
    print("| arch | n^3 | fidelity | accumulator | ttnn (own config) us | ttnn (tilefarm's blocks) us | "
          "tilefarm us (8x8) | tilefarm / ttnn own | tilefarm / ttnn at tilefarm's blocks | ttnn measured us | "
          "tilefarm util | tilefarm DRAM read / min | ttnn own config | tilefarm's blocks |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        runner = Runner(Path(tmp))
        for arch in archs:
            for n, div, bh, bw in shapes:
                for fidelity in ("HiFi2", "HiFi4"):
                    base = benchmark_config(n, n, n, div, bh, bw, fidelity)
                    for accum, cfg in (("bfloat16", base), ("float32", ttnn_fp32_dest(base))):
                        ttnn, note = ttnn_us(runner, cfg, arch)
                        compiled = tilefarm_compile(n, accum, arch, fidelity, (8, 8))
                        blocks = ttnn_at_blocks(compiled, n, fidelity, accum == "float32")
                        ttnn_blocks, blocks_note = ttnn_us(runner, blocks, arch)
                        prof = tilefarm_run(n, accum, arch, fidelity, (8, 8))
                        ours = prof["device_time_ns"] / 1000
                        ratio = f"{ours / ttnn:.2f}" if ttnn else "-"
                        ratio_blocks = f"{ours / ttnn_blocks:.2f}" if ttnn_blocks else "-"
                        measured = MEASURED_US.get((n, fidelity)) if arch == "wormhole_b0" and accum == "bfloat16" \
                            else None
                        print(f"| {arch} | {n} | {fidelity} | {accum} | {f'{ttnn:.1f}' if ttnn else 'not run'} | "
                              f"{f'{ttnn_blocks:.1f}' if ttnn_blocks else 'not run'} | "
                              f"{ours:.1f} | {ratio} | {ratio_blocks} | {measured if measured else '-'} | "
                              f"{prof['matrix_utilization']:.1%} | {prof['dram_read_ratio']:.2f}x | {note} | "
                              f"out block {blocks.out_block_h}x{blocks.out_block_w}, {blocks_note} |", flush=True)
            if arch == "wormhole_b0":   # the output sharded in L1 (GEMM_FLOPS' fastest rows keep in0 and out in L1)
                for n, fidelity in [(n, f) for n, f in ((1024, "HiFi4"), (2048, "HiFi2"), (2048, "HiFi4"))
                                    if n in [s[0] for s in shapes]]:
                    for accum in ("bfloat16", "float32"):
                        prof = tilefarm_run(n, accum, arch, fidelity, (8, 8), l1_shard=["C"])
                        measured = MEASURED_L1_US.get((n, fidelity)) if accum == "bfloat16" else None
                        print(f"| {arch}, C in L1 | {n} | {fidelity} | {accum} | - | - | "
                              f"{prof['device_time_ns'] / 1000:.1f} | - | - | {measured or '-'} (in0 and out L1) | "
                              f"{prof['matrix_utilization']:.1%} | "
                              f"{prof['dram_read_ratio']:.2f}x | - | - |", flush=True)
            if arch == "blackhole":
                for n, *_ in shapes:
                    for accum in ("bfloat16", "float32"):
                        prof = tilefarm_run(n, accum, arch, "HiFi2", None)
                        print(f"| blackhole (default grid) | {n} | HiFi2 | {accum} | - | - | "
                              f"{prof['device_time_ns'] / 1000:.1f} ({prof['cores_used']} cores) | - | - | - | "
                              f"{prof['matrix_utilization']:.1%} | {prof['dram_read_ratio']:.2f}x | - | - |", flush=True)


if __name__ == "__main__":
    main()
