"""Bitwise operators on integer data in T.Parallel bodies (`codes & 15`, `x | y`, `x ^ y`, `~x`, `x << 4`, `x >> s`):
Int32 on the SFPU. Integer data is held in float tiles, so each operand is converted to Int32 in DST
(typecast_tile<Float32, Int32>), the op computes on the bits and the result is converted back.

Every expectation here is Python integer arithmetic written in this file, with the shift rules of ttnn 0.81.1's LLKs
(ckernel_sfpu_unary_shift.h, ckernel_sfpu_shift.h): by a constant >= 32, `<<` gives 0 and `>>` the sign (the
amount is clamped to 31); by a tile of amounts outside [0, 31], both give 0; `>>` of int32 is arithmetic. uint8
results wrap at 8 bits as TileLang's types say (`c << 1`, `~c`)."""
from __future__ import annotations

import math
import re

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from compiler.errors import CompileError
from compiler.toolchain import sdk_headers
from compiler.toolchain.header_check import check_bundle
from schemas.target import TargetConfig

from tests.emulator.conftest import eltwise_cfg, make_bundle, run  # noqa: F401 (fixtures)

from .test_frontend import error_of, line_of, src

ARCHS = ("wormhole_b0", "blackhole")

INT32 = src('''
    @tilelang.jit
    def bits(M=64, N=64):
        @T.prim_func
        def main(X: T.Tensor((M, N), T.int32), S: T.Tensor((M, N), T.int32), Y: T.Tensor((M, N), T.int32)):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((M, N), T.int32)
                s = T.alloc_fragment((M, N), T.int32)
                y = T.alloc_fragment((M, N), T.int32)
                T.copy(X, x)
                T.copy(S, s)
                for i, j in T.Parallel(M, N):
                    y[i, j] = EXPR
                T.copy(y, Y)
        return main
''')


def wrap32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >> 31 else v


def shl_by_constant(x: int, c: int) -> int:
    return 0 if c >= 32 else wrap32(x << c)


def shr_by_constant(x: int, c: int) -> int:
    return x >> min(c, 31)                    # Python's >> of a negative int is arithmetic


def shl_by_tile(x: int, s: int) -> int:
    return wrap32(x << s) if 0 <= s < 32 else 0


def shr_by_tile(x: int, s: int) -> int:
    return x >> s if 0 <= s < 32 else 0


CASES = {
    "x[i, j] & 0x0F0F": lambda x, s: x & 0x0F0F,
    "x[i, j] & -16": lambda x, s: x & -16,
    "x[i, j] | s[i, j]": lambda x, s: x | s,
    "x[i, j] | 6": lambda x, s: x | 6,
    "x[i, j] ^ s[i, j]": lambda x, s: x ^ s,
    "x[i, j] ^ -1": lambda x, s: x ^ -1,
    "~x[i, j]": lambda x, s: ~x,
    "x[i, j] << 3": lambda x, s: shl_by_constant(x, 3),
    "x[i, j] << 31": lambda x, s: shl_by_constant(x, 31),
    "x[i, j] << 32": lambda x, s: shl_by_constant(x, 32),
    "x[i, j] >> 4": lambda x, s: shr_by_constant(x, 4),
    "x[i, j] >> 0": lambda x, s: shr_by_constant(x, 0),
    "x[i, j] >> 31": lambda x, s: shr_by_constant(x, 31),
    "x[i, j] >> 40": lambda x, s: shr_by_constant(x, 40),
    "x[i, j] << s[i, j]": shl_by_tile,
    "x[i, j] >> s[i, j]": shr_by_tile,
    "((x[i, j] >> 4) & 15) | (s[i, j] << 8)": lambda x, s: ((x >> 4) & 15) | shl_by_constant(s, 8),
    "(x[i, j] & 255) + 1": lambda x, s: (x & 255) + 1,
    # TVM's function spellings of the same operators
    "T.bitwise_and(x[i, j], T.shift_right(s[i, j], 1)) | T.bitwise_not(s[i, j])":
        lambda x, s: (x & shr_by_constant(s, 1)) | ~s,
    "T.bitwise_or(T.shift_left(x[i, j], 2), T.bitwise_xor(s[i, j], 5))": lambda x, s: shl_by_constant(x, 2) | (s ^ 5),
}
SHIFTS = np.array([-1, 0, 1, 3, 31, 32, 40], np.int32)


