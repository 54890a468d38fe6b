"""No silent wrong code: kernels that write or read a tensor in several multi-tile regions, reductions over a padded
width, the emulator's page identity check that proves every hand-off, and bfloat16 inputs as users save them.

Every kernel is checked against its own NumPy formula (not only the project's reference), on both archs."""
from __future__ import annotations

import math
import shutil
import textwrap
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from compiler.api import compile_source, emulate
from compiler.errors import CompileError
from compiler.toolchain.emulate import EmulationError, run_program
from compiler.toolchain.verification import check_inputs
from schemas.target import TargetConfig

ARCHES = ("wormhole_b0", "blackhole")
HEADER = "import tilelang\nimport tilelang.language as T\n"


def src(body: str) -> str:
    return HEADER + textwrap.dedent(body)


def run(source: str, entry: str, params: dict, arch: str, blocking: str | None = None):
    target = TargetConfig(arch=arch, **({"blocking": blocking} if blocking else {}))
    result = compile_source(source, filename="k.py", entry=entry, params=params, target=target)
    outcome = emulate(result.artifacts, target=target, source=source, filename="k.py", entry=entry, params=params)
    return result, outcome


# Two halves of one row computed in one T.Parallel body and written by two copies into one tensor: compute packs
# them interleaved (first half tile 0, second half tile 0, ...), the writer writes one copy after the other.
HALVES = src('''
    @tilelang.jit(out_idx=[1])
    def k(S, D, block_M=64, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((S, D), dtype), Y: T.Tensor((S, D), dtype)):
            with T.Kernel(T.ceildiv(S, block_M), threads=128) as bx:
                a = T.alloc_shared((block_M, 64), dtype)
                b = T.alloc_shared((block_M, 64), dtype)
                y0 = T.alloc_fragment((block_M, 64), T.float32)
                y1 = T.alloc_fragment((block_M, 64), T.float32)
                T.copy(X[bx * block_M:(bx + 1) * block_M, 64:128], b)
                T.copy(X[bx * block_M:(bx + 1) * block_M, 0:64], a)
                for i, j in T.Parallel(block_M, 64):
                    y0[i, j] = a[i, j] * 0.5
                    y1[i, j] = a[i, j] * b[i, j]
                T.copy(y1, Y[bx * block_M:(bx + 1) * block_M, 0:64])
                T.copy(y0, Y[bx * block_M:(bx + 1) * block_M, 64:128])
        return main
''')


def halves_expected(x):
    return np.concatenate([x[:, :64] * x[:, 64:], x[:, :64] * 0.5], axis=1)


@pytest.mark.parametrize("arch", ARCHES)
def test_halves_written_by_two_copies_come_out_in_place(arch):
    _, outcome = run(HALVES, "k", {"S": 64, "D": 128}, arch)
    x = outcome.inputs["X"].astype(np.float32)
    np.testing.assert_array_equal(outcome.outputs["Y"], halves_expected(x))
    assert outcome.passed, outcome.verification.render()


def test_halves_of_a_large_block_do_not_deadlock():
    """16 tiles per half at once: the second half's output CB holds its whole region (compute pushes it while the
    writer still drains the first half)."""
    _, outcome = run(HALVES, "k", {"S": 512, "D": 128, "block_M": 512}, "wormhole_b0", blocking="as_written")
    x = outcome.inputs["X"].astype(np.float32)
    np.testing.assert_array_equal(outcome.outputs["Y"], halves_expected(x))


ROPE = src('''
    @tilelang.jit(out_idx=[1])
    def rope(B, S, H, D, block_S=32, dtype=T.float32):
        half = D // 2
        @T.prim_func
        def main(Q: T.Tensor((B, S, H, D), dtype), Out: T.Tensor((B, S, H, D), dtype)):
            with T.Kernel(T.ceildiv(S, block_S), H, B, threads=128) as (bx, by, bz):
                x1 = T.alloc_shared((block_S, half), dtype)
                x2 = T.alloc_shared((block_S, half), dtype)
                y1 = T.alloc_fragment((block_S, half), dtype)
                y2 = T.alloc_fragment((block_S, half), dtype)
                s0 = bx * block_S
                T.copy(Q[bz, s0:s0 + block_S, by, 0:half], x1)
                T.copy(Q[bz, s0:s0 + block_S, by, half:D], x2)
                for i, j in T.Parallel(block_S, half):
                    y1[i, j] = x2[i, j] * 2.0
                    y2[i, j] = x1[i, j] - x2[i, j]
                T.copy(y1, Out[bz, s0:s0 + block_S, by, 0:half])
                T.copy(y2, Out[bz, s0:s0 + block_S, by, half:D])
        return main
''')


