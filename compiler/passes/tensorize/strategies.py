"""One tile op at one tile position: which matrix-engine (FPU) or vector-engine (SFPU) calls compute it.

Each operand arrives as a `Src`: a DST slot (a value the window computed), a CB tile (a staging tile, or the
current version of a CB-resident buffer; `bcast` for an (M, 1) column, (1, N) row or single value broadcast), or
a scalar. The strategies:

- gemm: matmul_tiles over K into the destination slot (which holds C when accumulating); a group of DST slots
  that is an rt x ct rectangle of the output, row-major, gets one matmul_block per K tile instead (one LLK call
  for rt*ct tile products: the per-call cost is what bounds small tile ops) -- for a transposed B too when its
  CB holds the tiles column by column (the unpacker transposes each tile);
- sum/max over the row: reduce_tile over the source row's tiles with the scaler CB (max starts from -inf); a max or
  min of fp32 data on the SFPU instead (sfpu_reduce: exact, where the FPU's TF32 source registers would round it),
  a tile at a time;
- add/sub/mul of two CB tiles: the FPU in one op, `*_tiles_bcast_{cols,rows,scalar}` for a broadcast second
  operand. fp32 operands are rounded to TF32 in the FPU's 19-bit source registers: that is the one rounding
  compiler/precision.py counts for an element-wise op in an fp32 DST, so it is taken outside loops; inside a
  loop the op may update a value the loop carries (`acc *= alpha`), where it would round once per iteration,
  more than the one rounding the tolerance counts, so fp32 operands stay on the SFPU there,
  except where the plan routed the operand through the FPU (plan.Window.broadcast_on_fpu: a value a matmul or
  reduction already reads through the source registers and no loop carries: the online softmax's `s - m`; and,
  with reduced-precision intermediates, a carried value's per-row rescale `acc *= alpha`, whose rounding once a
  trip precision.py counts per trip);
  never for integers held in float32 (int32 tiles and what they are computed from, precision.exact_values: 11
  significant bits would change them above 2^11; a GPU's result is exact), which take the SFPU's exact fp32 ops;
- add/sub/mul of a value in DST and a row vector stored as its broadcast (TTInferLayout's replicated_rows: each
  tile holds the vector in every row; plan.reuses_dest): the FPU with the DST tile as its first operand
  (`*_reuse_dest_tiles`, DEST_TO_SRCA), the result in place: no scratch slot, no SFPU pass over the tile;
- everything else on the SFPU: operands from CBs are unpacked first (copy_tile, or unary_bcast for broadcasts),
  then `*_binary_tile`, `*_unary_tile` with a scalar, or a unary function in place;
- bitwise operators (the op registry's `integer` ops): integer data is held in float tiles, so the SFPU converts
  each operand to Int32 in its DST slot (typecast_tile<Float32, Int32>), computes on the bits and converts the
  result back (typecast_tile<Int32, Float32>); an operand another op still reads is copied to a slot of its own
  first. A 32-bit DST is required (TTApplyTargetDefaults turns it on);
- copy/cast/fill/zero: unpack or fill into the destination slot.
Every call is preceded by its own init: the unpacker, FPU and SFPU keep one configuration each, which the
previous op may have changed.
"""
from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace

import tvm
from tvm import tirx

from ... import ops, registry
from ...ir import seq
from ...registry import Scale

LOWEST = -math.inf
BCAST_KIND = {"col": "cols", "row": "rows", "scalar": "scalar"}


def i32(v) -> tirx.IntImm:
    return tirx.IntImm("int32", int(v))


def float_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


