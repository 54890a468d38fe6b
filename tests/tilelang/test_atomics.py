"""T.atomic_add: blocks adding into the same output tiles (split-K GEMMs, attention backward's dQ, GQA's dK/dV).

Every block that may reach a tile runs on one core in block order (TTSerializeAccumulation); the writer reads the
tile back after its own write barrier. Checked against NumPy on both archs, with the output's starting contents
random (an accumulated output is given like an input)."""
from __future__ import annotations

import numpy as np
import pytest
from tvm.script import tirx as T

from compiler.api import compile_source
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")

SPLIT_K = src('''
    @tilelang.jit
    def split_k(M=128, N=128, K=256, block_M=64, block_N=64, block_K=32, split=4, tile_form=False,
                dtype=T.float16, accum=T.float32):
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), accum)):
            with T.Kernel(N // block_N, M // block_M, split) as (bx, by, bz):
                a = T.alloc_shared((block_M, block_K), dtype)
                b = T.alloc_shared((block_K, block_N), dtype)
                c = T.alloc_fragment((block_M, block_N), accum)
                T.clear(c)
                for ko in T.Pipelined(K // split // block_K, num_stages=2):
                    T.copy(A[by * block_M, bz * (K // split) + ko * block_K], a)
                    T.copy(B[bz * (K // split) + ko * block_K, bx * block_N], b)
                    T.gemm(a, b, c)
                if tile_form:
                    T.atomic_add(C[by * block_M, bx * block_N], c)
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        T.atomic_add(C[by * block_M + i, bx * block_N + j], c[i, j])
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("tile_form", [False, True])
def test_split_k_gemm_adds_every_split_into_c(arch, tile_form):
    result, outcome = run_kernel(SPLIT_K, "split_k", {"tile_form": tile_form}, seed=21, target=TargetConfig(arch=arch))
    a, b = (outcome.inputs[n].astype(np.float16).astype(np.float32) for n in ("A", "B"))
    start = outcome.inputs["C"]                      # the starting contents, given like an input
    np.testing.assert_allclose(outcome.outputs["C"], start + a @ b, rtol=1e-4, atol=1e-3)
    assert outcome.passed, outcome.verification.render()
    plan = result.plan
    assert next(x for x in plan["buffers"] if x["name"] == "C")["accumulate"] is True
    # the four splits of each C block are consecutive blocks of one core, in order
    assert plan["grid"]["vars"][-1] == "bz"
    assert all(core["count"] % 4 == 0 and core["start"] % 4 == 0 for core in plan["work"]["cores"])
    assert "noc_async_write_barrier();\n        cb_reserve_back" in result.artifacts["writer.cpp"].decode()


GROUPED = src('''
    @tilelang.jit
    def grouped(heads=8, groups=4, rows=64, dim=32, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((heads, rows, dim), dtype), Y: T.Tensor((heads // groups, rows, dim), dtype)):
            with T.Kernel(heads, rows // 32) as (bx, by):
                x = T.alloc_shared((32, dim), dtype)
                s = T.alloc_fragment((32, dim), dtype)
                T.copy(X[bx, by * 32, 0], x)
                for i, j in T.Parallel(32, dim):
                    s[i, j] = x[i, j] * 2.0
                T.atomic_add(Y[bx // groups, by * 32:(by + 1) * 32, :], s)   # heads of a group add into one
        return main
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_grouped_heads_add_into_their_groups_output(arch):
    result, outcome = run_kernel(GROUPED, "grouped", seed=22, target=TargetConfig(arch=arch))
    x = outcome.inputs["X"]
    want_y = outcome.inputs["Y"] + 2.0 * x.reshape(2, 4, 64, 32).sum(axis=1)
    np.testing.assert_allclose(outcome.outputs["Y"], want_y, rtol=1e-5, atol=1e-5)
    assert outcome.passed, outcome.verification.render()
    # Y's tiles are shared by a group's 4 heads: heads outermost, 4 groups of 4 blocks (2 row blocks x 2 groups)
    assert result.plan["grid"]["vars"] == ["by", "bx"]
    assert sorted(core["count"] for core in result.plan["work"]["cores"]) == [4, 4, 4, 4]


def test_return_prev_is_located():
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_fragment((32, 32), "float32")
                T.copy(A, a)
                T.atomic_add(C[0, 0], a, return_prev=True)
    ''')
    err = error_of(source)
    assert "return_prev" in err.message and err.location.line == line_of(source, "return_prev=True")


@T.prim_func
def strided_split(A: T.Buffer((64, 256), "float32"), C: T.Buffer((64, 64), "float32")):
    T.func_attr({"tt.accumulate": ["C"]})
    T.device_entry()
    bk, by = T.cta_id([4, 2])              # the split axis outermost: a C block's splits are 2 blocks apart
    a = T.alloc_shared((32, 64), "float32")
    old = T.alloc_shared((32, 64), "float32")
    c = T.alloc_local((32, 64), "float32")
    T.tile.copy(a, A[by * 32:by * 32 + 32, bk * 64:bk * 64 + 64])
    T.tile.copy(old, C[by * 32:by * 32 + 32, 0:64])
    T.tile.add(c, old, a)
    T.tile.copy(C[by * 32:by * 32 + 32, 0:64], c)


@pytest.mark.parametrize("arch", ARCHS)
def test_an_accumulated_tirx_kernel_verifies(arch):
    from compiler.api import emulate

    source = strided_split.script()
    result = compile_source(source, filename="k.py", target=TargetConfig(arch=arch))
    outcome = emulate(result.artifacts, target=TargetConfig(arch=arch), source=source, filename="k.py", seed=23)
    a = outcome.inputs["A"]
    want = outcome.inputs["C"] + a.reshape(64, 4, 64).sum(axis=1)
    np.testing.assert_allclose(outcome.outputs["C"], want, rtol=1e-5, atol=1e-5)
    assert outcome.passed, outcome.verification.render()