@pytest.mark.parametrize("arch", ARCHES)
def test_rotary_halves_of_a_4d_head(arch):
    _, outcome = run(ROPE, "rope", {"B": 1, "S": 64, "H": 2, "D": 128}, arch)
    q = outcome.inputs["Q"].astype(np.float32)
    want = np.concatenate([q[..., 64:] * 2.0, q[..., :64] - q[..., 64:]], axis=-1)
    np.testing.assert_array_equal(outcome.outputs["Out"], want)


ROWS = src('''
    @tilelang.jit(out_idx=[1])
    def rows3(M, N, block_M=96, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
                a = T.alloc_shared((block_M, N), dtype)
                p = T.alloc_fragment((32, N), dtype)
                q = T.alloc_fragment((32, N), dtype)
                r = T.alloc_fragment((32, N), dtype)
                T.copy(X[bx * block_M:(bx + 1) * block_M, 0:N], a)
                for i, j in T.Parallel(32, N):
                    p[i, j] = a[i + 64, j] + 1.0
                    q[i, j] = a[i, j] * 2.0
                    r[i, j] = a[i + 32, j] * 3.0
                T.copy(q, Y[bx * block_M:bx * block_M + 32, 0:N])
                T.copy(r, Y[bx * block_M + 32:bx * block_M + 64, 0:N])
                T.copy(p, Y[bx * block_M + 64:bx * block_M + 96, 0:N])
        return main
''')


@pytest.mark.parametrize("arch", ARCHES)
def test_three_row_parts_of_one_block(arch):
    _, outcome = run(ROWS, "rows3", {"M": 192, "N": 96}, arch)
    x = outcome.inputs["X"].astype(np.float32).reshape(2, 3, 32, 96)
    want = np.stack([x[:, 0] * 2.0, x[:, 1] * 3.0, x[:, 2] + 1.0], axis=1).reshape(192, 96)
    np.testing.assert_array_equal(outcome.outputs["Y"], want)


GEMM_HALVES = src('''
    @tilelang.jit(out_idx=[2])
    def gh(M, N, K, block_M=64, block_N=128, block_K=32, dtype=T.bfloat16):
        hn = block_N // 2
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), T.float32)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                A_s = T.alloc_shared((block_M, block_K), dtype)
                B_s = T.alloc_shared((block_K, block_N), dtype)
                C_l = T.alloc_fragment((block_M, block_N), T.float32)
                T.clear(C_l)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(A[by * block_M, k * block_K], A_s)
                    T.copy(B[k * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_l)
                T.copy(C_l[:, 0:hn], C[by * block_M:(by + 1) * block_M, bx * block_N + hn:(bx + 1) * block_N])
                T.copy(C_l[:, hn:block_N], C[by * block_M:(by + 1) * block_M, bx * block_N:bx * block_N + hn])
        return main
''')


@pytest.mark.parametrize("arch", ARCHES)
def test_gemm_output_written_in_swapped_halves(arch):
    _, outcome = run(GEMM_HALVES, "gh", {"M": 128, "N": 256, "K": 64}, arch)
    a, b = (outcome.inputs[n].astype(np.float32) for n in ("A", "B"))
    c = (a @ b).reshape(128, 2, 2, 64)[:, :, ::-1].reshape(128, 256)
    np.testing.assert_allclose(outcome.outputs["C"], c, rtol=0.05, atol=0.1)   # bf16 operands, HiFi2: the halves
    # trading places would be off by O(1)
    assert outcome.passed, outcome.verification.render()