def data(seed: int = 5):
    rng = np.random.default_rng(seed)
    x = rng.integers(-2 ** 20, 2 ** 20, (64, 64)).astype(np.int32)
    x.flat[:8] = [-1, 0, 1, -2 ** 23, 2 ** 23 - 1, -7, 7, -2 ** 20]       # results stay exact in float32 tiles
    s = rng.choice(SHIFTS, (64, 64)).astype(np.int32)
    s.flat[:len(SHIFTS)] = SHIFTS
    return x, s


def expected(fn, x, s) -> np.ndarray:
    return np.array([fn(int(a), int(b)) for a, b in zip(x.ravel(), s.ravel())], np.int64).reshape(x.shape)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("expr", list(CASES))
def test_each_operator_on_int32_data_is_exact(expr, arch):
    source = INT32.replace("EXPR", expr)
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry="bits", target=target)
    x, s = data()
    outcome = emulate(result.artifacts, target=target, inputs={"X": x, "S": s}, source=source, filename="k.py",
                      entry="bits")
    assert outcome.passed, outcome.verification.render()
    np.testing.assert_array_equal(outcome.outputs["Y"].astype(np.int64), expected(CASES[expr], x, s))


ALL_CALLS = "((x[i, j] & s[i, j]) | (x[i, j] ^ s[i, j])) + (~x[i, j] & 255) + ((x[i, j] | 3) ^ 5) + " \
            "(x[i, j] << s[i, j]) + (x[i, j] >> s[i, j]) + (x[i, j] << 2) + (x[i, j] >> 2)"
# every SFPU call and init the lowering emits, with the template head the real header declares it under
REAL_DECLARATIONS = [
    ("eltwise_unary/typecast.h", "typecast_tile", r"template <uint32_t IN_DTYPE, uint32_t OUT_DTYPE, bool "
                                                  r"is_fp32_dest_acc_en = DST_ACCUM_MODE>"),
    ("eltwise_unary/typecast.h", "typecast_tile_init", r"template <uint32_t IN_DTYPE, uint32_t OUT_DTYPE>"),
    *[("eltwise_unary/bitwise.h", f"bitwise_{op}_tile", r"template <DataFormat data_format>")
      for op in ("and", "or", "xor")],
    *[("eltwise_unary/bitwise.h", f"bitwise_{op}_tile_init", "") for op in ("and", "or", "xor")],
    *[("binary_bitwise_sfpu.h", f"bitwise_{op}_binary_tile", r"template <DataFormat data_format>")
      for op in ("and", "or", "xor")],
    ("binary_bitwise_sfpu.h", "binary_bitwise_tile_init", ""),
    ("eltwise_unary/bitwise_not.h", "bitwise_not_tile", ""),
    ("eltwise_unary/bitwise_not.h", "bitwise_not_tile_init", ""),
    *[("eltwise_unary/shift.h", f"{d}_shift_tile", r"template <DataFormat data_format>") for d in ("left", "right")],
    *[("eltwise_unary/shift.h", f"{d}_shift_tile_init", "") for d in ("left", "right")],
    *[("binary_shift.h", f"binary_{d}_shift_tile", r"template <DataFormat data_format>") for d in ("left", "right")],
    ("binary_shift.h", "binary_shift_tile_init", ""),
]


