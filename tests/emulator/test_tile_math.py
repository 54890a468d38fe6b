"""Tile math and number formats of the emulator against NumPy (real g++, real kernels, no mocks)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from .conftest import eltwise_cfg

BF16 = ml_dtypes.bfloat16


def bf16(a):
    return np.asarray(a, np.float32).astype(BF16).astype(np.float32)


def fp16(a):
    with np.errstate(over="ignore"):
        return np.asarray(a, np.float32).astype(np.float16).astype(np.float32)


def tf32(a):
    u = np.asarray(a, np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0xFFF + ((u >> 13) & 1)) & 0xFFFFE000
    return u.astype(np.uint32).view(np.float32)


def f32_bits(v: float) -> str:
    return hex(int(np.float32(v).view(np.uint32)))


RNG = np.random.default_rng(1234)
X = RNG.standard_normal((64, 96)).astype(np.float32)
Y = RNG.standard_normal((64, 96)).astype(np.float32)

# name -> (OP_INIT, OP_BODY, reference on (x, y) already in the input format, exact?)
OPS = {
    "add_tiles": ("add_init(cb_x, cb_y);", "add_tiles(cb_x, cb_y, 0, 0, 0);", lambda x, y: x + y, True),
    "sub_tiles": ("sub_init(cb_x, cb_y);", "sub_tiles(cb_x, cb_y, 0, 0, 0);", lambda x, y: x - y, True),
    "mul_tiles": ("mul_init(cb_x, cb_y);", "mul_tiles(cb_x, cb_y, 0, 0, 0);", lambda x, y: x * y, True),
    "copy_tile": ("copy_init(cb_x);", "copy_tile(cb_x, 0, 0);", lambda x, y: x, True),
    "exp_tile": ("copy_init(cb_x); exp_tile_init();", "copy_tile(cb_x, 0, 0); exp_tile(0);", lambda x, y: np.exp(x), False),
    "sqrt_tile": ("copy_init(cb_x); sqrt_tile_init();", "copy_tile(cb_x, 0, 0); sqrt_tile(0);",
                  lambda x, y: np.sqrt(x), False),
    "recip_tile": ("copy_init(cb_x); recip_tile_init();", "copy_tile(cb_x, 0, 0); recip_tile(0);",
                   lambda x, y: 1.0 / x, False),
    "log_tile": ("copy_init(cb_x); log_tile_init();", "copy_tile(cb_x, 0, 0); log_tile(0);", lambda x, y: np.log(x), False),
    "add_binary_tile": ("copy_init(cb_x); add_binary_tile_init();",
                        "copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); add_binary_tile(0, 1, 0);", lambda x, y: x + y, True),
    "sub_binary_tile": ("copy_init(cb_x); sub_binary_tile_init();",
                        "copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); sub_binary_tile(0, 1, 0);", lambda x, y: x - y, True),
    "mul_binary_tile": ("copy_init(cb_x); mul_binary_tile_init();",
                        "copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); mul_binary_tile(0, 1, 0);", lambda x, y: x * y, True),
    # add, sub and mul run on one SFPU configuration (ckernel_sfpu_binary.h's sfpu_binary_init loads nothing for
    # them): any of their inits configures the others
    "mul_binary_tile after add_binary_tile_init": (
        "copy_init(cb_x); add_binary_tile_init();",
        "copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); mul_binary_tile(0, 1, 0);", lambda x, y: x * y, True),
    "sub_binary_tile after mul_binary_tile_init": (
        "copy_init(cb_x); mul_binary_tile_init();",
        "copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); sub_binary_tile(0, 1, 0);", lambda x, y: x - y, True),
    # the clamped approximate exp's init starts with what their init does and then loads only constants and macros
    # (ckernel_sfpu_exp.h exp_init), and its clamped calls change no address modifier: it configures them too
    "sub_binary_tile after the clamped approximate exp_tile_init": (
        "copy_init(cb_x); exp_tile_init<true, 0x3f800000u>();",
        "copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); sub_binary_tile(0, 1, 0);", lambda x, y: x - y, True),
    "binary_max_tile": ("copy_init(cb_x); binary_max_tile_init();",
                        "copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); binary_max_tile(0, 1, 0);", np.maximum, True),
    "binary_min_tile": ("copy_init(cb_x); binary_min_tile_init();",
                        "copy_tile(cb_x, 0, 1); copy_tile(cb_y, 0, 2); binary_min_tile(1, 2, 0);", np.minimum, True),
    "add_unary_tile": ("copy_init(cb_x); binop_with_scalar_tile_init();",
                       f"copy_tile(cb_x, 0, 0); add_unary_tile(0, {f32_bits(2.5)});", lambda x, y: x + 2.5, True),
    "sub_unary_tile": ("copy_init(cb_x); binop_with_scalar_tile_init();",
                       f"copy_tile(cb_x, 0, 0); sub_unary_tile(0, {f32_bits(0.75)});", lambda x, y: x - 0.75, True),
    "mul_unary_tile": ("copy_init(cb_x); binop_with_scalar_tile_init();",
                       f"copy_tile(cb_x, 0, 0); mul_unary_tile(0, {f32_bits(-3.0)});", lambda x, y: x * -3.0, True),
    "unary_max_tile": ("copy_init(cb_x); unary_max_tile_init();",
                       f"copy_tile(cb_x, 0, 0); unary_max_tile(0, {f32_bits(0.25)});", lambda x, y: np.maximum(x, 0.25), True),
    "unary_min_tile": ("copy_init(cb_x); unary_min_tile_init();",
                       f"copy_tile(cb_x, 0, 0); unary_min_tile(0, {f32_bits(-0.5)});", lambda x, y: np.minimum(x, -0.5), True),
    "fill_tile": ("fill_tile_init();", "fill_tile(0, 3.140625f);", lambda x, y: np.full_like(x, 3.140625), True),
    "rsqrt_tile": ("copy_init(cb_x); rsqrt_tile_init();", "copy_tile(cb_x, 0, 0); rsqrt_tile(0);",
                   lambda x, y: 1.0 / np.sqrt(x), False),
    "negative_tile": ("copy_init(cb_x); negative_tile_init();", "copy_tile(cb_x, 0, 0); negative_tile(0);",
                      lambda x, y: -x, True),
    "abs_tile": ("copy_init(cb_x); abs_tile_init();", "copy_tile(cb_x, 0, 0); abs_tile(0);", lambda x, y: np.abs(x), True),
    "sign_tile": ("copy_init(cb_x); sign_tile_init();", "copy_tile(cb_x, 0, 0); sign_tile(0);",
                  lambda x, y: np.sign(x), True),
    "square_tile": ("copy_init(cb_x); square_tile_init();", "copy_tile(cb_x, 0, 0); square_tile(0);",
                    lambda x, y: x * x, True),
    "identity_tile": ("copy_init(cb_x); identity_tile_init();", "copy_tile(cb_x, 0, 0); identity_tile(0);",
                      lambda x, y: x, True),
    # DST[0] = x where y (in DST[1]) is nonzero (the test zeroes y where |y| < 0.5)
    "mask_tile": ("copy_init(cb_x); mask_tile_init();",
                  "copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); mask_tile(0, 1);", lambda x, y: np.where(y == 0, 0, x),
                  True),
    "copy_dest_values": ("copy_init(cb_x); copy_dest_values_init();",
                         "copy_tile(cb_x, 0, 3); copy_dest_values<DataFormat::Float16_b>(3, 0);", lambda x, y: x, True),
}


def _op_bundle(make_bundle, name):
    init, body, _, _ = OPS[name]
    return make_bundle("eltwise", prepend={"compute.cpp": f"#define OP_INIT {init}\n#define OP_BODY {body}"})


@pytest.mark.parametrize("name", sorted(OPS))
def test_op_bf16_matches_numpy(make_bundle, run, name):
    _, _, ref, exact = OPS[name]
    x = np.abs(X) + 0.1 if name in ("sqrt_tile", "recip_tile", "log_tile", "rsqrt_tile") else X
    y = np.where(np.abs(Y) < 0.5, 0, Y) if name == "mask_tile" else Y
    res = run(_op_bundle(make_bundle, name), {"x": x, "y": y, "cfg": eltwise_cfg(cores=2)})
    want = bf16(ref(bf16(x), bf16(y)))  # fp32 math on bf16 inputs, one rounding to bf16 (DST and pack)
    got = res.outputs["z"]
    if exact:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=0)
    assert res.report["error"] is None


def test_fp16_add_rounds_in_fp16(make_bundle, run):
    x, y = X * 100, Y * 100
    res = run(_op_bundle(make_bundle, "add_tiles"), {"x": x, "y": y, "cfg": eltwise_cfg("fp16", "fp16")})
    np.testing.assert_array_equal(res.outputs["z"], fp16(fp16(x) + fp16(y)))


def test_fp32_dest_keeps_fp32_and_fpu_operands_are_tf32(make_bundle, run):
    res = run(_op_bundle(make_bundle, "add_tiles"),
              {"x": X, "y": Y, "cfg": eltwise_cfg("fp32", "fp32", fp32_dest=True)})
    np.testing.assert_array_equal(res.outputs["z"], tf32(X) + tf32(Y))


def test_fp32_roundtrip_with_unpack_to_dest_is_exact(make_bundle, run):
    res = run(_op_bundle(make_bundle, "copy_tile"),
              {"x": X * 1e-3, "y": Y, "cfg": eltwise_cfg("fp32", "fp32", fp32_dest=True, unpack_fp32=True)})
    np.testing.assert_array_equal(res.outputs["z"], X * 1e-3)


EDGE = np.array([0.0, -0.0, 1.0, 1.00390625, 1.01171875, 3.0e38, -3.4e38, 1e-40, 65504.0, 65519.0, 65520.0, 1e5,
                 5.96e-8, 2.98e-8, 2.99e-8, 6.1e-5, 1e-7, -1.5e-6, np.inf, -np.inf], np.float32)


def _edge_matrix():
    vals = np.concatenate([EDGE, RNG.standard_normal(32 * 32 - EDGE.size).astype(np.float32) * 10.0 ** RNG.integers(-6, 6, 32 * 32 - EDGE.size)])
    return vals.astype(np.float32).reshape(32, 32)


@pytest.mark.parametrize("out_fmt,ref", [("bf16", bf16), ("fp16", fp16)])
def test_pack_rounds_to_nearest_even(make_bundle, run, out_fmt, ref):
    x = _edge_matrix()
    res = run(_op_bundle(make_bundle, "copy_tile"),
              {"x": x, "y": x, "cfg": eltwise_cfg("fp32", out_fmt, fp32_dest=True, unpack_fp32=True)})
    np.testing.assert_array_equal(res.outputs["z"], ref(x))


def test_16bit_dest_rounds_to_bf16(make_bundle, run):
    # fp32 in and out, but a 16-bit DST: every value passes through bf16.
    res = run(_op_bundle(make_bundle, "copy_tile"), {"x": X, "y": Y, "cfg": eltwise_cfg("fp32", "fp32")})
    np.testing.assert_array_equal(res.outputs["z"], bf16(tf32(X)))


def _gemm_ref(a, b, kt):
    """bf16 inputs, fp32 tile products, DST rounded to bf16 after each k tile (16-bit DST)."""
    a, b = bf16(a), bf16(b)
    acc = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(kt):
        part = a[:, k * 32:(k + 1) * 32].astype(np.float64) @ b[k * 32:(k + 1) * 32, :].astype(np.float64)
        acc = bf16(acc + part.astype(np.float32))
    return acc


@pytest.mark.parametrize("cores,arch", [(2, "wormhole_b0"), (5, "blackhole"), (1, "wormhole_b0")])
def test_gemm_accumulates_over_k(make_bundle, run, cores, arch):
    a = RNG.standard_normal((96, 128)).astype(np.float32)
    b = RNG.standard_normal((128, 64)).astype(np.float32)
    bundle = make_bundle("gemm", prepend={"main.cpp": f"#define NUM_CORES {cores}"})
    res = run(bundle, {"a": a, "b": b}, arch=arch)
    np.testing.assert_allclose(res.outputs["c"], _gemm_ref(a, b, 4), rtol=2 ** -7, atol=2 ** -6)
    rel = np.abs(res.outputs["c"] - a @ b).max() / np.abs(a @ b).max()
    assert rel < 0.02
    # counters: every output tile reads Kt tiles of A and of B, writes one tile of C
    bufs = {b_["id"]: b_ for b_ in res.report["buffers"]}
    assert bufs[0]["tiles_read"] == 3 * 2 * 4 and bufs[1]["tiles_read"] == 3 * 2 * 4
    assert bufs[2]["tiles_written"] == 6
    assert res.report["totals"]["tile_ops"]["matmul_tiles"] == 3 * 2 * 4
    assert res.report["totals"]["dst_acquires"] == 6
    assert len(res.report["cores"]) == cores
    assert res.report["arch"] == arch


def test_gemm_transpose_b(make_bundle, run):
    a = RNG.standard_normal((64, 64)).astype(np.float32)
    bt = RNG.standard_normal((96, 64)).astype(np.float32)  # B^T stored N x K
    bundle = make_bundle("gemm", replace={
        "compute.cpp": [("matmul_init(cb_a, cb_b);", "matmul_init(cb_a, cb_b, 1);")],
        "reader.cpp": [("noc_async_read_page(k * Nt + n, b,", "noc_async_read_page(n * Kt + k, b,")],
        "main.cpp": [("const uint32_t Mt = A.rows / 32, Kt = A.cols / 32, Nt = B.cols / 32;",
                      "const uint32_t Mt = A.rows / 32, Kt = A.cols / 32, Nt = B.rows / 32;")],
    })
    res = run(bundle, {"a": a, "b": bt})
    np.testing.assert_allclose(res.outputs["c"], _gemm_ref(a, bt.T.copy(), 2), rtol=2 ** -7, atol=2 ** -6)


def test_zero_fill_from_mem_zeros(make_bundle, run):
    """A reader zero-fills CB pages by repeated noc_async_read from MEM_ZEROS_BASE (as padding code does)."""
    bundle = make_bundle("eltwise", replace={"reader.cpp": [(
        "noc_async_read_page(i, y, get_write_ptr(cb_y));",
        "const uint64_t zeros = get_noc_addr(MEM_ZEROS_BASE);\n"
        "        for (uint32_t off = 0; off < get_tile_size(cb_y); off += MEM_ZEROS_SIZE)\n"
        "            noc_async_read(zeros, get_write_ptr(cb_y) + off, MEM_ZEROS_SIZE);")]})
    res = run(bundle, {"x": X, "y": Y, "cfg": eltwise_cfg()})
    np.testing.assert_array_equal(res.outputs["z"], bf16(X))
    assert res.report["cores"][0]["noc_reads"] == 6 * (1 + 4)


def test_a_declared_but_not_emulated_call_stops_at_its_line(make_bundle, run):
    """ttnn's kernel library names the whole SFPU catalogue; the calls the emulator does not model (typecasts other
    than Float32 <-> Int32: Float16_b -> Int32 here) are declared with the real signatures and stop the kernel where
    it calls them."""
    from compiler.toolchain.emulate import EmulationError
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_INIT copy_init(cb_x);\n#define OP_BODY "
                         "copy_tile(cb_x, 0, 0); typecast_tile<5, 8>(0);"})
    with pytest.raises(EmulationError) as info:
        run(bundle, {"x": X, "y": Y, "cfg": eltwise_cfg(cores=1)})
    assert info.value.kind == "unsupported"
    assert "compute kernel 'compute.cpp'" in info.value.message and "typecast_tile" in info.value.message


@pytest.mark.parametrize("exp_init", ["exp_tile_init<true, 0x3f800000u, InputClamping::None>();", "exp_tile_init();"])
def test_only_the_clamped_approximate_exp_configures_the_binary_subtract(make_bundle, run, exp_init):
    """The unclamped approximate exp's calls set ADDR_MOD_7 to a dest increment of 2 (ckernel_sfpu_exp.h), the
    precise exp is not covered by the rule: after their inits sub_binary_tile needs its own."""
    from compiler.toolchain.emulate import EmulationError
    bundle = make_bundle("eltwise", prepend={"compute.cpp": f"#define OP_INIT copy_init(cb_x); {exp_init}\n"
                         "#define OP_BODY copy_tile(cb_x, 0, 0); copy_tile(cb_y, 0, 1); sub_binary_tile(0, 1, 0);"})
    with pytest.raises(EmulationError) as info:
        run(bundle, {"x": X, "y": Y, "cfg": eltwise_cfg(cores=1)})
    assert info.value.kind == "init" and "call add_binary_tile_init()" in info.value.message


def exp_approx_reference(x: np.ndarray, scale: float, clamp_negative: bool) -> np.ndarray:
    """The LLK's approximate exp (ckernel_sfpu_exp.h, Schraudolph's method) as its SFPU instructions compute it, in
    NumPy, independent of the emulator's code: the init's fp32 constants A * scale (A = 256 / ln 2) and -88.5 / scale;
    ClampToNegative raises x to the latter; i = A * scale * x + 32500.818359375 rounded once to fp32 (exact here:
    the test's inputs have 8 significant bits, so the float64 sum is exact), rounded to an integer with ties away
    from zero (SFPSTOCHRND, round to nearest), clamped to 65535 unsigned (clamped) or to +-32767 keeping its sign,
    and its magnitude shifted left 15 bits into the fp32 exponent and top mantissa bits. Returns the fp32 bits."""
    a = np.float32(np.float32(256.0) * np.float32(1.4426950408889634)) * np.float32(scale)
    x = np.asarray(x, np.float32)
    if clamp_negative:
        x = np.maximum(x, np.float32(-88.5) / np.float32(scale))
    with np.errstate(invalid="ignore", over="ignore"):
        i = (np.float64(a) * x.astype(np.float64) + 32500.818359375).astype(np.float32).astype(np.float64)
        magnitude = np.where(np.isfinite(i) & (np.abs(i) < 65536), np.floor(np.abs(i) + 0.5), 65535)
    bits = np.minimum(magnitude, 65535 if clamp_negative else 32767).astype(np.uint64) << 15
    if not clamp_negative:
        bits |= np.where((i < 0) & (magnitude > 0), 1 << 31, 0).astype(np.uint64)
    return bits.astype(np.uint32)


# bf16-representable inputs (8 significant bits: the reference's float64 MAD is exact) across the whole range the
# algorithm distinguishes: below the clamp and the -88 underflow, [-20, 1] where attention's exponents live, the
# saturation above ~0.72 (unclamped: int16) and ~89 / scale, and the infinities
EXP_X = bf16(np.concatenate([
    np.array([0.0, -0.0, -np.inf, np.inf, -88.5, -88.0, -87.25, -1000.0, 0.71875, 0.75, 1.0, 88.0, 90.0], np.float32),
    -np.abs(RNG.standard_normal(500)).astype(np.float32) * 6.0,
    RNG.uniform(-120.0, 100.0, 1024 - 13 - 500).astype(np.float32)]).reshape(32, 32))


@pytest.mark.parametrize("scale, clamp", [(1.0, True), (1.0, False), (0.08838834764831845, True),
                                          (0.08838834764831845, False)])
def test_approximate_exp_is_the_llk_algorithm_bit_for_bit(make_bundle, run, scale, clamp):
    """exp_tile_init<true, scale, clamping>() then exp_tile<true>: the emulator computes the LLK's Schraudolph exp
    (the exponent and 8 mantissa bits), not libm's exp: every output bit equals the NumPy model of its instructions."""
    clamping = "InputClamping::ClampToNegative" if clamp else "InputClamping::None"
    init = f"copy_init(cb_x); exp_tile_init<true, {f32_bits(scale)}u, {clamping}>();"
    bundle = make_bundle("eltwise", prepend={"compute.cpp": f"#define OP_INIT {init}\n"
                                             f"#define OP_BODY copy_tile(cb_x, 0, 0); exp_tile<true, false, {clamping}>(0);"})
    res = run(bundle, {"x": EXP_X, "y": EXP_X, "cfg": eltwise_cfg("fp32", "fp32", fp32_dest=True, unpack_fp32=True)})
    assert res.report["error"] is None
    got = res.outputs["z"].reshape(-1, 32, 32)[0].view(np.uint32)
    np.testing.assert_array_equal(got, exp_approx_reference(EXP_X, scale, clamp))
    # what it approximates: within the method's few percent of exp where the result is a normal number
    want = np.exp(EXP_X.astype(np.float64) * np.float32(scale))
    normal = (want > 1e-37) & (want < 1.9)
    assert np.abs(got.view(np.float32)[normal] / want[normal] - 1).max() < 0.035
    # and far from libm's exp, which the test would otherwise not tell apart
    assert np.abs(got.view(np.float32)[normal] / want[normal] - 1).max() > 0.01
