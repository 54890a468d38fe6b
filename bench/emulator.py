"""Emulator cost next to the NumPy reference: build (cold / cached) and run times for GEMMs of growing size and
an element-wise kernel. Cold = fresh kernel-object cache and a main.cpp never built before; the emulator runtime
library itself is built once per emulator version (reported separately).

Then ttnn 0.81.1's own kernels from the wheel under our host programs (tests/emulator/ttnn_programs): the 2-D
multicast matmul in the configurations tests/emulator/test_ttnn_kernels.py checks, the element-wise binary op and
the Metal 2.0 attention softmax (named arguments, ttnn's compute kernel library):
JIT time with a fresh kernel cache, emulation time (the report's run_seconds: threads started to all joined),
and what the program moved (DRAM tiles, multicasts, semaphore operations)."""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compiler.samples import tile_gemm  # noqa: E402  (after the path above)

ELTWISE = '''from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer(({n}, {n}), "float32"), B: T.Buffer(({n}, {n}), "float32"), C: T.Buffer(({n}, {n}), "float32")):
    T.device_entry()
    by, bx = T.cta_id([{g2}, {g}])
    A_s = T.alloc_shared((32, 64), "float32")
    B_s = T.alloc_shared((32, 64), "float32")
    C_l = T.alloc_local((32, 64), "float32")
    T.tile.copy(A_s, A[by * 32:by * 32 + 32, bx * 64:bx * 64 + 64])
    T.tile.copy(B_s, B[by * 32:by * 32 + 32, bx * 64:bx * 64 + 64])
    T.tile.exp(C_l, A_s)
    T.tile.mul(C_l, C_l, B_s)
    T.tile.maximum(C_l, C_l, T.float32(0.5))
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 64:bx * 64 + 64], C_l)
'''


def measure(name: str, text: str, runs: int = 3) -> str:
    import numpy as np

    from compiler.api import compile_source
    from compiler.frontend import parse, prepare
    from compiler.reference import run_reference
    from compiler.toolchain.emulate import run_program
    from compiler.toolchain.verification import random_inputs

    result = compile_source(text, filename=f"{name}.py")
    inputs = random_inputs(result.plan, seed=1)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        bundle = result.write(tmp / "bundle")
        main = bundle / "main.cpp"
        main.write_text(main.read_text() + f"\n// bench {time.time_ns()}\n")  # a program never built before
        os.environ["TTEMU_CACHE_DIR"] = str(tmp / "kernels")                  # kernel objects never built before
        cold = run_program(bundle, inputs, tmp / "cold")
        cached = [run_program(bundle, inputs, tmp / f"w{i}") for i in range(runs)]
        del os.environ["TTEMU_CACHE_DIR"]
    func = parse(prepare(text, f"{name}.py"))
    ref_times = []
    for _ in range(runs):
        t = time.perf_counter()
        run_reference(func, inputs)
        ref_times.append(time.perf_counter() - t)
    a, b = (inputs[k].astype(np.float32) for k in ("A", "B"))
    t = time.perf_counter()
    _ = a @ b if "gemm" in name else np.maximum(np.exp(a) * b, 0.5)
    numpy_s = time.perf_counter() - t
    med = statistics.median
    return (f"{name:<14} {result.plan['work']['blocks']:>6} {result.timings['total'] * 1e3:>8.0f} "
            f"{cold.build_seconds + cold.run_seconds:>9.2f} {med(c.build_seconds for c in cached) * 1e3:>9.1f} "
            f"{med(c.run_seconds for c in cached) * 1e3:>8.0f} {med(ref_times) * 1e3:>9.0f} {numpy_s * 1e3:>8.1f}")