@pytest.mark.parametrize("arch", ARCHS)
def test_the_generated_kernels_pass_the_real_header_check(arch):
    """The kernels compile against ttnn 0.81.1's headers as the JIT wraps them (the compute kernel against the compute
    API's declarations, in full where an SDK has SFPI); the compute kernel includes the real header of each call it makes,
    which declares it with the template arguments it is given; the run verifies (all 11 functions at once)."""
    source = INT32.replace("EXPR", ALL_CALLS)
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry="bits", target=target)
    report = check_bundle(result.artifacts)
    assert report.passed, report.render()
    compute = result.artifacts["compute.cpp"].decode()
    api = sdk_headers.ensure_headers() / "tt_metal" / "hw" / "inc" / "api" / "compute"
    for header, name, template in REAL_DECLARATIONS:
        assert re.search(rf"\b{name}(<[^>]*>)?\(", compute), f"{name} is not called"
        assert f'#include "api/compute/{header}"' in compute
        real = (api / header).read_text()
        assert re.search(rf"{template}\s*ALWI void {name}\(" if template else rf"ALWI void {name}\(", real), \
            f"{header} does not declare {name} as called"
    for call in re.findall(r"\b(?:bitwise_\w+_tile|\w+_shift_tile)<([^>]*)>\(", compute):
        assert call == "DataFormat::Int32"
    assert compute.count("typecast_tile<(uint32_t)DataFormat::Float32, (uint32_t)DataFormat::Int32>(") >= 1
    assert '"fp32_dest_acc_en": true' in result.artifacts["tt.plan.json"].decode().replace("True", "true")
    rng = np.random.default_rng(6)       # small amounts and values: every partial sum is exact in float32
    x = rng.integers(-2 ** 18, 2 ** 18, (64, 64)).astype(np.int32)
    s = rng.integers(0, 5, (64, 64)).astype(np.int32)
    outcome = emulate(result.artifacts, target=target, inputs={"X": x, "S": s}, source=source, filename="k.py",
                      entry="bits")
    assert outcome.passed, outcome.verification.render()

    def everything(a, b):
        return ((a & b) | (a ^ b)) + (~a & 255) + ((a | 3) ^ 5) + shl_by_tile(a, b) + shr_by_tile(a, b) + \
            shl_by_constant(a, 2) + shr_by_constant(a, 2)
    want = expected(everything, x, s)
    assert np.abs(want).max() < 2 ** 24
    np.testing.assert_array_equal(outcome.outputs["Y"].astype(np.int64), want)


NIBBLES = src('''
    @tilelang.jit
    def nibbles(N=32, K=64):
        @T.prim_func
        def main(Codes: T.Tensor((N, K), T.uint8), Scale: T.Tensor((N,), T.float16), W: T.Tensor((N, K), T.float16)):
            with T.Kernel(1) as bx:
                c = T.alloc_shared((N, K), T.uint8)
                w = T.alloc_fragment((N, K), T.float16)
                T.copy(Codes, c)
                for i, j in T.Parallel(N, K):
                    w[i, j] = (T.cast(EXPR, T.float16) - 8.0) * Scale[i]
                T.copy(w, W)
        return main
''')
UINT8 = {"c[i, j] & 15": lambda c: c & 15, "c[i, j] >> 4": lambda c: c >> 4, "c[i, j] | 1": lambda c: c | 1,
         "c[i, j] << 1": lambda c: (c << 1) & 0xFF,           # uint8 << int: uint8, wraps at 8 bits
         "~c[i, j]": lambda c: 0xFF - c,                       # uint8 ~: uint8
         "(c[i, j] >> 4) ^ (c[i, j] & 15)": lambda c: (c >> 4) ^ (c & 15)}


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("expr", list(UINT8))
def test_unpacking_uint8_codes(expr, arch):
    """W4A16-style unpacking of uint8 codes (read as bfloat16 tiles, exact): each nibble operator, then the zero
    point and the per-row scale. `&` on data was once read as a logical and (d751bb0)."""
    rng = np.random.default_rng(40)
    codes = rng.integers(0, 256, (32, 64)).astype(np.uint8)
    codes.flat[:4] = [0, 255, 15, 240]
    scale = (rng.random(32) * 0.1 + 0.01).astype(np.float16)
    source = NIBBLES.replace("EXPR", expr)
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry="nibbles", target=target)
    outcome = emulate(result.artifacts, target=target, inputs={"Codes": codes, "Scale": scale}, source=source,
                      filename="k.py", entry="nibbles")
    assert outcome.passed, outcome.verification.render()
    values = np.array([UINT8[expr](int(c)) for c in codes.ravel()], np.float64).reshape(codes.shape)
    want = (values - 8.0) * scale.astype(np.float64)[:, None]
    np.testing.assert_allclose(outcome.outputs["W"].astype(np.float64), want, rtol=2e-3, atol=2e-3)


