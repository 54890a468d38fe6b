"""Does "tilefarm's GEMM beats ttnn's" survive the timing model's constants? (issue 26.4)

The ratio tilefarm / ttnn (modelled device time, timing-only runs; below 1: tilefarm faster) of bench/gemm_vs_ttnn.py,
both ways it is reported there: against ttnn's 2-D multicast matmul at the config its benchmark picks, and against
the same kernels given tilefarm's block structure. Each constant of compiler/device_costs.json whose kind is
'calibrated' (fitted) or 'estimate' is moved by -50% and +50%, one at a time, the others at their table values;
plus the documented rates issue 26 names as deciding the claim (the packer's L1-accumulation rate, the unpackers' L1
read rate). The programs stay as compiled (tilefarm's blocking is chosen once, at the table's values). A ratio that
crosses 1 is marked FLIPS: under that constant the win is a loss (or the loss a win).

Usage: python bench/gemm_sensitivity.py [--arch wormhole_b0] [--n 4096] [--fidelity HiFi2] [--accum bfloat16]
                                       [--all-constants]
  --all-constants  also constants no run of this shape reads (SFPU, reduce, transpose, mailbox...: the ratio cannot
                   move; listed once as such)
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from gemm_vs_ttnn import SHAPES, tilefarm_compile, tilefarm_us, ttnn_at_blocks, ttnn_fp32_dest, ttnn_us  # noqa: E402
from timing_model import Runner, benchmark_config  # noqa: E402

COSTS = ROOT / "compiler" / "device_costs.json"
NAMED_BY_ISSUE = ("pack_l1_acc_bytes_per_cycle", "unpack_bytes_per_cycle")
# costs no instruction of a bf16 GEMM's kernels reaches (compute: matmul, pack, copy; data movement: NoC, CBs,
# semaphores): moving them cannot move the ratio, so they are not run
NOT_IN_A_GEMM = ("reduce_cycles_per_tile", "transpose_cycles_per_tile", "init_sfpu_cycles", "mailbox_cycles",
                 "eltwise_cycles_per_tile")


def constants(arch: str, everything: bool) -> list[tuple[str, str, float]]:
    table = json.loads(COSTS.read_text())[arch]
    out = []
    for name, entry in table.items():
        if not isinstance(entry["value"], (int, float)):
            continue
        if entry["kind"] in ("calibrated", "estimate") or name in NAMED_BY_ISSUE:
            if everything or name not in NOT_IN_A_GEMM:
                out.append((name, entry["kind"], float(entry["value"])))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--arch", default="wormhole_b0", choices=["wormhole_b0", "blackhole"])
    parser.add_argument("--n", type=int, default=4096)
    parser.add_argument("--fidelity", default="HiFi2", choices=["HiFi2", "HiFi4"])
    parser.add_argument("--accum", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument("--all-constants", action="store_true")
    args = parser.parse_args()
    n, div, bh, bw = next(s for s in SHAPES if s[0] == args.n)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        runner = Runner(work)
        fp32 = args.accum == "float32"
        own = benchmark_config(n, n, n, div, bh, bw, args.fidelity)
        own = ttnn_fp32_dest(own) if fp32 else own
        compiled = tilefarm_compile(n, args.accum, args.arch, args.fidelity, (8, 8))
        blocks = ttnn_at_blocks(compiled, n, args.fidelity, fp32)

        notes: list[str] = []

        def ratios(overrides: dict | None) -> tuple[float, float, float, float, float]:
            ours = tilefarm_us(compiled, args.arch, work / "tilefarm", overrides)
            theirs, note = ttnn_us(runner, own, args.arch, overrides)   # in0_block_w halved until the CBs fit L1
            notes.append(note)
            at_blocks, _ = ttnn_us(runner, blocks, args.arch, overrides)
            return ours, theirs, at_blocks, ours / theirs, ours / at_blocks

        base = ratios(None)
        print(f"{args.arch}, {n}^3 bf16 {args.fidelity}, 8x8 cores, {args.accum} accumulator; ttnn's own config: "
              f"{notes[0]}, out block {own.out_block_h}x{own.out_block_w}; tilefarm's blocks: {blocks.out_block_h}x"
              f"{blocks.out_block_w} tiles, K step {blocks.in0_block_w}, matmul_block {blocks.out_subblock_h}x"
              f"{blocks.out_subblock_w}")
        print(f"at the table's values: tilefarm {base[0]:.1f} us, ttnn (own config) {base[1]:.1f} us, ttnn "
              f"(tilefarm's blocks) {base[2]:.1f} us; ratio {base[3]:.3f} / {base[4]:.3f}\n")
        print("| constant | kind | value | ratio vs ttnn own, -50% | +50% | ratio vs ttnn at tilefarm's blocks, -50% | "
              "+50% | flips |")
        print("|---|---|---|---|---|---|---|---|")
        for name, kind, value in constants(args.arch, args.all_constants):
            low, high = ratios({name: value * 0.5}), ratios({name: value * 1.5})
            flips = [label for label, i in (("own", 3), ("blocks", 4))
                     if any((r[i] < 1) != (base[i] < 1) for r in (low, high))]
            print(f"| {name} | {kind} | {value:g} | {low[3]:.3f} | {high[3]:.3f} | {low[4]:.3f} | {high[4]:.3f} | "
                  f"{'FLIPS (' + ', '.join(flips) + ')' if flips else '-'} |", flush=True)


if __name__ == "__main__":
    main()