def measure_ttnn(name: str, program: str, inputs: dict, runs: int = 3) -> str:
    import shutil

    from compiler.toolchain import sdk_headers
    from compiler.toolchain.emulate import run_host_program

    tests = ROOT / "tests" / "emulator"
    env = {"TT_METAL_HOME": str(sdk_headers.ensure_kernels())}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        shutil.copy(tests / "ttnn_programs" / f"{program}.cpp", tmp / "main.cpp")
        shutil.copy(tests / "bundles" / "common" / "npy_util.hpp", tmp / "npy_util.hpp")
        cold = run_host_program(tmp / "main.cpp", inputs, tmp / "cold", env={**env, "TTEMU_CACHE_DIR": str(tmp / "k")},
                                timeout_s=600)
        warm = [run_host_program(tmp / "main.cpp", inputs, tmp / f"w{i}", env=env, timeout_s=600) for i in range(runs)]
    report = warm[0].report
    cores = len(report["cores"])
    dram_tiles = sum(b["tiles_read"] for b in report["buffers"])
    totals = report["totals"]
    tile_ops = sum(totals["tile_ops"].get(k, 0) for k in ("matmul_block (tiles)", "add_tiles", "sub_tiles", "mul_tiles",
                                                         "reduce_tile", "sub_tiles_bcast", "mul_tiles_bcast",
                                                         "exp_tile", "recip_tile"))
    run_s = statistics.median(r.report["run_seconds"] for r in warm)
    return (f"{name:<30} {cores:>5} {cold.report['jit']['seconds']:>8.2f} {run_s * 1e3:>9.0f} {tile_ops:>9} "
            f"{tile_ops / run_s / 1e3:>8.1f} {dram_tiles:>9} {totals['noc_multicasts']:>7} {totals['semaphore_ops']:>7}")


def main() -> None:
    from compiler.toolchain.emulate import build_host_pch, build_runtime

    t = time.perf_counter()
    build_host_pch(build_runtime())
    print(f"emulator runtime library + host precompiled header: {time.perf_counter() - t:.2f} s "
          "(once per emulator version)")
    print(f"{'kernel':<14} {'blocks':>6} {'compile':>8} {'cold(s)':>9} {'build(ms)':>9} {'run(ms)':>8} "
          f"{'ref(ms)':>9} {'numpy':>8}")
    print("  compile = ms; cold = kernel + program build and run, s; build/run = cached, median; ref = NumPy "
          "interpreter of the input kernel; numpy = the bare NumPy expression")
    for n in (128, 256, 512, 1024):
        print(measure(f"gemm_{n}", tile_gemm(n, n, n, block=64, in_dtype="bfloat16")), flush=True)
    for n in (256, 1024):
        print(measure(f"eltwise_{n}", ELTWISE.format(n=n, g=n // 64, g2=n // 32)), flush=True)

    import numpy as np

    sys.path.insert(0, str(ROOT))
    from tests.emulator.test_ttnn_kernels import MATMUL_CONFIGS, bf16

    print()
    print("ttnn 0.81.1 kernels from the wheel, unmodified (our host programs)")
    print(f"{'program':<30} {'cores':>5} {'jit(s)':>8} {'run(ms)':>9} {'tile ops':>9} {'k ops/s':>8} "
          f"{'DRAM rd':>9} {'mcasts':>7} {'sem ops':>7}")
    print("  jit = kernel compile, fresh cache; run = emulation (threads start to join), median of 3; tile ops = 32x32 "
          "matmul tile products or element-wise / reduce / SFPU tile ops; DRAM rd = tiles read")
    rng = np.random.default_rng(0)
    for key, cfg in MATMUL_CONFIGS.items():
        a = bf16(rng.standard_normal((cfg.m, cfg.k)).astype(np.float32))
        b = bf16(rng.standard_normal((cfg.k, cfg.n)).astype(np.float32))
        print(measure_ttnn(f"matmul {key}", "matmul_2d_mcast", {"a": a, "b": b, "cfg": cfg.cfg()}), flush=True)
    a = bf16(rng.standard_normal((1024, 1024)).astype(np.float32))
    b = bf16(rng.standard_normal((1024, 1024)).astype(np.float32))
    cfg = np.array([[1024, 1024, 0, 8, 8, 0, 0]], np.float32)
    print(measure_ttnn("eltwise add 1024^2-8x8", "eltwise_binary", {"a": a, "b": b, "cfg": cfg}), flush=True)
    x = bf16(rng.standard_normal((2048, 1024)).astype(np.float32))
    cfg = np.array([[2048, 1024, 64, 8, 8, 1, 0, 0, 0]], np.float32)   # numeric-stable, 1 tile row per core
    print(measure_ttnn("softmax 2048x1024-8x8 (Metal 2.0)", "softmax", {"x": x, "cfg": cfg}), flush=True)


if __name__ == "__main__":
    main()
