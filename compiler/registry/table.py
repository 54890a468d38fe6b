"""The op registry: every tile op and every SFPU function, one entry each. Add an op here (see
compiler/README.md, "How to add an op"), then run `python -m compiler.registry.generate` for the emulator's C++.

Costs are SFPU instructions per 32-datum row of a tile (x sfpu_rows_per_tile per tile); sources as in
compiler/device_costs.json's `_about` ([ISA] tt-isa-documentation, [LLK] the ttnn 0.81.1 wheel's tt-llk).
"""
from __future__ import annotations

import math
import operator

import numpy as np

from .spec import Cost, Registry, Scale, Sfpu, TileLangFunction, TileOp

LN2 = math.log(2.0)
ONE = np.float32(1.0)
_ERF = np.frompyfunc(math.erf, 1, 1)     # NumPy has no erf; math.erf per element (double, then rounded)

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
SUB_BINARY = Sfpu("SubBinary", "sub_binary_tile", "sub_binary_tile_init", "eltwise_binary_sfpu.h", "binary", SIMPLE,
                  "a - b", call_template=ADD_BINARY.call_template)
MUL_BINARY = Sfpu("MulBinary", "mul_binary_tile", "mul_binary_tile_init", "eltwise_binary_sfpu.h", "binary", SIMPLE,
                  "a * b", call_template="template <bool is_fp32_dest_acc_en = DST_ACCUM_MODE>")
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
    TileOp("silu", "unary", lambda x: x / (ONE + np.exp(-x)), lowered=False),
    TileOp("sum", "reduce", np.sum, combine=np.add, pool="sum"),
    TileOp("max", "reduce", np.max, combine=np.maximum, pool="max", sfpu_pool="MAX", sfpu=SFPU_REDUCE),
    TileOp("min", "reduce", np.min, combine=np.minimum, sfpu_pool="MIN", sfpu=SFPU_REDUCE, lowered=False),
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

REGISTRY = Registry(TILE_OPS, TILELANG_FUNCTIONS, DEVICE_ONLY, shared_costs=(SIMPLE, FILL))