def fp32(value: float) -> float:
    """`value` rounded to float32 (as C++'s constexpr float arithmetic rounds it)."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def bits(value: float) -> tirx.IntImm:
    return tirx.IntImm("uint32", float_bits(value))


@dataclass(frozen=True)
class Src:
    kind: str                 # "dst" | "cb" | "scalar"
    slot: object = None       # DST slot expression
    cb: int | None = None
    index: object = None      # CB tile index expression
    bcast: str | None = None
    value: float | None = None
    fp32: bool = False        # the CB holds fp32 data
    buffer: str | None = None  # the computed buffer a DST slot holds
    fpu: bool = False         # the plan routes this CB operand through the FPU (plan.Window.broadcast_on_fpu)
    row_sum: bool = False     # loaded as the sum of each row of the tile (a deferred running sum, defer_row_sum)
    reuse: bool = False       # a whole tile the FPU may apply to a DST operand in place (replicated_rows, Emitter.src)


_ANALYZER = tvm.sym.Analyzer()


def same_slot(a, b) -> bool:
    """Do two DST slot expressions name the same slot? (they are built along different paths)"""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    diff = _ANALYZER.simplify(tirx.IntImm("int32", a) - b if isinstance(a, int) else a - b)
    return isinstance(diff, tirx.IntImm) and int(diff) == 0


class Strategies:
    def __init__(self, fp32_dest: bool, scaler_cb, approx_exp: bool = False):
        self.fp32_dest = fp32_dest
        self.approx_exp = approx_exp          # exp on the LLK's approximate exp (the target's approx_exp)
        self.scaler_cb = scaler_cb            # callable: the reduce scaler CB index (created on first use)
        self.scratch_used = False             # set when a call loads an operand into the window's scratch slot
        self.fp32_on_fpu = False              # fp32 CB operands may go through the FPU (set per op: outside loops)
        self.exact = False                    # the op computes integers held in float32: never on the FPU (set per op)
        self.exp_unclamped = False            # the approximate exp without its input clamp (set per op: the window
                                              # packs its result with the packer's ReLU, Emitter.unclamped_exps)

    # ---- moving operands into DST ------------------------------------------------------------------------------
    def load(self, src: Src, slot) -> list:
        if src.kind == "dst":
            if same_slot(src.slot, slot):
                return []
            fn = "copy_dest_values_fp32" if self.fp32_dest else "copy_dest_values_bf16"
            return [ops.call("copy_dest_values_init"), ops.call(fn, src.slot, slot)]
        if src.row_sum:
            return self.reduce("sum", slot, replace(src, row_sum=False), 1, lambda kt: src.index, [])
        if src.bcast is not None:
            kind = {"col": "cols", "row": "rows", "scalar": "scalar"}[src.bcast]
            return [ops.call(f"unary_bcast_{kind}_init", src.cb), ops.call(f"unary_bcast_{kind}", src.cb, src.index, slot)]
        return [ops.call("copy_init", src.cb), ops.call("copy_tile", src.cb, src.index, slot)]

    @staticmethod
    def load_face_transposed(src: Src, slot) -> list:
        """DST[slot] = the CB tile with each 16x16 face transposed (column 0 -> row 0 of faces 0 and 2)."""
        return [ops.call("copy_face_transposed_init", src.cb), ops.call("copy_tile", src.cb, src.index, slot)]

    @staticmethod
    def fill(slot, value: float) -> list:
        return [ops.call("fill_tile_init"), ops.call("fill_tile", slot, float(value))]

    # ---- the ops ----------------------------------------------------------------------------------------------------
    def copy(self, dst_slot, src: Src) -> list:
        return self.load(src, dst_slot)

    @staticmethod
    def transpose(dst_slot, src: Src) -> list:
        """DST[dst_slot] = the CB tile transposed (the unpacker swaps its faces and each face's rows and columns)."""
        return [ops.call("transpose_init", src.cb), ops.call("transpose_tile", src.cb, src.index, dst_slot)]

    @staticmethod
    def typecast(fn, slot) -> list:
        return [ops.call(fn.init), ops.call(fn.call, slot)]

    def integer_unary(self, name: str, dst_slot, src: Src) -> list:
        out = self.load(src, dst_slot) + self.typecast(registry.TO_INT32, dst_slot)
        for step in registry.TILE_OPS[name].lowering:
            out += [ops.call(step.init), ops.call(step.call, dst_slot)]
        return out + self.typecast(registry.TO_FP32, dst_slot)

    def integer_binary(self, name: str, dst_slot, a: Src, b: Src, scratch) -> list:
        """a op b on Int32: a into the destination slot, b into the scratch slot (b first: it may be the value the
        destination slot holds), both converted, the op, the result converted back. A scalar is the call's
        parameter, as the integer's two's-complement bits."""
        op = registry.TILE_OPS[name]
        if a.kind == "scalar" or b.kind == "scalar":
            if a.kind == "scalar" and not op.commutative:
                raise ValueError(f"{name}: a constant shifted by tile amounts has no SFPU form")
            tile, value = (a, b.value) if b.kind == "scalar" else (b, a.value)
            param = tirx.IntImm("uint32", int(value) & 0xFFFFFFFF)
            fn = op.with_scalar
            return self.load(tile, dst_slot) + self.typecast(registry.TO_INT32, dst_slot) + \
                [ops.call(fn.init), ops.call(fn.call, dst_slot, param)] + self.typecast(registry.TO_FP32, dst_slot)
        self.scratch_used = True
        out = self.load(b, scratch) + self.load(a, dst_slot)
        for slot in (dst_slot, scratch):
            out += self.typecast(registry.TO_INT32, slot)
        return out + [ops.call(op.sfpu.init), ops.call(op.sfpu.call, dst_slot, scratch, dst_slot)] + \
            self.typecast(registry.TO_FP32, dst_slot)

    def unary(self, name: str, dst_slot, src: Src, scale: float = 1.0) -> list:
        """The operand into the destination slot, then the op registry's SFPU steps on it in place. `scale`: a
        constant the operand is multiplied by first (folded into the approximate exp's init; a multiply otherwise)."""
        if registry.TILE_OPS[name].integer:
            return self.integer_unary(name, dst_slot, src)
        out = self.load(src, dst_slot)
        steps = registry.TILE_OPS[name].lowering
        factor = self.approx_exp_factor(name, scale)
        if factor is not None:
            unclamped = "_unclamped" if self.exp_unclamped else ""
            return out + [ops.call(f"exp_approx{unclamped}_tile_init", bits(factor)),
                          ops.call(f"exp_approx{unclamped}_tile", dst_slot)]
        if scale != 1.0:
            fn, init = registry.TILE_OPS["mul"].scalar_call()
            out += [ops.call(init), ops.call(fn, dst_slot, bits(scale))]
        for step in steps:
            if isinstance(step, Scale):
                fn, init = registry.TILE_OPS["mul"].scalar_call()
                out += [ops.call(init), ops.call(fn, dst_slot, bits(step.factor))]
            else:
                out += [ops.call(step.init), ops.call(step.call, dst_slot)]
        return out

    def approx_exp_factor(self, name: str, scale: float = 1.0) -> float | None:
        """The input scale unary op `name` runs as the LLK's approximate exp with (exp_tile_init<true, scale>), or
        None when it does not run so. The approximate exp bakes its input scale into its constants (A * scale,
        -88.5 / scale, each one fp32 rounding, as exp_init<true, scale> computes them): the op's Scale steps and
        `scale` cost nothing. Its clamp raises x to -88.5 / scale, so only a positive scale folds."""
        steps = registry.TILE_OPS[name].lowering if name in registry.UNARY else ()
        if not self.approx_exp or not steps or getattr(steps[-1], "call", None) != "exp_tile":
            return None
        factor = fp32(scale)
        for step in steps[:-1]:
            factor = fp32(factor * fp32(step.factor))
        return factor if factor > 0 else None

    def binary(self, name: str, dst_slot, a: Src, b: Src, scratch) -> list:
        if registry.TILE_OPS[name].integer:
            return self.integer_binary(name, dst_slot, a, b, scratch)
        if a.kind == "scalar" or b.kind == "scalar":
            tile, scalar, scalar_first = (a, b.value, False) if b.kind == "scalar" else (b, a.value, True)
            op = registry.TILE_OPS[name]
            fn, init = op.scalar_call()
            if scalar_first and op.scalar_first:
                fn = op.scalar_first
            return self.load(tile, dst_slot) + [ops.call(init), ops.call(fn, dst_slot, bits(scalar))]
        op = registry.TILE_OPS[name]
        if a.reuse and b.kind == "dst" and op.fpu and op.scalar_first is None:
            a, b = b, a                     # commutative: the DST operand goes first
        if b.reuse and a.kind == "dst" and same_slot(a.slot, dst_slot) and op.fpu and not self.exact:
            # DST[slot] op tile on the FPU, the DST tile through srcA (TF32 for fp32 data, as any FPU operand)
            return [ops.call(f"{op.fpu}_reuse_dest_init", b.cb), ops.call(f"{op.fpu}_reuse_dest_tiles", b.cb, b.index,
                                                                          dst_slot)]
        if a.bcast is not None and b.bcast is None and op.fpu and op.scalar_first is None:
            a, b = b, a                     # commutative: the broadcast operand goes second
        if a.kind == "cb" and b.kind == "cb" and op.fpu and a.bcast is None and not self.exact and \
                (self.fp32_on_fpu or a.fpu or not (a.fp32 or b.fp32)):
            fpu = op.fpu
            if b.bcast is None:
                return [ops.call(f"{fpu}_init", a.cb, b.cb), ops.call(f"{fpu}_tiles", a.cb, b.cb, a.index, b.index,
                                                                       dst_slot)]
            kind = BCAST_KIND[b.bcast]
            return [ops.call(f"{fpu}_bcast_{kind}_init", a.cb, b.cb),
                    ops.call(f"{fpu}_tiles_bcast_{kind}", a.cb, b.cb, a.index, b.index, dst_slot)]
        if not op.sfpu.standard_call:
            return self.next_slot_operand(op.sfpu, dst_slot, a, b, scratch)
        # SFPU: both operands in DST slots; a CB operand goes to the destination slot unless the destination is
        # the other operand, then to the scratch slot
        out, slots = [], []
        dst_is_operand = any(s.kind == "dst" and same_slot(s.slot, dst_slot) for s in (a, b))
        free = [] if dst_is_operand else [dst_slot]
        for s in (a, b):
            if s.kind == "dst":
                slots.append(s.slot)
                continue
            target = free.pop() if free else scratch
            self.scratch_used |= target is scratch
            out += self.load(s, target)
            slots.append(target)
        return out + [ops.call(op.sfpu.init), ops.call(op.sfpu.call, slots[0], slots[1], dst_slot)]

    def next_slot_operand(self, fn, dst_slot, a: Src, b: Src, scratch) -> list:
        """An SFPU function whose second operand is the DST tile after its first, which it overwrites (mask_tile:
        the LLK reads the mask at dst_reg[32], whatever index it is given): the operands go to the window's two
        scratch slots, the result to the destination."""
        self.scratch_used = True
        after = scratch + 1
        return self.load(a, scratch) + self.load(b, after) + [ops.call(fn.init), ops.call(fn.call, scratch, after)] \
            + self.load(Src("dst", slot=scratch), dst_slot)

    def gemm(self, dst_slot, a: Src, b: Src, transpose_b: bool, k_tiles: int, a_index, b_index) -> list:
        """dst += A @ B over k_tiles; a_index(kk) / b_index(kk) give the operand tiles."""
        kk = tirx.Var("kk", "int32") if k_tiles > 1 else i32(0)
        step = ops.call("matmul_tiles", a.cb, b.cb, a_index(kk), b_index(kk), dst_slot)
        loop = tirx.For(kk, 0, k_tiles, tirx.ForKind.SERIAL, step) if k_tiles > 1 else step
        return [ops.call("matmul_init", a.cb, b.cb, int(transpose_b)), loop]

    @staticmethod
    def gemm_block(dst_slot, a: Src, b: Src, k_tiles: int, a_index, b_index, rt: int, ct: int, a_stride: int,
                   transpose_b: bool = False) -> list:
        """DST[dst_slot + r*ct + c] += sum over kk of A[a_index(kk) + r*a_stride] @ B[b_index(kk) + c] (each B tile
        transposed with `transpose_b`)."""
        kk = tirx.Var("kk", "int32") if k_tiles > 1 else i32(0)
        t = i32(int(transpose_b))
        step = ops.call("matmul_block", a.cb, b.cb, a_index(kk), b_index(kk), dst_slot, t, i32(ct), i32(rt),
                        i32(a_stride))
        loop = tirx.For(kk, 0, k_tiles, tirx.ForKind.SERIAL, step) if k_tiles > 1 else step
        return [ops.call("matmul_block_init", a.cb, b.cb, t, i32(ct), i32(rt), i32(a_stride)), loop]

    def sfpu_reduce(self, name: str, dst_slot, src: Src, k_tiles: int, index, accumulates: bool, scratch) -> list:
        """dst = the row max / min of the source row's k_tiles tiles (index(kt)), in column 0, on the SFPU: each tile
        copied into DST and reduced in place by sfpu_reduce; the first straight into the destination slot (unless the
        reduction accumulates into its old value), the others in the scratch slot, merged with binary_max/min_tile
        (every column: only column 0 is the result)."""
        op = registry.TILE_OPS[name]
        fmt = "fp32" if self.fp32_dest else "bf16"
        pool = op.sfpu_pool.lower()
        merge = registry.TILE_OPS["maximum" if pool == "max" else "minimum"].sfpu

        def reduced(kt, slot) -> list:
            return [ops.call("copy_init", src.cb), ops.call("copy_tile", src.cb, index(kt), slot),
                    ops.call(f"sfpu_reduce_init_{pool}_{fmt}"), ops.call(f"sfpu_reduce_row_{pool}_{fmt}", slot)]
        first = 0 if accumulates else 1
        out = [] if accumulates else reduced(i32(0), dst_slot)
        if k_tiles > first:
            self.scratch_used = True
            kt = tirx.Var("kt", "int32") if k_tiles - first > 1 else i32(first)
            step = seq(reduced(kt, scratch) + [ops.call(merge.init),
                                                        ops.call(merge.call, dst_slot, scratch, dst_slot)])
            out.append(tirx.For(kt, first, k_tiles - first, tirx.ForKind.SERIAL, step) if k_tiles - first > 1 else step)
        return out

    def reduce(self, pool: str, dst_slot, src: Src, k_tiles: int, index, start: list, block: bool = False) -> list:
        """dst = start (fill/load) then reduce_tile over the source row's k_tiles tiles (index(kt)); `block`: a max
        over a row of consecutive bfloat16 tiles in one reduce_block_max_row call (its running maxima in row 0 of
        faces 0 and 2 of the slot: -inf from a fill, or a face-transposed load, load_face_transposed)."""
        scaler = self.scaler_cb()
        order = (scaler, src.cb) if pool == "sum" else (src.cb, scaler)   # SUM feeds the scaler to SrcA, MAX data
        if block:
            return start + [ops.call("reconfig_data_format", *order),
                            ops.call("reduce_block_max_row_init", src.cb, i32(k_tiles)),
                            ops.call("reduce_block_max_row", src.cb, scaler, index(i32(0)), dst_slot, i32(k_tiles)),
                            ops.call("reduce_block_max_row_uninit", src.cb)]
        kt = tirx.Var("kt", "int32") if k_tiles > 1 else i32(0)
        step = ops.call(f"reduce_tile_{pool}", src.cb, scaler, index(kt), i32(0), dst_slot)
        return start + [ops.call("reconfig_data_format", *order), ops.call(f"reduce_init_{pool}", src.cb, scaler, scaler),
                        tirx.For(kt, 0, k_tiles, tirx.ForKind.SERIAL, step) if k_tiles > 1 else step,
                        ops.call("reduce_uninit")]