WORDS = src('''
    @T.prim_func
    def main(P: T.Tensor((64, 64), "uint32"), W: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as bx:
            w = T.alloc_fragment((64, 64), "float32")
            for i, j in T.Parallel(64, 64):
                w[i, j] = T.cast((P[i, j] >> 8) & 15, "float32") + T.cast(P[i, j] & 0xFF, "float32") * 0.5
            T.copy(w, W)
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_fields_of_uint32_words(arch):
    """Fields of uint32 words read straight from DRAM (integers are read as float32 tiles: below 2^24)."""
    words = np.random.default_rng(9).integers(0, 2 ** 24, (64, 64)).astype(np.uint32)
    target = TargetConfig(arch=arch)
    result = compile_source(WORDS, filename="k.py", target=target)
    outcome = emulate(result.artifacts, target=target, inputs={"P": words}, source=WORDS, filename="k.py")
    assert outcome.passed, outcome.verification.render()
    want = np.array([((int(p) >> 8) & 15) + (int(p) & 0xFF) * 0.5 for p in words.ravel()]).reshape(words.shape)
    np.testing.assert_array_equal(outcome.outputs["W"].astype(np.float64), want)


FLOAT = src('''
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), S: T.Tensor((64, 64), "int32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_fragment((64, 64), "float32")
            s = T.alloc_fragment((64, 64), "int32")
            T.copy(A, a)
            T.copy(S, s)
            for i, j in T.Parallel(64, 64):
                a[i, j] = EXPR
            T.copy(a, B)
''')


@pytest.mark.parametrize("expr, operand, what", [
    ("a[i, j] & 15", "a[i, j]", "float32 data"),
    ("s[i, j] | a[i, j]", "a[i, j]", "float32 data"),
    ("~a[i, j]", "a[i, j]", "float32 data"),
    ("a[i, j] >> 2", "a[i, j]", "float32 data"),
    ("(a[i, j] > 0) & s[i, j]", "(a[i, j] > 0)", "a truth value"),
    ("T.bitwise_and(a[i, j], 15)", "a[i, j]", "float32 data"),
    ("T.shift_left(s[i, j], a[i, j])", "a[i, j]", "float32 data"),
])
def test_bitwise_on_float_data_is_refused_where_written(expr, operand, what):
    source = FLOAT.replace("EXPR", expr)
    err = error_of(source)
    line = line_of(source, "a[i, j] = ")
    assert (err.location.line, err.location.col) == (line, source.splitlines()[line - 1].index(expr) + 1)
    assert f"`{operand}` is {what}" in err.message and "needs integers" in err.message


@pytest.mark.parametrize("expr, message", [
    ("1 << s[i, j]", "a constant shifted by per-element amounts is not lowered"),
    ("T.cast(c8[i, j] << 2, 'float32')", "on int8 values is not lowered"),
    ("T.cast(s[i, j] | 0x80000000, 'float32')", "the constant 2147483648 on int32 values is not lowered"),
    ("T.cast(S[i, j] ^ -1, 'float32')", "the constant -1 on uint32 values is not lowered"),
])
def test_what_does_not_map_is_refused_where_written(expr, message):
    source = FLOAT.replace("EXPR", expr).replace('T.copy(S, s)', 'T.copy(S, s); c8 = T.alloc_shared((64, 64), "int8")')
    if "S[i, j]" in expr:
        source = source.replace('S: T.Tensor((64, 64), "int32")', 'S: T.Tensor((64, 64), "uint32")')
    err = error_of(source)
    line = line_of(source, "a[i, j] = ")
    col = source.splitlines()[line - 1].index(expr.removeprefix("T.cast(").split(",")[0]) + 1
    assert (err.location.line, err.location.col) == (line, col)
    assert message in err.message
    assert err.refusal is not None and err.refusal.expressible


def test_a_16_bit_dst_is_refused_for_bitwise_operators():
    with pytest.raises(CompileError) as info:
        compile_source(INT32.replace("EXPR", "x[i, j] & 7"), filename="k.py", entry="bits",
                       target=TargetConfig(fp32_accumulation=False))
    assert "needs a 32-bit DST" in info.value.message


def int32_of(x: float) -> int:
    """The SFPU's typecast to Int32 (ckernel_sfpu_typecast.h): truncated toward zero, saturated, NaN by its sign."""
    if math.isnan(x):
        return -2 ** 31 if math.copysign(1.0, x) < 0 else 2 ** 31 - 1
    if math.isinf(x):
        return -2 ** 31 if x < 0 else 2 ** 31 - 1
    return max(-2 ** 31, min(2 ** 31 - 1, math.trunc(x)))


def test_the_emulators_int32_conversions_and_operators_are_the_llks(make_bundle, run):
    """A hand-written compute kernel: fp32 tile -> typecast to Int32 -> << 1 -> | 1 -> xor 0x40000000 -> ~ ->
    typecast back to fp32, in a 32-bit DST. Saturation, NaN, negative zero, wrap-around of the shift and the
    round-to-nearest-even way back (2^24 + 1 -> 2^24, 2^24 + 3 -> 2^24 + 4) are all reached."""
    to_int = "typecast_tile_init<0, 8>(); typecast_tile<0, 8>(0);"
    to_float = "typecast_tile_init<8, 0>(); typecast_tile<8, 0>(0);"
    body = ("copy_tile(cb_x, 0, 0); " + to_int + " left_shift_tile_init(); left_shift_tile<DataFormat::Int32>(0, 1); "
            "bitwise_or_tile_init(); bitwise_or_tile<DataFormat::Int32>(0, 1); bitwise_xor_tile_init(); "
            "bitwise_xor_tile<DataFormat::Int32>(0, 0x40000000u); bitwise_not_tile_init(); bitwise_not_tile(0); "
            + to_float)
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "\n".join([
        '#include "api/compute/eltwise_unary/bitwise.h"', '#include "api/compute/eltwise_unary/shift.h"',
        '#include "api/compute/eltwise_unary/bitwise_not.h"',
        "#define OP_INIT copy_init(cb_x);", f"#define OP_BODY {body}"])})
    rng = np.random.default_rng(8)
    x = (rng.uniform(-3e9, 3e9, (64, 96)) * rng.choice([1.0, 1e-6, 1e-9], (64, 96))).astype(np.float32)
    special = [np.nan, -np.nan, np.inf, -np.inf, 2.0 ** 31, -2.0 ** 31, 3e9, -3e9, 2.7, -2.7, 0.5, -0.0, 8388608.0,
               8388609.0, -8388607.0, 1.0]
    x.flat[:len(special)] = special
    res = run(bundle, {"x": x, "y": x, "cfg": eltwise_cfg("fp32", "fp32", fp32_dest=True, unpack_fp32=True, cores=2)})
    assert res.report["error"] is None

    def expect(v: float) -> float:
        i = wrap32(int32_of(v) << 1) | 1
        i = wrap32(~(i ^ 0x40000000))
        return float(np.float32(i))            # int -> float32: round to nearest even
    want = np.array([expect(float(v)) for v in x.ravel()], np.float32).reshape(x.shape)
    np.testing.assert_array_equal(res.outputs["z"], want)
    assert float(np.float32(16777217)) == 16777216.0 and float(np.float32(16777219)) == 16777220.0


def test_int32_in_a_16_bit_dst_stops_the_kernel(make_bundle, run):
    from compiler.toolchain.emulate import EmulationError
    bundle = make_bundle("eltwise", prepend={"compute.cpp": "#define OP_INIT copy_init(cb_x);\n#define OP_BODY "
                         "copy_tile(cb_x, 0, 0); typecast_tile_init<0, 8>(); typecast_tile<0, 8>(0);"})
    x = np.ones((32, 32), np.float32)
    with pytest.raises(EmulationError) as info:
        run(bundle, {"x": x, "y": x, "cfg": eltwise_cfg(cores=1)})
    assert "needs a 32-bit DST" in info.value.message and "typecast_tile<Float32, Int32>" in info.value.message