RAW_THEN_HALVES = src('''
    @tilelang.jit(out_idx=[2, 3])
    def k(M, N, K, block_M=64, block_N=128, block_K=32, dtype=T.bfloat16):
        hn = block_N // 2
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), T.float32),
                 D: T.Tensor((M, N), T.float32)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
                A_s = T.alloc_shared((block_M, block_K), dtype)
                B_s = T.alloc_shared((block_K, block_N), dtype)
                C_l = T.alloc_fragment((block_M, block_N), T.float32)
                T.clear(C_l)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(A[by * block_M, k * block_K], A_s)
                    T.copy(B[k * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_l)
                T.copy(C_l, C[by * block_M, bx * block_N])
                T.copy(C_l[:, hn:block_N], D[by * block_M:(by + 1) * block_M, bx * block_N:bx * block_N + hn])
                T.copy(C_l[:, 0:hn], D[by * block_M:(by + 1) * block_M, bx * block_N + hn:(bx + 1) * block_N])
        return main
''')


@pytest.mark.parametrize("arch", ARCHES)
def test_raw_accumulator_then_its_halves(arch):
    """Was a deadlock: the whole accumulator and then its halves, all from one fused K loop's result."""
    _, outcome = run(RAW_THEN_HALVES, "k", {"M": 128, "N": 256, "K": 64}, arch)
    a, b = (outcome.inputs[n].astype(np.float32) for n in ("A", "B"))
    c = a @ b
    np.testing.assert_allclose(outcome.outputs["C"], c, rtol=0.05, atol=0.1)
    np.testing.assert_allclose(outcome.outputs["D"], c.reshape(128, 2, 2, 64)[:, :, ::-1].reshape(128, 256),
                               rtol=0.05, atol=0.1)
    assert outcome.passed, outcome.verification.render()


WIDTHS = src('''
    @tilelang.jit(out_idx=[1])
    def k(M, block_M=64, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((M, 160), dtype), Y: T.Tensor((M, 160), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
                a = T.alloc_shared((block_M, 160), dtype)
                p = T.alloc_fragment((block_M, 32), dtype)
                q = T.alloc_fragment((block_M, 128), dtype)
                T.copy(X[bx * block_M:(bx + 1) * block_M, 0:160], a)
                for i, j in T.Parallel(block_M, 32):
                    p[i, j] = a[i, j + 128] * 2.0
                for i, j in T.Parallel(block_M, 128):
                    q[i, j] = a[i, j] + 1.0
                T.copy(q, Y[bx * block_M:(bx + 1) * block_M, 32:160])
                T.copy(p, Y[bx * block_M:(bx + 1) * block_M, 0:32])
        return main
''')


def test_parts_of_different_widths_into_one_output():
    """Was a CB overrun: write-outs of 1 and 4 tiles per row through one output CB."""
    _, outcome = run(WIDTHS, "k", {"M": 128}, "blackhole")
    x = outcome.inputs["X"].astype(np.float32)
    np.testing.assert_array_equal(outcome.outputs["Y"], np.concatenate([x[:, 128:] * 2.0, x[:, :128] + 1.0], axis=1))


# ---- reductions over a width that is not a multiple of 32 --------------------------------------------------------
PADDED_SUM = src('''
    @tilelang.jit(out_idx=[1])
    def rsum(M, N, block_M=32, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), R: T.Tensor((M,), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
                a = T.alloc_shared((block_M, N), dtype)
                e = T.alloc_fragment((block_M, N), dtype)
                s = T.alloc_fragment((block_M,), dtype)
                T.copy(X[bx * block_M:(bx + 1) * block_M, 0:N], a)
                for i, j in T.Parallel(block_M, N):
                    e[i, j] = T.exp(a[i, j])
                T.reduce_sum(e, s, dim=1)
                T.copy(s, R[bx * block_M:(bx + 1) * block_M])
        return main
''')

