"""The op registry: every tile op and every SFPU function, one entry each. Add an op here (see
compiler/README.md, "How to add an op"), then run `python -m compiler.registry.generate` for the emulator's C++.

Costs are SFPU instructions per 32-datum row of a tile (x sfpu_rows_per_tile per tile); sources as in
compiler/device_costs.json's `_about` ([ISA] tt-isa-documentation, [LLK] the ttnn 0.81.1 wheel's tt-llk).
"""
from __future__ import annotations

import math
import operator
from dataclasses import replace

import numpy as np

from .spec import Cost, Registry, Scale, Sfpu, TileLangFunction, TileOp

LN2 = math.log(2.0)
ONE = np.float32(1.0)
_ERF = np.frompyfunc(math.erf, 1, 1)     # NumPy has no erf; math.erf per element (double, then rounded)

def int32_of(x) -> np.ndarray:
    """fp32 values as the SFPU's typecast to Int32 makes them: truncated toward zero, saturated, NaN by its sign."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):
        t = np.trunc(np.where(np.isnan(x), np.where(np.signbit(x), -np.inf, np.inf), x).astype(np.float64))
    return np.clip(t, -2.0 ** 31, 2.0 ** 31 - 1).astype(np.int32)


def _shift_left(a, b, scalar: bool):
    amount = b.astype(np.int64) if not scalar else np.int64(b) & 0xFFFFFFFF   # a constant is read as unsigned
    out = (a.astype(np.int64) << np.clip(amount, 0, 31)) & 0xFFFFFFFF
    return np.where((amount < 0) | (amount >= 32), 0, out).astype(np.uint32).view(np.int32)


def _shift_right(a, b, scalar: bool):
    amount = b.astype(np.int64) if not scalar else np.int64(b) & 0xFFFFFFFF
    shifted = a.astype(np.int64) >> np.clip(amount, 0, 31)                    # arithmetic
    if scalar:                                   # right_shift_tile: an amount >= 32 is clamped to 31
        return shifted.astype(np.int32)
    return np.where((amount < 0) | (amount >= 32), 0, shifted).astype(np.int32)   # binary_right_shift_tile: 0


def _on_int32(fn, *args):
    """An Int32 tile op on float operands: each converted as the SFPU does (int32_of), `fn` on the integers, the
    result back to float32 (round to nearest even). A shift's scalar amount (a constant) and a tile's amounts differ
    outside [0, 31]: `fn` is told which it has."""
    ints = [int32_of(a) for a in args]
    if fn in (_shift_left, _shift_right):
        out = fn(ints[0], ints[1], np.ndim(args[1]) == 0)
    else:
        out = fn(*ints)
    return np.asarray(out, dtype=np.int32).astype(np.float32)


# ---- costs several functions share --------------------------------------------------------------------------------
SIMPLE = Cost("sfpu_instr_simple", 4, "estimate",
              "SFPLOAD, one arithmetic instruction, SFPSTORE, loop increment "
              "(add/sub/mul/scalar/max/min/negative/square/abs/sign/copy)")
FILL = Cost("sfpu_instr_fill", 2, "estimate", "SFPLOADI + SFPSTORE")

# ---- SFPU functions -------------------------------------------------------------------------------------------------
_TEMPLATE_APPROX = "template <bool fast_and_approx = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>"

EXP = Sfpu("Exp", "exp_tile", "exp_tile_init", "eltwise_unary/exp.h", "unary",
           Cost("sfpu_instr_exp", 18, "estimate",
                "range reduction, polynomial and exponent insertion in ckernel_sfpu_exp (precise mode)"),
           "std::exp(x)", api=False)
LOG = Sfpu("Log", "log_tile", "log_tile_init", "compute_kernel_api.h", "unary",
           Cost("sfpu_instr_log", 26, "estimate", "mantissa/exponent split and polynomial in ckernel_sfpu_log.h"),
           "std::log(x)", call_template=_TEMPLATE_APPROX, init_template=_TEMPLATE_APPROX)
SQRT = Sfpu("Sqrt", "sqrt_tile", "sqrt_tile_init", "eltwise_unary/sqrt.h", "unary",
            Cost("sfpu_instr_sqrt", 20, "estimate", "reciprocal square root refinement then multiply"),
            "std::sqrt(x)", call_template="template <bool FAST_APPROX = false, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>")
RECIP = Sfpu("Recip", "recip_tile", "recip_tile_init", "eltwise_unary/recip.h", "unary",
             Cost("sfpu_instr_recip", 20, "estimate", "Newton-Raphson reciprocal, two iterations"),
             "1.0f / x", api=False)
RSQRT = Sfpu("Rsqrt", "rsqrt_tile", "rsqrt_tile_init", "eltwise_unary/rsqrt.h", "unary",
             Cost("sfpu_instr_rsqrt", 22, "estimate", "as sqrt, without the final multiply plus a reciprocal fix-up"),
             "1.0f / std::sqrt(x)", call_template="template <RsqrtMode mode = RsqrtMode::Default, "
             "bool is_fp32_dest_acc_en = DST_ACCUM_MODE>")
ADD_BINARY = Sfpu("AddBinary", "add_binary_tile", "add_binary_tile_init", "eltwise_binary_sfpu.h", "binary", SIMPLE,
                  "a + b", call_template="template <ckernel::DstRoundingMode dst_rounding_mode = "
                  "ckernel::DstRoundingMode::Default, bool is_fp32_dest_acc_en = DST_ACCUM_MODE>")
# add, sub and mul share one SFPU configuration: their inits differ only in sfpu_binary_init<APPROX, op>, which does
# nothing for ADD, SUB and MUL ([LLK] ckernel_sfpu_binary.h, both archs, 0.81.1: only DIV, POW and XLOGY load
# constants), after the same llk_math_eltwise_binary_sfpu_init (address modifiers, counters); so any of the three
# inits configures the SFPU for all three (init_opcode: the configuration's name)
SUB_BINARY = Sfpu("SubBinary", "sub_binary_tile", "sub_binary_tile_init", "eltwise_binary_sfpu.h", "binary", SIMPLE,
                  "a - b", call_template=ADD_BINARY.call_template, init_opcode="AddBinary")
MUL_BINARY = Sfpu("MulBinary", "mul_binary_tile", "mul_binary_tile_init", "eltwise_binary_sfpu.h", "binary", SIMPLE,
                  "a * b", call_template="template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>",
                  init_opcode="AddBinary")
MAX_BINARY = Sfpu("MaxBinary", "binary_max_tile", "binary_max_tile_init", "binary_max_min.h", "binary", SIMPLE,
                  "a > b ? a : b", extra_params="VectorMode vector_mode = VectorMode::RC")
MIN_BINARY = Sfpu("MinBinary", "binary_min_tile", "binary_min_tile_init", "binary_max_min.h", "binary", SIMPLE,
                  "a < b ? a : b", extra_params="VectorMode vector_mode = VectorMode::RC")
UNARY_MAX = Sfpu("UnaryMax", "unary_max_tile", "unary_max_tile_init", "compute_kernel_api.h", "unary_param", SIMPLE,
                 "x > s ? x : s")
UNARY_MIN = Sfpu("UnaryMin", "unary_min_tile", "unary_min_tile_init", "compute_kernel_api.h", "unary_param", SIMPLE,
                 "x < s ? x : s")

# comparisons with zero (api/compute/eltwise_unary/comp.h): 1.0 where the test holds, 0.0 elsewhere. As the LLK
# (ckernel_sfpu_comp.h) computes them: `v < 0` is the SFPU's sign test, so ltz/gez take -0.0 (and a NaN with its sign
# bit set) as negative; gtz, lez, eqz and nez agree with IEEE comparisons on +-0
_ZERO_TESTS = (("gtz", "x > 0.0f"), ("gez", "!std::signbit(x)"), ("ltz", "std::signbit(x)"), ("lez", "x <= 0.0f"),
               ("eqz", "x == 0.0f"), ("nez", "x != 0.0f"))
COMPARE_WITH_ZERO = {name: Sfpu(name.capitalize(), f"{name}_tile", f"{name}_tile_init", "eltwise_unary/comp.h", "unary",
                                SIMPLE, f"{test} ? 1.0f : 0.0f") for name, test in _ZERO_TESTS}
# mask_tile(data, mask): DST[data] = 0 where DST[mask] == 0, in place (a select's two halves are added)
MASK = Sfpu("Mask", "mask_tile", "mask_tile_init", "mask.h", "binary", SIMPLE, "b == 0.0f ? 0.0f : a",
            standard_call=False, api=False)

# sfpu_reduce<pool, format, REDUCE_ROW>(idst, ct_dim, rt_dim) (compute_kernel_api.h): the exact row max / min of
# fp32 (or bf16) DST tiles, where the FPU's reduce_tile would round fp32 to TF32 in its source registers. Per tile
# ([LLK] ckernel_sfpu_reduce.h perform_reduce_row_max_tile, 0.81.1): 4 groups of 8 rows, each 8 SFPLOAD, 6 SFPSWAP
# (the two faces' columns), a horizontal rotate-and-swap butterfly, 2 SFPSTORE. The butterfly is 28 instructions
# on Wormhole (12 inline + 16 replayed, the last rotate included) and 26 on Blackhole (no last rotate): 176 and 168
# a tile; the model counts Wormhole's 176 for both (one registry cost), 5.5 per 32-datum row. The per-call setup
# and the cross-tile combine (ct_dim > 1) are counted by the emulator (src/compute.cpp sfpu_reduce)
SFPU_REDUCE = Sfpu("Reduce", "sfpu_reduce", "sfpu_reduce_init", "compute_kernel_api.h", "reduce",
                   Cost("sfpu_instr_reduce_row", 5.5, "derived",
                        "[LLK] ckernel_sfpu_reduce.h perform_reduce_row_max_tile (0.81.1): 4 x (8 SFPLOAD + 6 SFPSWAP "
                        "+ 28 butterfly + 2 SFPSTORE) = 176 instructions a tile (Wormhole; Blackhole 168) / 32 rows"),
                   standard_call=False, api=False)

# ---- Int32 in DST (bitwise operators on integer data) ----------------------------------------------------------------
# Integer data lives in float tiles (exact below 2^24): the SFPU converts the fp32 values to Int32 in DST, computes on
# the bits and converts back. Semantics as the LLKs compute them (ckernel_sfpu_typecast.h, ckernel_sfpu_bitwise.h,
# ckernel_sfpu_binary_bitwise.h, ckernel_sfpu_bitwise_not.h, ckernel_sfpu_unary_shift.h, ckernel_sfpu_shift.h): the
# conversion truncates toward zero and saturates (NaN by its sign), the way back rounds to nearest even; a shift by a
# constant >= 32 (or < 0, read as unsigned) gives 0 to the left and the sign to the right (clamped to 31), a shift by
# a tile's amounts outside [0, 31] gives 0 both ways; right shifts of Int32 are arithmetic. Costs: instructions per
# row of the LLK loops (ttnn 0.81.1, the same on both architectures).
_I32 = "DataFormat::Int32"
_TYPECAST_TEMPLATE = "<(uint32_t)DataFormat::{0}, (uint32_t)DataFormat::{1}>"
TO_INT32 = Sfpu("TypecastFp32Int32", "typecast_fp32_to_int32_tile", "typecast_fp32_to_int32_tile_init",
                "eltwise_unary/typecast.h", "unary",
                Cost("sfpu_instr_typecast_fp32_int32", 16, "derived", "[LLK] ckernel_sfpu_typecast.h "
                     "calculate_typecast_fp32_to_int32: 16 instructions per row (SFPLOAD, 2 SFPLOADI, SFPEXEXP, 2 "
                     "SFPIADD, SFPEXMAN, SFPSHFT, SFPENCC, the negate's SFPSETCC + SFPIADD, the overflow fix-up's "
                     "SFPCOMPC + SFPSETCC + SFPIADD, SFPENCC, SFPSTORE)"),
                "ttemu::dev::int32_of_fp32_bits(u)", api=False, standard_call=True, integer=True,
                spelled="typecast_tile" + _TYPECAST_TEMPLATE.format("Float32", "Int32"),
                init_spelled="typecast_tile_init" + _TYPECAST_TEMPLATE.format("Float32", "Int32"))
TO_FP32 = Sfpu("TypecastInt32Fp32", "typecast_int32_to_fp32_tile", "typecast_int32_to_fp32_tile_init",
               "eltwise_unary/typecast.h", "unary",
               Cost("sfpu_instr_typecast_int32_fp32", 4, "derived", "[LLK] ckernel_sfpu_typecast.h "
                    "calculate_typecast_int32_to_fp32: SFPLOADMACRO, 4 cycles per row (its comment's schedule: "
                    "abs, cast, setsgn, the -2^31 MAD)"),
               "ttemu::dev::fp32_bits_of_int32(u)", api=False, standard_call=True, integer=True,
               spelled="typecast_tile" + _TYPECAST_TEMPLATE.format("Int32", "Float32"),
               init_spelled="typecast_tile_init" + _TYPECAST_TEMPLATE.format("Int32", "Float32"))
_DATA_FORMAT_TEMPLATE = "template <DataFormat data_format>"


def _int32_fn(opcode, call, init, header, family, cost, cpp):
    return Sfpu(opcode, call, init, header, family, cost, cpp, integer=True, spelled=f"{call}<{_I32}>",
                call_template=_DATA_FORMAT_TEMPLATE)


BITWISE_SCALAR = {name: _int32_fn(f"Bitwise{name.capitalize()}", f"bitwise_{name}_tile", f"bitwise_{name}_tile_init",
                                  "eltwise_unary/bitwise.h", "unary_param", SIMPLE, f"u {symbol} p")
                  for name, symbol in (("and", "&"), ("or", "|"), ("xor", "^"))}
BITWISE_BINARY = {name: _int32_fn(f"Bitwise{name.capitalize()}Binary", f"bitwise_{name}_binary_tile",
                                  "binary_bitwise_tile_init", "binary_bitwise_sfpu.h", "binary", SIMPLE,
                                  f"a {symbol} b") for name, symbol in (("and", "&"), ("or", "|"), ("xor", "^"))}
BITWISE_BINARY = {name: fn if name == "and" else replace(fn, init_opcode="BitwiseAndBinary")   # one init for the three
                  for name, fn in BITWISE_BINARY.items()}
BITWISE_NOT = Sfpu("BitwiseNot", "bitwise_not_tile", "bitwise_not_tile_init", "eltwise_unary/bitwise_not.h", "unary",
                   SIMPLE, "~u", integer=True)
LEFT_SHIFT = _int32_fn("LeftShift", "left_shift_tile", "left_shift_tile_init", "eltwise_unary/shift.h", "unary_param",
                       SIMPLE, "p >= 32u ? 0u : u << p")
RIGHT_SHIFT = _int32_fn("RightShift", "right_shift_tile", "right_shift_tile_init", "eltwise_unary/shift.h",
                        "unary_param",
                        Cost("sfpu_instr_right_shift", 7, "derived", "[LLK] ckernel_sfpu_unary_shift.h "
                             "calculate_right_shift<Int32>: SFPLOAD, SFPSHFT, v_if(v < 0) (SFPSETCC), SFPOR of the "
                             "sign mask, SFPENCC, SFPSTORE, loop increment"),
                        "ttemu::dev::arithmetic_shift_right(u, p >= 32u ? 31u : p)")
LEFT_SHIFT_BINARY = _int32_fn("LeftShiftBinary", "binary_left_shift_tile", "binary_shift_tile_init", "binary_shift.h",
                              "binary",
                              Cost("sfpu_instr_binary_left_shift", 9, "estimate", "[LLK] ckernel_sfpu_shift.h "
                                   "calculate_binary_left_shift: 2 SFPLOADs, SFPSHFT, the range test shift < 0 || "
                                   "shift >= 32 (2 SFPSETCC, an SFPIADD), the zeroing move, SFPENCC, SFPSTORE"),
                              "b >= 32u ? 0u : a << b")     # b read as unsigned: a negative amount is >= 32
RIGHT_SHIFT_BINARY = replace(_int32_fn(
    "RightShiftBinary", "binary_right_shift_tile", "binary_shift_tile_init", "binary_shift.h", "binary",
    Cost("sfpu_instr_binary_right_shift", 16, "estimate", "[LLK] ckernel_sfpu_shift.h calculate_binary_right_shift "
         "(Int32): 2 SFPLOADs, the negated amount (SFPIADD), SFPSHFT, v_if(value < 0 && shift != 0) (2 SFPSETCC), "
         "the high ones (SFPLOADI, SFPIADD, SFPSHFT, SFPOR), SFPENCC, the range test and zeroing (4), SFPSTORE"),
    "b >= 32u ? 0u : ttemu::dev::arithmetic_shift_right(a, b)"), init_opcode="LeftShiftBinary")

# The emulator's other SFPU functions: ttnn's kernels and hand-written programs call them; no tile op lowers to them.
DEVICE_ONLY = (
    Sfpu("Fill", "fill_tile", "fill_tile_init", "eltwise_unary/fill.h", "unary_param", FILL, "s", standard_call=False,
         api=False),
    Sfpu("BinopScalar", "", "binop_with_scalar_tile_init", "eltwise_unary/binop_with_scalar.h", "scalar", SIMPLE,
         api=False),
    Sfpu("CopyDest", "copy_dest_values", "copy_dest_values_init", "copy_dest_values.h", "binary", SIMPLE, "a",
         standard_call=False, api=False),
    Sfpu("Negative", "negative_tile", "negative_tile_init", "eltwise_unary/negative.h", "unary", SIMPLE, "-x"),
    Sfpu("Square", "square_tile", "square_tile_init", "compute_kernel_api.h", "unary", SIMPLE, "x * x",
         call_template="template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>"),
    Sfpu("Abs", "abs_tile", "abs_tile_init", "compute_kernel_api.h", "unary", SIMPLE, "std::fabs(x)"),
    Sfpu("Sign", "sign_tile", "sign_tile_init", "compute_kernel_api.h", "unary", SIMPLE,
         "x > 0.0f ? 1.0f : x < 0.0f ? -1.0f : 0.0f"),
    Sfpu("Identity", "identity_tile", "identity_tile_init", "eltwise_unary/identity.h", "unary", SIMPLE, "x"),
    # mask_posinf_tile (configured by mask_tile_init): +inf where DST[mask] == 0
    Sfpu("MaskPosInf", "mask_posinf_tile", "mask_tile_init", "mask.h", "binary", SIMPLE, "b == 0.0f ? INFINITY : a",
         init_opcode="Mask", standard_call=False, api=False),
)

# ---- tile ops -------------------------------------------------------------------------------------------------------
_SCALAR_INIT = "binop_with_scalar_tile_init"

TILE_OPS = (
    TileOp("copy", "copy"),
    TileOp("cast", "cast"),
    TileOp("zero", "zero"),
    TileOp("fill", "fill"),
    TileOp("gemm", "gemm"),
    TileOp("add", "binary", np.add, operator.add, tilelang=("+",), fpu="add", sfpu=ADD_BINARY,
           with_scalar=("add_unary_tile", _SCALAR_INIT)),
    TileOp("sub", "binary", np.subtract, operator.sub, tilelang=("-",), fpu="sub", sfpu=SUB_BINARY,
           with_scalar=("sub_unary_tile", _SCALAR_INIT), scalar_first="rsub_unary_tile"),
    TileOp("mul", "binary", np.multiply, operator.mul, tilelang=("*",), fpu="mul", sfpu=MUL_BINARY,
           with_scalar=("mul_unary_tile", _SCALAR_INIT)),
    TileOp("maximum", "binary", np.maximum, max, tilelang=("max",), sfpu=MAX_BINARY,
           with_scalar=UNARY_MAX),
    TileOp("minimum", "binary", np.minimum, min, tilelang=("min",), sfpu=MIN_BINARY,
           with_scalar=UNARY_MIN),
    # keep(a, m): a where m != 0, else 0 -- T.if_then_else on data values is keep(a, c) + keep(b, eqz(c))
    TileOp("keep", "binary", lambda a, m: np.where(m != 0, a, np.float32(0)), lambda a, m: a if m != 0 else 0.0,
           tvm_builtin=False, sfpu=MASK),
    *(TileOp(name, "unary", (lambda f: lambda x: f(x).astype(np.float32))(numpy_test),
             (lambda f: lambda x: float(f(x)))(scalar_test), tvm_builtin=False, lowering=(COMPARE_WITH_ZERO[name],))
      for name, numpy_test, scalar_test in (
          ("gtz", lambda x: x > 0, lambda x: x > 0), ("lez", lambda x: x <= 0, lambda x: x <= 0),
          ("eqz", lambda x: x == 0, lambda x: x == 0), ("nez", lambda x: x != 0, lambda x: x != 0),
          ("ltz", np.signbit, lambda x: math.copysign(1.0, x) < 0),
          ("gez", lambda x: ~np.signbit(x), lambda x: math.copysign(1.0, x) > 0))),
    TileOp("exp", "unary", np.exp, math.exp, tilelang=("exp",), affine=True, tvm_scalar="exp", lowering=(EXP,)),
    TileOp("exp2", "unary", np.exp2, lambda x: 2.0 ** x, tilelang=("exp2",), affine=True, tvm_scalar="exp2",
           lowering=(Scale(LN2), EXP)),                     # 2^x = e^(x ln 2)
    TileOp("log2", "unary", np.log2, math.log2, tilelang=("log2",), affine=True, tvm_scalar="log2",
           lowering=(LOG, Scale(1.0 / LN2))),               # log2(x) = ln(x) / ln 2
    TileOp("sqrt", "unary", np.sqrt, math.sqrt, tilelang=("sqrt",), affine=True, tvm_scalar="sqrt", lowering=(SQRT,)),
    TileOp("reciprocal", "unary", lambda x: ONE / x, lambda x: 1 / x, lowering=(RECIP,)),
    TileOp("rsqrt", "unary", lambda x: ONE / np.sqrt(x), lambda x: 1 / math.sqrt(x), tilelang=("rsqrt",),
           tvm_builtin=False, tvm_scalar="rsqrt", lowering=(RSQRT,)),
    TileOp("erf", "unary", lambda x: _ERF(x).astype(np.float32), math.erf, tilelang=("erf",), tvm_builtin=False,
           tvm_scalar="erf", lowering=(
               Sfpu("Erf", "erf_tile", "erf_tile_init", "eltwise_unary/erf_erfc.h", "unary",
                    Cost("sfpu_instr_erf", 30, "estimate", "[LLK] ckernel_sfpu_erf.h (bf16 path): a rational "
                         "P(x^2)/Q(x^2), two degree-4 Horner chains, a Newton-Raphson reciprocal, two clamps"),
                    "std::erf(x)", call_template="template <bool fast_and_approx = true>",
                    init_template="template <bool fast_and_approx = true>"),)),
    TileOp("log1p", "unary", np.log1p, math.log1p, tilelang=("log1p",), tvm_builtin=False, tvm_scalar="log1p",
           lowering=(
               Sfpu("Log1p", "log1p_tile", "log1p_tile_init", "eltwise_unary/log1p.h", "unary",
                    Cost("sfpu_instr_log1p", 28, "estimate", "[LLK] ckernel_sfpu_log1p.h: exponent split around "
                         "0.75, a degree-3 (bf16 DST) to degree-9 (fp32) polynomial, the exponent times ln 2, an "
                         "infinity fix-up"),
                    "std::log1p(x)", call_template=_TEMPLATE_APPROX, init_template=_TEMPLATE_APPROX),)),
    TileOp("floor", "unary", np.floor, math.floor, tilelang=("floor",), tvm_builtin=False, tvm_scalar="floor", lowering=(
        Sfpu("Floor", "floor_tile", "rounding_op_tile_init", "eltwise_unary/rounding.h", "unary",
             Cost("sfpu_instr_floor", 13, "estimate", "[LLK] ckernel_sfpu_rounding_ops.h _floor_body_: the trunc "
                  "body's 9 instructions, then a compare and an integer add where the value was negative"),
             "std::floor(x)"),)),
    TileOp("ceil", "unary", np.ceil, math.ceil, tilelang=("ceil",), tvm_builtin=False, tvm_scalar="ceil", lowering=(
        Sfpu("Ceil", "ceil_tile", "rounding_op_tile_init", "eltwise_unary/rounding.h", "unary",
             Cost("sfpu_instr_ceil", 13, "estimate", "[LLK] ckernel_sfpu_rounding_ops.h _ceil_body_: the trunc "
                  "body's 9 instructions, then a compare and an integer add where the value was positive"),
             "std::ceil(x)", init_opcode="Floor"),)),
    TileOp("trunc", "unary", np.trunc, math.trunc, tilelang=("trunc",), tvm_builtin=False, tvm_scalar="trunc", lowering=(
        Sfpu("Trunc", "trunc_tile", "rounding_op_tile_init", "eltwise_unary/rounding.h", "unary",
             Cost("sfpu_instr_trunc", 10, "estimate", "[LLK] ckernel_sfpu_rounding_ops.h _trunc_body_: exponent "
                  "extract, a mask of the fraction bits shifted by it, an and"),
             "std::trunc(x)", init_opcode="Floor"),)),
    # bitwise operators on integer data (values of int tiles, held in float tiles): Int32 on the SFPU
    *(TileOp(f"bitwise_{name}", "binary", (lambda f: lambda a, b: _on_int32(f, a, b))(fn), symbol_fn,
             tilelang=(symbol,), tvm_builtin=False, sfpu=BITWISE_BINARY[name], with_scalar=BITWISE_SCALAR[name],
             integer=True)
      for name, symbol, fn, symbol_fn in (("and", "&", np.bitwise_and, lambda a, b: int(a) & int(b)),
                                          ("or", "|", np.bitwise_or, lambda a, b: int(a) | int(b)),
                                          ("xor", "^", np.bitwise_xor, lambda a, b: int(a) ^ int(b)))),
    TileOp("left_shift", "binary", lambda a, b: _on_int32(_shift_left, a, b), tilelang=("<<",), tvm_builtin=False,
           sfpu=LEFT_SHIFT_BINARY, with_scalar=LEFT_SHIFT, commutative=False, integer=True),
    TileOp("right_shift", "binary", lambda a, b: _on_int32(_shift_right, a, b), tilelang=(">>",),
           tvm_builtin=False, sfpu=RIGHT_SHIFT_BINARY, with_scalar=RIGHT_SHIFT, commutative=False, integer=True),
    TileOp("bitwise_not", "unary", lambda x: _on_int32(np.invert, x), lambda x: float(~int(x)),
           tilelang=("bitwise_not",), tvm_builtin=False, lowering=(BITWISE_NOT,), integer=True),
    TileOp("silu", "unary", lambda x: x / (ONE + np.exp(-x)), lowered=False),
    TileOp("sum", "reduce", np.sum, combine=np.add, pool="sum"),
    TileOp("max", "reduce", np.max, combine=np.maximum, pool="max", sfpu_pool="MAX", sfpu=SFPU_REDUCE),
    TileOp("min", "reduce", np.min, combine=np.minimum, sfpu_pool="MIN", sfpu=SFPU_REDUCE),
)

# ---- TileLang element functions built from tile ops ---------------------------------------------------------------
def _round_half_away(v: float) -> float:
    """TileLang's T.round (CUDA's roundf, LLVM's llvm.round): to the nearest integer, halves away from zero; not
    Python's round (halves to even) nor floor(x + 0.5), whose add rounds 0.49999997 up."""
    t = math.trunc(v)
    return float(t + (1 if v - t >= 0.5 else -1 if v - t <= -0.5 else 0))


