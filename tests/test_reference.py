"""The NumPy reference interpreter against formulas computed independently, in plain NumPy, in each test."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
import tvm

from compiler.reference import ReferenceInterpreterError, run_reference

DATA = Path(__file__).parent / "data"
BF16 = ml_dtypes.bfloat16


def parse(text: str) -> tvm.tirx.PrimFunc:
    # The parser rejects import lines; blank it out so line numbers stay as written.
    return tvm.script.from_source(text.replace("from tvm.script import tirx as T", ""))


def parse_file(name: str) -> tvm.tirx.PrimFunc:
    return parse((DATA / name).read_text())


def f32(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float32)


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(1234)


# ------------------------------------------------------------------------------- the shared examples


def test_example_gemm_fp16_in_fp32_out(rng):
    a = rng.standard_normal((128, 128)).astype(np.float16)
    b = rng.standard_normal((128, 128)).astype(np.float16)
    out = run_reference(parse_file("gemm.py"), {"A": a, "B": b})
    assert set(out) == {"C"} and out["C"].dtype == np.float32 and out["C"].shape == (128, 128)
    expected = a.astype(np.float64) @ b.astype(np.float64)  # exact products of fp16 values
    np.testing.assert_allclose(out["C"], expected, rtol=1e-5, atol=1e-4)


def test_example_gemm_block64_bf16(rng):
    a = rng.standard_normal((256, 128))  # float64: the interpreter rounds to the parameter dtype (bf16)
    b = rng.standard_normal((128, 256))
    out = run_reference(parse_file("gemm_block64.py"), {"A": a, "B": b})
    expected = f32(a.astype(BF16)).astype(np.float64) @ f32(b.astype(BF16)).astype(np.float64)
    np.testing.assert_allclose(out["C"], expected, rtol=1e-5, atol=1e-4)
    # the inputs really were rounded: the unrounded product differs by far more than fp32 noise
    assert np.abs(out["C"] - a @ b).max() > 1e-2


def test_example_eltwise_exp_mul(rng):
    a = rng.standard_normal((256, 128)).astype(np.float32)
    b = rng.standard_normal((256, 128)).astype(np.float32)
    out = run_reference(parse_file("eltwise_exp_mul.py"), {"A": a, "B": b})
    np.testing.assert_allclose(out["C"], np.exp(a) * b, rtol=1e-6, atol=0)


def test_example_bad_syntax_does_not_parse():
    with pytest.raises(SyntaxError):
        parse_file("bad_syntax.py")


# --------------------------------------------------------------------------------------- edge cases

RAGGED_GEMM = """
@T.prim_func
def main(A: T.Buffer((100, 50), "float32"), B: T.Buffer((50, 70), "float32"), C: T.Buffer((100, 70), "float32")):
    T.device_entry()
    by, bx = T.cta_id([4, 3])
    A_s = T.alloc_shared((32, 32), "float32")
    B_s = T.alloc_shared((32, 32), "float32")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.zero(C_l)
    for k in range(2):
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
"""


def test_non_multiple_of_32_gemm_pads_reads_and_drops_writes(rng):
    # 4x3 blocks of 32x32 cover 128x96 > 100x70 and K=64 > 50: edge reads must be zero, edge writes dropped.
    a = rng.standard_normal((100, 50)).astype(np.float32)
    b = rng.standard_normal((50, 70)).astype(np.float32)
    out = run_reference(parse(RAGGED_GEMM), {"A": a, "B": b})
    assert out["C"].shape == (100, 70)
    np.testing.assert_allclose(out["C"], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


PAD_COPY = """
@T.prim_func
def main(A: T.Buffer((40, 40), "float32"), P: T.Buffer((64, 64), "float32"), S: T.Buffer((20, 20), "float32")):
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    L = T.alloc_local((32, 32), "float32")
    T.tile.fill(L, T.float32(7.0))
    T.tile.copy(L, A[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])
    T.tile.copy(P[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], L)
    T.tile.copy(S[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], L)