PADDED_MAX = src('''
    @tilelang.jit(out_idx=[1])
    def rmax(M, N, block_M=32, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), R: T.Tensor((M,), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
                a = T.alloc_shared((block_M, N), dtype)
                e = T.alloc_fragment((block_M, N), dtype)
                m = T.alloc_fragment((block_M,), dtype)
                T.copy(X[bx * block_M:(bx + 1) * block_M, 0:N], a)
                for i, j in T.Parallel(block_M, N):
                    e[i, j] = a[i, j] - 3.0
                T.reduce_max(e, m, dim=1)
                T.copy(m, R[bx * block_M:(bx + 1) * block_M])
        return main
''')


@pytest.mark.parametrize("arch", ARCHES)
def test_padded_sum_counts_only_the_row(arch):
    """exp(0) = 1 in each of the 24 padded columns would add 24 to every row."""
    _, outcome = run(PADDED_SUM, "rsum", {"M": 64, "N": 232}, arch)
    x = outcome.inputs["X"].astype(np.float32)
    np.testing.assert_allclose(outcome.outputs["R"], np.exp(x).sum(axis=1), rtol=2e-3)


@pytest.mark.parametrize("arch", ARCHES)
def test_padded_max_of_negative_rows(arch):
    """Every element is below -2: a max that saw the padding's -3 would still be right, one that saw zeros not."""
    _, outcome = run(PADDED_MAX, "rmax", {"M": 64, "N": 232}, arch)
    x = outcome.inputs["X"].astype(np.float32)
    got = outcome.outputs["R"]
    assert (got < -1.9).all(), got.max()
    np.testing.assert_allclose(got, (x - 3.0).max(axis=1), rtol=2e-3)


def test_padded_reduction_of_many_tiles():
    """A block of 2x10 tiles: the mask is written whole (tile by tile it would not fit DST)."""
    _, outcome = run(PADDED_SUM, "rsum", {"M": 128, "N": 300, "block_M": 64}, "blackhole", blocking="as_written")
    x = outcome.inputs["X"].astype(np.float32)
    np.testing.assert_allclose(outcome.outputs["R"], np.exp(x).sum(axis=1), rtol=2e-3)


# ---- the emulator proves every hand-off ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def halves_bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("halves")
    result = compile_source(HALVES, filename="k.py", entry="k", params={"S": 64, "D": 128})
    for name, data in result.artifacts.items():
        (out / name).write_bytes(data)
    return out


def edited(bundle: Path, tmp_path: Path, kernel: str, old: str, new: str) -> Path:
    copy = tmp_path / "bundle"
    shutil.copytree(bundle, copy)
    text = (copy / kernel).read_text()
    assert old in text, text
    (copy / kernel).write_text(text.replace(old, new, 1))
    return copy


def page_moves(text: str, call: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if call in line]


def mismatch_of(bundle: Path, tmp_path: Path, kernel: str, line: str, swapped: str) -> str:
    """The page-mismatch message of the bundle with `line` of `kernel` replaced by `swapped`."""
    assert swapped != line, line
    x = np.random.default_rng(0).uniform(-1, 1, (64, 128)).astype(np.float32)
    with pytest.raises(EmulationError) as info:
        run_program(edited(bundle, tmp_path, kernel, line, swapped), {"X": x}, tmp_path / "run", timing=False)
    assert info.value.kind == "page-mismatch", info.value.message
    return info.value.message


def test_a_writer_writing_pages_in_another_order_is_caught(halves_bundle, tmp_path):
    """The writer takes the first write-out's two tiles the other way round: the data would be silently wrong."""
    line = page_moves((halves_bundle / "writer.cpp").read_text(), "noc_async_write_page(")[0]
    message = mismatch_of(halves_bundle, tmp_path, "writer.cpp", line,
                          line.replace("* Y_tile_cols + q,", "* Y_tile_cols + 1 - q,"))
    assert "writer.cpp:" in message and "compute.cpp:" in message, message
    assert "packed it for page" in message, message


def test_a_reader_pushing_pages_in_another_order_is_caught(halves_bundle, tmp_path):
    line = page_moves((halves_bundle / "reader.cpp").read_text(), "noc_async_read_page(")[-1]
    loop_var = line.split("X_tile_cols + ")[1].split(",")[0]
    message = mismatch_of(halves_bundle, tmp_path, "reader.cpp", line,
                          line.replace(f"X_tile_cols + {loop_var},", f"X_tile_cols + 1 - {loop_var},"))
    assert "reader.cpp:" in message and "compute.cpp:" in message and "expects page" in message, message


