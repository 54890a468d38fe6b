"""What the generated kernels move and how they synchronise, on the emulator's counters (and the per-block call
counts read off the lowered IR), for the TileLang GEMM of examples/tilelang/gemm.py and the attention and
layernorm examples.

Per case: cores used; DRAM tiles read against the minimum (every input tile once); multicasts and semaphore
operations; read barriers and write flushes per block of each data-movement kernel; whether the emulated run
matches the NumPy reference. Usage: python bench/fast_kernels.py [--quick]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path
from compiler import attrs

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GEMM = ROOT / "examples" / "tilelang" / "gemm.py"
ATTENTION = ROOT / "examples" / "tilelang" / "flash_attention.py"
LAYERNORM = ROOT / "examples" / "tilelang" / "layer_norm.py"

CASES = [
    # (label, file, entry, params, arch)
    ("gemm 256^3 bf16", GEMM, "matmul", {"M": 256, "N": 256, "K": 256, "dtype": "bfloat16"}, "wormhole_b0"),
    ("gemm 1024^3 bf16", GEMM, "matmul", {"M": 1024, "N": 1024, "K": 1024, "dtype": "bfloat16"}, "wormhole_b0"),
    ("gemm 1024^3 bf16 BH", GEMM, "matmul", {"M": 1024, "N": 1024, "K": 1024, "dtype": "bfloat16"}, "blackhole"),
    ("gemm 2048^3 bf16", GEMM, "matmul", {"M": 2048, "N": 2048, "K": 2048, "dtype": "bfloat16"}, "wormhole_b0"),
    ("attention 1x8x1024x64", ATTENTION, "flash_attention",
     {"batch": 1, "heads": 8, "seq_len": 1024, "dim": 64, "causal": False}, "wormhole_b0"),
    ("layernorm 2048x1024", LAYERNORM, "layer_norm", {"rows": 2048, "cols": 1024}, "wormhole_b0"),
]
QUICK = {"gemm 256^3 bf16", "gemm 1024^3 bf16", "attention 1x8x1024x64", "layernorm 2048x1024"}

DATAFLOW_CALLS = ("noc_async_read_barrier", "noc_async_writes_flushed", "read_tile", "write_tile")


def per_block_calls(path: Path, entry: str, params: dict, arch: str) -> dict:
    """Calls each data-movement kernel makes per block (one iteration of the persistent loop), loops multiplied
    out; a trip count that depends on the block counts once."""
    import tvm
    from tvm import tirx

    from compiler import ops
    from compiler.frontend import load_kernel
    from compiler.ir import stmts_of
    from compiler.pipeline import optimize_for_target_tt
    from schemas.target import TargetConfig

    loaded = load_kernel(path.read_text(), str(path), entry, params)
    func = attrs.put(loaded.func, {attrs.SOURCE_FILE: loaded.source_file, attrs.ENTRY: loaded.entry})
    mod = optimize_for_target_tt(tvm.IRModule({loaded.entry: func}), TargetConfig(arch=arch))

    def count(stmt, out, scale):
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmts_of(stmt):
                count(s, out, scale)
        elif isinstance(stmt, tirx.For):
            extent = int(stmt.extent) if isinstance(stmt.extent, tirx.IntImm) else 1
            count(stmt.body, out, scale * extent)
        elif isinstance(stmt, tirx.IfThenElse):
            count(stmt.then_case, out, scale)
        else:
            found = ops.intrinsic_of(stmt)
            if found and found[0].name in DATAFLOW_CALLS:
                out[found[0].name] = out.get(found[0].name, 0) + scale

    result = {}
    for role in ("reader", "writer"):
        body = mod[role].body
        loop = next((s for s in stmts_of(body) if isinstance(s, tirx.For)), None)
        out: dict = {}
        count(loop.body if loop is not None else body, out, 1)
        result[role] = out
    return result


def measure(label: str, path: Path, entry: str, params: dict, arch: str) -> str:
    from compiler.api import compile_source, emulate
    from schemas.target import TargetConfig

    target = TargetConfig(arch=arch)
    t = time.perf_counter()
    result = compile_source(path.read_text(), filename=str(path), entry=entry, params=params, target=target)
    compile_ms = (time.perf_counter() - t) * 1e3
    plan = result.plan
    outcome = emulate(result.artifacts, target=target, source=path.read_text(), filename=str(path), entry=entry,
                      params=params)
    report = outcome.report
    inputs = {b["name"]: b for b in plan["buffers"] if b["role"] in ("input", "constant")}
    counters = [c for c in report["buffers"] if c["kind"] == "dram"]
    used = [b for b in plan["buffers"] if b["role"] != "unused"]
    read = sum(c["tiles_read"] for b, c in zip(used, counters) if b["name"] in inputs)
    minimum = sum(b["dram_pages"] for b in inputs.values())
    totals = report["totals"]
    calls = per_block_calls(path, entry, params, arch)
    blocks = max(c["count"] for c in plan["work"]["cores"])
    reader, writer = calls["reader"], calls["writer"]
    ok = "ok" if outcome.verification is not None and outcome.verification.ok else "FAIL"
    return (f"{label:<24} {len(plan['work']['cores']):>5} {blocks:>6} {read:>9} {minimum:>8} {read / minimum:>6.2f} "
            f"{totals['noc_multicasts']:>7} {totals['semaphore_ops']:>8} "
            f"{reader.get('noc_async_read_barrier', 0):>4}/{reader.get('read_tile', 0):<5} "
            f"{writer.get('noc_async_read_barrier', 0):>4}/{writer.get('read_tile', 0):<5} "
            f"{writer.get('noc_async_writes_flushed', 0):>4}/{writer.get('write_tile', 0):<5} "
            f"{compile_ms:>8.0f} {ok:>5}")


def main(argv: list[str]) -> None:
    quick = "--quick" in argv
    print(f"{'case':<24} {'cores':>5} {'blk/c':>6} {'DRAM rd':>9} {'min':>8} {'ratio':>6} {'mcasts':>7} "
          f"{'sem ops':>8} {'rd bar/tiles':>10} {'wr-side rd':>10} {'flush/wr':>10} {'comp ms':>8} {'check':>5}")
    print("  DRAM rd = input tiles read from DRAM, min = input tiles (each read once); blk/c = blocks per core; "
          "per block: reader barriers/tile reads, writer-kernel barriers/tile reads, writer flushes/tile writes")
    for label, path, entry, params, arch in CASES:
        if quick and label not in QUICK:
            continue
        print(measure(label, path, entry, params, arch), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