"""


def test_out_of_bounds_read_is_zero_and_write_is_dropped(rng):
    a = rng.standard_normal((40, 40)).astype(np.float32) + 10.0  # no zeros inside A
    out = run_reference(parse(PAD_COPY), {"A": a})
    padded = np.zeros((64, 64), np.float32)
    padded[:40, :40] = a
    np.testing.assert_array_equal(out["P"], padded)  # outside part read as 0, not the 7.0 fill
    np.testing.assert_array_equal(out["S"], a[:20, :20])  # S is smaller than the tiles: only in-bounds stored


def test_region_wholly_outside_reads_zero_and_write_vanishes():
    src = """
@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), O: T.Buffer((32, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    L = T.alloc_local((32, 32), "float32")
    T.tile.fill(L, T.float32(3.0))
    T.tile.copy(O[64:96, 0:32], L)
    T.tile.copy(L, A[32:64, 0:32])
    T.tile.add(O[0:32, 0:32], L, T.float32(1.0))
"""
    out = run_reference(parse(src), {"A": np.full((32, 32), 9.0, np.float32)})
    np.testing.assert_array_equal(out["O"], np.ones((32, 32), np.float32))


# ------------------------------------------------------------------------------------- gemm options

GEMM_BETA = """
@T.prim_func
def main(A: T.Buffer((64, 96), "float32"), B: T.Buffer((96, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((32, 32), "float32")
    B_s = T.alloc_shared((32, 32), "float32")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.zero(C_l)
    for k in range(3):
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=BETA)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
"""


def test_gemm_beta_zero_keeps_only_last_k_step_and_beta_one_accumulates(rng):
    a = rng.standard_normal((64, 96)).astype(np.float32)
    b = rng.standard_normal((96, 64)).astype(np.float32)
    last = run_reference(parse(GEMM_BETA.replace("BETA", "0.0")), {"A": a, "B": b})["C"]
    full = run_reference(parse(GEMM_BETA.replace("BETA", "1.0")), {"A": a, "B": b})["C"]
    np.testing.assert_allclose(last, a[:, 64:96].astype(np.float64) @ b[64:96, :], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(full, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert np.abs(last - full).max() > 1.0


def test_gemm_default_beta_is_zero(rng):
    a = rng.standard_normal((64, 96)).astype(np.float32)
    b = rng.standard_normal((96, 64)).astype(np.float32)
    src = GEMM_BETA.replace(", beta=BETA", "")
    out = run_reference(parse(src), {"A": a, "B": b})["C"]
    np.testing.assert_allclose(out, a[:, 64:96].astype(np.float64) @ b[64:96, :], rtol=1e-5, atol=1e-5)


def test_gemm_transpose_b_alpha_beta(rng):
    src = """
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((32, 64), "float32"), C: T.Buffer((64, 32), "float32")):
    T.device_entry()
    by = T.cta_id([2])
    A_s = T.alloc_shared((32, 32), "float32")
    B_s = T.alloc_shared((32, 32), "float32")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.fill(C_l, T.float32(1.0))
    for k in range(2):
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[0:32, k * 32:k * 32 + 32])
        T.tile.gemm(C_l, A_s, B_s, C_l, transpose_B=True, alpha=2.0, beta=1.0)
    T.tile.copy(C[by * 32:by * 32 + 32, 0:32], C_l)
"""
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((32, 64)).astype(np.float32)  # stored N x K
    out = run_reference(parse(src), {"A": a, "B": b})["C"]
    np.testing.assert_allclose(out, 1.0 + 2.0 * (a.astype(np.float64) @ b.T), rtol=1e-5, atol=1e-5)


def test_gemm_transpose_a(rng):
    src = """
@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"), C: T.Buffer((32, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.gemm(C_l, A[0:32, 0:32], B[0:32, 0:32], C_l, transpose_A=True)
    T.tile.copy(C[0:32, 0:32], C_l)
"""
    a = rng.standard_normal((32, 32)).astype(np.float32)
    b = rng.standard_normal((32, 32)).astype(np.float32)
    out = run_reference(parse(src), {"A": a, "B": b})["C"]
    np.testing.assert_allclose(out, a.T.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------- scalars, dtypes, grid


def test_scalar_operands_either_side(rng):
    src = """
@T.prim_func
def main(A: T.Buffer((32, 64), "float32"), O: T.Buffer((32, 64), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    L = T.alloc_local((32, 64), "float32")
    T.tile.copy(L, A[0:32, 0:64])
    T.tile.mul(L, L, T.float32(3.0))
    T.tile.sub(L, T.float32(1.0), L)
    T.tile.add(L, L, 0.5)
    T.tile.maximum(L, L, T.float32(-2.0))
    T.tile.minimum(L, L, T.float32(2.0))
    T.tile.copy(O[0:32, 0:64], L)
"""
    a = rng.standard_normal((32, 64)).astype(np.float32)
    out = run_reference(parse(src), {"A": a})["O"]
    np.testing.assert_allclose(out, np.clip((1.0 - 3.0 * a) + 0.5, -2.0, 2.0), rtol=1e-6)


def test_unary_ops_sqrt_reciprocal_cast(rng):
    src = """
@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), O: T.Buffer((32, 32), "float32"), H: T.Buffer((32, 32), "bfloat16")):
    T.device_entry()
    bx = T.cta_id([1])
    L = T.alloc_local((32, 32), "float32")
    Lb = T.alloc_local((32, 32), "bfloat16")
    T.tile.sqrt(L, A[0:32, 0:32])
    T.tile.reciprocal(L, L)
    T.tile.copy(O[0:32, 0:32], L)
    T.tile.cast(Lb, L)
    T.tile.copy(H[0:32, 0:32], Lb)
"""
    a = rng.uniform(0.5, 4.0, (32, 32)).astype(np.float32)
    out = run_reference(parse(src), {"A": a})
    np.testing.assert_allclose(out["O"], 1.0 / np.sqrt(a), rtol=1e-6)
    assert out["H"].dtype == BF16
    np.testing.assert_array_equal(out["H"], out["O"].astype(BF16))


def test_bf16_stores_round_every_intermediate():
    src = """
@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), O: T.Buffer((32, 32), "bfloat16"), W: T.Buffer((32, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    L = T.alloc_local((32, 32), "bfloat16")
    T.tile.add(L, A[0:32, 0:32], T.float32(1.0))
    T.tile.mul(L, L, T.float32(3.0))
    T.tile.copy(O[0:32, 0:32], L)
    T.tile.copy(W[0:32, 0:32], L)
"""
    a = np.full((32, 32), 2.0**-9, np.float32)  # 1 + 2^-9 is below half a bf16 ulp (2^-8) above 1
    a[0, 1] = 3 * 2.0**-9  # 1 + 0.75 ulp: rounds up to 1 + 2^-7
    out = run_reference(parse(src), {"A": a})
    assert out["O"].dtype == BF16 and out["W"].dtype == np.float32
    assert float(out["O"][0, 0]) == 3.0  # rounded to 1.0 before the multiply; fp32 would give 3.0058...
    assert float(out["O"][0, 1]) == float(np.float32(3 * (1 + 2.0**-7)).astype(BF16))
    expected = (((a + 1.0).astype(BF16).astype(np.float32)) * 3.0).astype(BF16)
    np.testing.assert_array_equal(out["O"], expected)
    np.testing.assert_array_equal(out["W"], expected.astype(np.float32))


def test_inputs_are_rounded_to_parameter_dtype():
    src = """
@T.prim_func
def main(A: T.Buffer((32, 32), "float16"), O: T.Buffer((32, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    T.tile.copy(O[0:32, 0:32], A[0:32, 0:32])
"""
    a = np.random.default_rng(5).standard_normal((32, 32))  # float64
    out = run_reference(parse(src), {"A": a})["O"]
    np.testing.assert_array_equal(out, a.astype(np.float16).astype(np.float32))


def test_grid_runs_sequentially_first_id_outer_and_scratch_is_fresh():
    src = """
@T.prim_func
def main(O: T.Buffer((1, 1), "float32"), P: T.Buffer((64, 96), "float32")):
    T.device_entry()
    by, bx = T.cta_id([2, 3])
    L = T.alloc_local((32, 32), "float32")
    T.tile.mul(O[0:1, 0:1], O[0:1, 0:1], T.float32(10.0))
    T.tile.add(O[0:1, 0:1], O[0:1, 0:1], T.cast(by * 3 + bx, "float32"))
    T.tile.add(L, L, T.float32(1.0))
    T.tile.copy(P[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], L)
"""
    out = run_reference(parse(src), {})
    # O = O*10 + (3*by + bx) per grid point, so O's decimal digits record the visit order:
    # (0,0),(0,1),(0,2),(1,0),(1,1),(1,2) gives 012345; bx-outer order would give 031425.
    assert float(out["O"][0, 0]) == 12345.0
    np.testing.assert_array_equal(out["P"], np.ones((64, 96), np.float32))  # L re-zeroed per grid point


def test_exp_of_large_values_gives_inf_without_error():
    src = """
@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), O: T.Buffer((32, 32), "float16")):
    T.device_entry()
    bx = T.cta_id([1])
    T.tile.exp(O[0:32, 0:32], A[0:32, 0:32])
"""
    a = np.full((32, 32), 12.0, np.float32)  # e^12 ~ 1.6e5 > fp16 max 65504
    out = run_reference(parse(src), {"A": a})["O"]
    assert out.dtype == np.float16 and np.isinf(out).all()


# ------------------------------------------------------------------------------------------ errors


def test_unknown_tile_op_is_a_clear_error():
    src = """
@T.prim_func
def main(A: T.Buffer((32, 32), "float32"), O: T.Buffer((32, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    T.tile.silu(O[0:32, 0:32], A[0:32, 0:32])
    T.tile.log2(O[0:32, 0:32], A[0:32, 0:32])
    T.tile.permute_layout(O[0:32, 0:32], A[0:32, 0:32])
"""
    with pytest.raises(ReferenceInterpreterError, match="permute_layout"):
        run_reference(parse(src), {"A": np.ones((32, 32), np.float32)})


def test_missing_and_misshaped_inputs_are_errors():
    func = parse_file("gemm.py")
    with pytest.raises(ReferenceInterpreterError, match="missing input 'B'"):
        run_reference(func, {"A": np.zeros((128, 128))})
    with pytest.raises(ReferenceInterpreterError, match="shape"):
        run_reference(func, {"A": np.zeros((128, 64)), "B": np.zeros((128, 128))})
    with pytest.raises(ReferenceInterpreterError, match="not parameters"):
        run_reference(func, {"A": np.zeros((128, 128)), "B": np.zeros((128, 128)), "Z": np.zeros(1)})


# ------------------------------------------------------------------------------------------- speed


def test_256_cubed_gemm_on_an_8x8_grid(rng):
    text = (DATA / "gemm.py").read_text()
    text = text.replace("128", "256").replace("[4, 4]", "[8, 8]").replace("range(4)", "range(8)")
    func = parse(text)
    a = rng.standard_normal((256, 256)).astype(np.float16)
    b = rng.standard_normal((256, 256)).astype(np.float16)
    out = run_reference(func, {"A": a, "B": b})  # its speed: bench/emulator.py (reference column)
    np.testing.assert_allclose(out["C"], a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)


# ------------------------------------------------------------------------------- views, if, scalars


def test_views_alias_their_storage_and_permute_transposes(rng):
    src = """
@T.prim_func
def main(A: T.Buffer((64, 32), "float32"), O: T.Buffer((32, 64), "float32"), F: T.Buffer((8, 8), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    L = T.alloc_local((32, 64), "float32")
    P = L.permute(1, 0)
    T.tile.copy(P, A[0:64, 0:32])
    T.tile.copy(O[0:32, 0:64], L)
    Fv = F.view(64)
    T.tile.fill(Fv[8:16], T.float32(2.0))
"""
    a = rng.standard_normal((64, 32)).astype(np.float32)
    out = run_reference(parse(src), {"A": a})
    np.testing.assert_array_equal(out["O"], a.T)
    expected_f = np.zeros((8, 8), np.float32)
    expected_f[1, :] = 2.0  # elements 8..15 of the flat view are row 1; F counts as written through its view
    np.testing.assert_array_equal(out["F"], expected_f)


def test_if_then_else_and_scalar_bindings():
    src = """
@T.prim_func
def main(A: T.Buffer((64, 32), "float32"), C: T.Buffer((64, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([2])
    row = bx * 32
    L = T.alloc_local((32, 32), "float32")
    if bx > 0:
        T.tile.copy(L, A[row:row + 32, 0:32])
    else:
        T.tile.fill(L, T.float32(3.0))
    T.tile.copy(C[row:row + 32, 0:32], L)
"""
    a = np.arange(64 * 32, dtype=np.float32).reshape(64, 32)
    out = run_reference(parse(src), {"A": a})["C"]
    np.testing.assert_array_equal(out[:32], np.full((32, 32), 3.0, np.float32))
    np.testing.assert_array_equal(out[32:], a[32:])


# ------------------------------------------------------------------------- reductions and broadcasts

REDUCE_KERNEL = """
@T.prim_func
def main(A: T.Buffer((64, 96), "float32"), S: T.Buffer((64, 1), "float32"), M: T.Buffer((64, 1), "float32"),
         C: T.Buffer((64, 96), "float32"), Z: T.Buffer((1, 96), "float32")):
    T.device_entry()
    A_s = T.alloc_shared((64, 96), "float32")
    s = T.alloc_local((64, 1), "float32")
    m = T.alloc_local((64, 1), "float32")
    c = T.alloc_local((64, 96), "float32")
    z = T.alloc_local((1, 96), "float32")
    T.tile.copy(A_s, A[0:64, 0:96])
    T.tile.sum(s, A_s, axes=-1)
    T.tile.sum(s, A_s, axes=[-1], accum=True)
    T.tile.fill(m, T.float32(0.5))
    T.tile.max(m, A_s, axes=-1, accum=True)
    T.tile.sub(c, A_s, m)
    T.tile.mul(c, s, c)
    T.tile.max(z, A_s, axes=0)
    T.tile.copy(S[0:64, 0:1], s)
    T.tile.copy(M[0:64, 0:1], m)
    T.tile.copy(C[0:64, 0:96], c)
    T.tile.copy(Z[0:1, 0:96], z)
"""


def test_row_reductions_accum_and_column_broadcast(rng):
    a = rng.standard_normal((64, 96)).astype(np.float32)
    out = run_reference(parse(REDUCE_KERNEL), {"A": a})
    row_sum = a.astype(np.float64).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out["S"], 2 * row_sum, rtol=1e-5, atol=1e-5)    # accum=True adds to dst
    np.testing.assert_array_equal(out["M"], np.maximum(a.max(axis=1, keepdims=True), 0.5))
    np.testing.assert_allclose(out["C"], out["S"] * (a - out["M"]), rtol=1e-6, atol=1e-6)  # (64,1) broadcasts
    np.testing.assert_array_equal(out["Z"], a.max(axis=0, keepdims=True))


def test_row_softmax_reference(rng):
    """examples/softmax_rows.py with bf16 in/out: the reductions, broadcasts and the bf16 store rounding."""
    example = (Path(__file__).resolve().parents[1] / "examples" / "softmax_rows.py").read_text()
    text = example.replace('T.Buffer((256, 128), "float32")', 'T.Buffer((256, 128), "bfloat16")')
    text = text.replace('A_s = T.alloc_shared((64, 128), "float32")', 'A_s = T.alloc_shared((64, 128), "bfloat16")')
    assert text.count('"bfloat16"') == 3
    a = (rng.standard_normal((256, 128)) * 4).astype(BF16)
    out = run_reference(parse(text), {"A": a})
    x = f32(a).astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    expected = e / e.sum(axis=1, keepdims=True)
    assert out["B"].dtype == BF16
    np.testing.assert_allclose(f32(out["B"]), expected, rtol=2 ** -7, atol=1e-6)


# ------------------------------------------------------------------------------------ element loops

ELEMENT_LOOPS = """
@T.prim_func
def main(A: T.Buffer((64, 48), "float32"), C: T.Buffer((64, 48), "float32"), H: T.Buffer((64, 48), "float16"),
         I: T.Buffer((32, 48), "int32")):
    T.device_entry()
    bx = T.cta_id([2])
    for i, j in T.grid(32, 48):
        C[bx * 32 + i, j] = T.if_then_else(bx * 32 + i >= j, A[bx * 32 + i, j] * T.float32(2.0) + T.float32(1.0),
                                           T.float32("-inf"))
    for i, j in T.grid(32, 48):
        H[bx * 32 + i, j] = T.Cast("float16", T.min(A[bx * 32 + i, j], T.float32(0.5)) / T.float32(3.0))
    for i, j in T.grid(32, 48):
        I[i, j] = T.truncdiv(i - 16, 3) * 1000 + T.truncmod(j - 20, 7) * 100 + T.floordiv(j - 24, 5) * 10 + \\
            T.floormod(i - 13, 4) + T.max(i, j) * 10000 + T.Cast("int32", A[i, j] * T.float32(4.0)) * 1000000
"""


def test_element_loops_a_mask_a_rounding_cast_and_integer_division(rng):
    """Loop nests around one store (a T.Parallel body left element-wise: a causal mask, a cast, index arithmetic),
    which the interpreter evaluates over the whole nest at once: C/C++ truncating division and remainder, floor
    division and modulo of negative numbers, a float16 cast rounded once."""
    a = rng.standard_normal((64, 48)).astype(np.float32)
    out = run_reference(parse(ELEMENT_LOOPS), {"A": a})
    rows, cols = np.arange(64)[:, None], np.arange(48)[None, :]
    np.testing.assert_array_equal(out["C"], np.where(rows >= cols, a * np.float32(2) + np.float32(1), -np.inf))
    np.testing.assert_array_equal(out["H"], (np.minimum(a, 0.5).astype(np.float64) / 3).astype(np.float16))
    i, j = np.arange(32)[:, None], cols
    trunc_div = np.fix((i - 16) / 3).astype(np.int64)
    trunc_mod = np.fmod(j - 20, 7)
    expected = trunc_div * 1000 + trunc_mod * 100 + ((j - 24) // 5) * 10 + (i - 13) % 4 + np.maximum(i, j) * 10000 \
        + np.fix(a[:32] * np.float32(4)).astype(np.int64) * 1000000
    assert trunc_div.min() < 0 and trunc_mod.min() < 0 and ((j - 24) // 5).min() < 0       # the negative cases
    np.testing.assert_array_equal(out["I"], expected.astype(np.int32))


ORDERED_LOOPS = """
@T.prim_func
def main(A: T.Buffer((64,), "float32"), P: T.Buffer((64,), "float32"), S: T.Buffer((64,), "float32"),
         D: T.Buffer((64,), "float32"), E: T.Buffer((64,), "float32"), Q: T.Buffer((64,), "float32")):
    T.device_entry()
    for i in T.serial(64):
        P[i] = T.if_then_else(i + 8 < 64, A[T.min(i + 8, 70)], T.float32(0.0))
    S[0] = A[0]
    for i in T.serial(63):
        S[i + 1] = S[i] + A[i + 1]
    for i in T.serial(64):
        D[i // 2] = A[i]
    for i in T.serial(64):
        E[i + 32] = A[i]
    for i in T.serial(64):
        Q[i] = A[i] * T.float32(2.0)
    for i in T.serial(64):
        Q[i] = Q[i] + A[i]
"""


def test_element_loops_keep_their_order_where_it_shows(rng):
    """What a whole-nest evaluation would get wrong runs element by element: a load past the end on the side of an
    if_then_else not taken (no error), a running sum (each iteration reads the previous one's store), two iterations
    storing one element (the last wins); stores past the end are dropped; a store reading its own element is one
    update per element."""
    a = rng.standard_normal(64).astype(np.float32)
    out = run_reference(parse(ORDERED_LOOPS), {"A": a})
    np.testing.assert_array_equal(out["P"], np.concatenate([a[8:], np.zeros(8, np.float32)]))
    np.testing.assert_array_equal(out["S"], np.cumsum(a, dtype=np.float32))
    np.testing.assert_array_equal(out["D"], np.concatenate([a[1::2], np.zeros(32, np.float32)]))
    np.testing.assert_array_equal(out["E"], np.concatenate([np.zeros(32, np.float32), a[:32]]))
    np.testing.assert_array_equal(out["Q"], a * np.float32(2) + a)