def test_the_unedited_bundle_passes_the_same_checks(halves_bundle, tmp_path):
    x = np.random.default_rng(0).uniform(-1, 1, (64, 128)).astype(np.float32)
    result = run_program(halves_bundle, {"X": x}, tmp_path / "run", timing=False)
    np.testing.assert_array_equal(result.outputs["Y"], halves_expected(x))


# ---- bfloat16 inputs as np.save writes them ----------------------------------------------------------------------------
def saved_bf16(tmp_path: Path, values: np.ndarray) -> np.ndarray:
    path = tmp_path / "a.npy"
    np.save(path, values.astype(ml_dtypes.bfloat16))
    loaded = np.load(path)
    assert loaded.dtype.str == "|V2"        # what a user gets back without ml_dtypes' help
    return loaded


def test_a_saved_bfloat16_array_is_read_as_bfloat16(tmp_path):
    values = np.array([[1.5, -2.25], [3.0e-3, 65280.0]], np.float32)
    plan = {"buffers": [{"name": "A", "role": "input", "shape": [2, 2], "dtype": "bfloat16"}]}
    checked = check_inputs(plan, {"A": saved_bf16(tmp_path, values)})
    np.testing.assert_array_equal(checked["A"], values.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_raw_two_byte_values_for_a_float32_buffer_say_what_to_do(tmp_path):
    plan = {"buffers": [{"name": "A", "role": "input", "shape": [2, 2], "dtype": "float32"}]}
    with pytest.raises(CompileError) as info:
        check_inputs(plan, {"A": saved_bf16(tmp_path, np.ones((2, 2), np.float32))})
    message = str(info.value)
    assert "`A`" in message and "ml_dtypes.bfloat16" in message and "float32" in message, message


# ---- tolerances from each output's own path -------------------------------------------------------------------------
COPY_AND_RESIDUAL = src('''
    @tilelang.jit(out_idx=[2, 3, 4])
    def k(M, N, dtype="float32"):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Res: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype),
                 Z: T.Tensor((M, N), dtype), S: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
                x = T.alloc_shared((32, N), dtype)
                r = T.alloc_shared((32, N), dtype)
                z = T.alloc_fragment((32, N), "float32")
                e = T.alloc_fragment((32, N), "float32")
                s = T.alloc_fragment((32,), "float32")
                T.copy(X[bx * 32:(bx + 1) * 32, 0:N], x)
                T.copy(Res[bx * 32:(bx + 1) * 32, 0:N], r)
                for i, j in T.Parallel(32, N):
                    z[i, j] = x[i, j] + r[i, j]
                    e[i, j] = T.exp(x[i, j])
                T.reduce_sum(e, s, dim=1)
                T.copy(x, Y[bx * 32:(bx + 1) * 32, 0:N])
                T.copy(z, Z[bx * 32:(bx + 1) * 32, 0:N])
                T.copy(s, S[bx * 32:(bx + 1) * 32])
        return main
''')


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_a_one_ulp_error_in_a_copy_is_caught(dtype):
    """The copy's tolerance is bit-exact, the residual add's a rounding or two, whatever the softmax-like sum beside
    them needs: a systematic one-ulp error in the copy fails, the same device outputs pass."""
    from compiler.toolchain.verification import verify_outputs

    params = {"M": 64, "N": 512, "dtype": dtype}
    result, outcome = run(COPY_AND_RESIDUAL, "k", params, "wormhole_b0")
    assert outcome.passed, outcome.verification.render()
    checks = {o.name: o for o in outcome.verification.outputs}
    assert checks["Y"].rtol == 0 and checks["Y"].atol == 0 and "bit-exact" in checks["Y"].derivation
    # was 0.133 when one sum anywhere loosened every output: now a rounding or two of the data's own format
    assert 0 < checks["Z"].rtol < (1e-3 if dtype == "float32" else 2e-2), checks["Z"]
    assert checks["S"].rtol > checks["Z"].rtol, outcome.verification.render()
    plan = __import__("json").loads(result.artifacts["tt.plan.json"])
    one_ulp = dict(outcome.outputs)
    y = outcome.outputs["Y"]
    one_ulp["Y"] = np.nextafter(y, np.array(np.inf, y.dtype)).astype(y.dtype)
    report = verify_outputs(plan, outcome.inputs, one_ulp, COPY_AND_RESIDUAL, filename="k.py", entry="k",
                            params=params)
    failed = {o.name for o in report.outputs if not o.ok}
    assert failed == {"Y"}, report.render()


ROW_MAX = src('''
    @tilelang.jit(out_idx=[1])
    def k(M, N):
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), R: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
                x = T.alloc_shared((32, N), "float32")
                r = T.alloc_fragment((32,), "float32")
                T.copy(X[bx * 32:(bx + 1) * 32, 0:N], x)
                T.reduce_max(x, r, dim=1)
                T.copy(r, R[bx * 32:(bx + 1) * 32])
        return main
''')


def test_a_row_max_is_held_to_one_rounding_not_to_a_sum_of_its_row():
    """A maximum is one of its terms: its tolerance is the roundings of the path it takes (none here: an fp32 row max
    is the SFPU's sfpu_reduce, exact), not the 2*sqrt(N) roundings of a sum of N terms (0.031 at N = 1024, which let
    the next-largest element pass)."""
    from compiler.toolchain.verification import verify_outputs

    params = {"M": 64, "N": 1024}
    result, outcome = run(ROW_MAX, "k", params, "wormhole_b0")
    assert outcome.passed, outcome.verification.render()
    (check,) = outcome.verification.outputs
    assert check.rtol == 0 and "bit-exact" in check.derivation, check
    x = outcome.inputs["X"]
    runner_up = np.sort(x, axis=1)[:, -2].astype(np.float32)    # the second-largest of each row
    gap = np.abs(runner_up - x.max(axis=1)) / np.abs(x.max(axis=1))
    assert np.all(gap < 2 * math.sqrt(1024) * 2.0**-11) and np.any(gap > 2 * 2.0**-11)   # within a sum's tolerance
    plan = __import__("json").loads(result.artifacts["tt.plan.json"])
    report = verify_outputs(plan, outcome.inputs, {"R": runner_up}, ROW_MAX, filename="k.py", entry="k", params=params)
    assert not report.ok, report.render()


def test_the_verifier_refuses_pages_handed_over_in_another_order():
    """At compile time: the writer of the halves kernel replayed with its first write-out's tiles the other way
    round is refused before any code runs; the program as generated is not."""
    import tvm
    import tvm_ffi
    from tvm import tirx

    from compiler import attrs, ops
    from compiler.frontend import load_kernel
    from compiler.passes.hand_offs import check_hand_offs
    from compiler.pipeline import optimize_for_target_tt

    target = TargetConfig(arch="wormhole_b0")
    loaded = load_kernel(HALVES, "k.py", "k", {"S": 64, "D": 128}, cores=64)
    func = attrs.put(loaded.func, {attrs.SOURCE_FILE: "k.py", attrs.ENTRY: loaded.entry})
    mod = optimize_for_target_tt(tvm.IRModule({loaded.entry: func}), target)
    cbs = attrs.CB_CONFIG.get(mod["compute"])
    assert check_hand_offs(mod, cbs) == []
    first_out = min(c["index"] for c in cbs if c["role"] == "output")

    def swap(node):       # the first write-out's tile column j becomes (tiles - 1 - j) within its region
        found = ops.intrinsic_of(node)
        if found is None or found[0].name != "write_tile" or int(found[1][0]) != first_out:
            return node
        cb, index, name, row, col = found[1]
        return ops.call("write_tile", cb, index, name.value, row, col + 1 - 2 * index)
    writer = mod["writer"].with_body(tvm_ffi.structural_map(mod["writer"].body, (tirx.Evaluate, swap), order="post"))
    mod.update_func(mod.get_global_var("writer"), writer)
    problems = check_hand_offs(mod, cbs)
    assert len(problems) == 1 and "taken by the writer" in problems[0], problems