def _round_expand(t, x):
    """trunc(x), plus one away from zero where the dropped fraction x - trunc(x) (exact: trunc clears fraction bits)
    is at least a half; ttnn's round_tile rounds halves to even, which T.round does not."""
    whole = t.trunc(x)
    return whole + t.select(x - whole >= 0.5, 1.0, 0.0) - t.select(x - whole <= -0.5, 1.0, 0.0)


TILELANG_FUNCTIONS = (
    TileLangFunction("log", math.log, lambda t, x: t.log2(x) * LN2, tvm_scalar="log"),
    TileLangFunction("abs", abs, lambda t, x: t.max(x, x * -1.0), tvm_scalar="fabs"),
    TileLangFunction("sigmoid", lambda x: 1 / (1 + math.exp(-x)), lambda t, x: 1.0 / (t.exp(x * -1.0) + 1.0),
                     tvm_scalar="sigmoid"),
    TileLangFunction("tanh", math.tanh, lambda t, x: (1.0 / (t.exp(x * -2.0) + 1.0)) * 2.0 - 1.0,   # 2 sigmoid(2x) - 1
                     tvm_scalar="tanh"),
    TileLangFunction("round", _round_half_away, _round_expand, tvm_scalar="round"),
)

REGISTRY = Registry(TILE_OPS, TILELANG_FUNCTIONS, DEVICE_ONLY + (TO_INT32, TO_FP32), shared_costs=(SIMPLE, FILL))
