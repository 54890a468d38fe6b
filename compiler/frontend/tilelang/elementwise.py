"""`T.Parallel` bodies -> whole-tile operations.

    for i, j in T.Parallel(bm, bn):
        C_l[i, j] = T.max(C_l[i, j] + b_s[i, j], 0)     ->  T.tile.add(C_l, C_l, b_s)
                                                            T.tile.maximum(C_l, C_l, T.float32(0.0))

A body is accepted when every store and load addresses `buf[start0 + i, start1 + j]` with the parallel
variables in the same order (no broadcasts, transposes or data-dependent indexing) and the expression is built
from + - * /, T.max/min, T.exp/exp2/sqrt/rsqrt, casts and constants. The expression is evaluated into the
destination tile left to right, one tile op per node, with a temporary tile where an operand would be clobbered.
Global operands are staged through a shared tile; a store to a global buffer is computed in a local tile and
copied out.
"""
from __future__ import annotations

import math

from .diagnostics import fail
from .expr import Bin, Call, Cast, Const, Load, Var, affine, describe, render_index
from .recorder import Buffer, Recorder, Region

BINARY = {"+": "add", "-": "sub", "*": "mul", "max": "maximum", "min": "minimum"}
UNARY = {"exp": "exp", "sqrt": "sqrt"}


def _region_of(load: Load, variables: tuple, location) -> Region:
    """`buf[s0 + i, s1 + j]` -> the region buf[s0:s0+bm, s1:s1+bn]; anything else is rejected."""
    buf: Buffer = load.buffer
    if buf.column:  # m[i] of a 1-D (block_M,) fragment: its (M, 1) column, broadcast along j
        form = affine(load.indices[0])
        if form is None or {v: c for v, c in form[0].items() if v.kind == "parallel"} != {variables[0]: 1}:
            fail(f"`{describe(load)}`: a 1-D fragment must be indexed by the first T.Parallel variable "
                 f"(`start + {variables[0].name}`)", location=location)
        rest = Const(0)
        for v, c in form[0].items():
            if v.kind != "parallel":
                rest = rest + (v * c if c != 1 else v)
        return Region(buf, (rest + form[1], 0), (variables[0].extent, 1))
    if len(load.indices) != len(variables):
        fail(f"`{describe(load)}` is indexed with {len(load.indices)} indices inside a {len(variables)}-D T.Parallel; "
             "broadcasting a row/column is outside tilefarm's TileLang subset", location=location)
    starts = []
    for axis, (index, var) in enumerate(zip(load.indices, variables)):
        form = affine(index)
        if form is None:
            fail(f"`{describe(load)}`: index `{describe(index)}` is not affine (data-dependent or non-linear "
                 "indexing is outside tilefarm's TileLang subset)", location=location)
        coefs, const = form
        parallel = {v: c for v, c in coefs.items() if v.kind == "parallel"}
        if parallel != {var: 1}:
            fail(f"`{describe(load)}`: axis {axis} must be indexed by `start + {'ij'[axis] if axis < 2 else var.name}` "
                 "(same loop variable order as the store, unit stride)", location=location)
        rest = Const(0)
        for v, c in coefs.items():
            if v.kind != "parallel":
                rest = rest + (v * c if c != 1 else v)
        starts.append(rest + const)
    return Region(buf, tuple(starts), tuple(v.extent for v in variables))


def lower_parallel(rec: Recorder, scope) -> None:
    for buffer, indices, value, location in scope.stores:
        Lowering(rec, scope.variables, location).store(Load(buffer, indices), value)


class Lowering:
    def __init__(self, rec: Recorder, variables: tuple, location):
        self.rec, self.variables, self.location = rec, variables, location

    def emit(self, text):
        self.rec.emit(text, self.location)

    def region(self, load: Load) -> Region:
        return _region_of(load, self.variables, self.location)

    # ---- operands -----------------------------------------------------------------------------------------
    @staticmethod
    def is_scalar(e) -> bool:
        return isinstance(e, Const) or (isinstance(e, Cast) and isinstance(e.x, Const))

    @staticmethod
    def scalar(e) -> float:
        return float(e.value if isinstance(e, Const) else e.x.value)

    def is_leaf(self, e) -> bool:
        return isinstance(e, Load) or self.is_scalar(e)

    def operand(self, e) -> str:
        if self.is_scalar(e):
            return f"T.float32({self.scalar(e)!r})"
        return self.stage(self.region(e)).text()

    def stage(self, r: Region) -> Region:
        """Global operands are read into a shared tile first (the reader's job on the device)."""
        if r.buffer.scope != "global":
            return r
        tile = self.rec.temp(r.extents, r.buffer.dtype, "shared", self.location)
        tile.filled_from_dram = True
        self.emit(f"T.tile.copy({tile.name}, {r.text()})")
        return Region(tile, (0, 0), tile.shape)

    # ---- statements --------------------------------------------------------------------------------------------
    def store(self, target: Load, value) -> None:
        dst = self.region(target)
        value = self.hoist_columns(self.normalize(value), dst)
        if dst.buffer.scope == "global":
            if isinstance(value, Load) and value.buffer.scope != "global" and not value.buffer.filled_from_dram:
                self.emit(f"T.tile.copy({dst.text()}, {self.region(value).text()})")
                return
            tmp = self.rec.temp(dst.extents, dst.buffer.dtype, "local", self.location)
            whole = Region(tmp, (0, 0), tmp.shape)
            self.compute(value, whole)
            self.emit(f"T.tile.copy({dst.text()}, {tmp.name})")
            return
        if self.clobbers(value, dst):
            tmp = self.rec.temp(dst.extents, dst.buffer.dtype, "local", self.location)
            whole = Region(tmp, (0, 0), tmp.shape)
            self.compute(value, whole)
            self.emit(f"T.tile.copy({dst.text()}, {tmp.name})")
            return
        self.compute(value, dst)

    def loads(self, e) -> list:
        return [e] if isinstance(e, Load) else [x for a in self.args_of(e) for x in self.loads(a)]

    def hoist_columns(self, e, dst: Region):
        """Subexpressions over per-row values only (`1 / s[i]`, `m_old[i] - m[i]`) are computed once into an
        (M, 1) column tile, which the wide op then broadcasts along the row."""
        if dst.extents[1] == 1 or self.is_leaf(e):
            return e
        loads = self.loads(e)
        if loads and all(x.buffer.column for x in loads):
            tmp = self.rec.temp((dst.extents[0], 1), "float32", "local", self.location)
            tmp.column = True
            self.compute(e, Region(tmp, (0, 0), tmp.shape))
            return Load(tmp, (self.variables[0], Const(0)))
        if isinstance(e, Bin):
            return Bin(e.op, self.hoist_columns(e.a, dst), self.hoist_columns(e.b, dst))
        if isinstance(e, Call):
            return Call(e.fn, tuple(self.hoist_columns(a, dst) for a in e.args))
        if isinstance(e, Cast):
            return Cast(e.dtype, self.hoist_columns(e.x, dst))
        return e

    def normalize(self, e):
        """Rewrite forms the tile ops do not have: exp2, rsqrt, division, negation of constants."""
        if isinstance(e, Bin):
            a, b = self.normalize(e.a), self.normalize(e.b)
            if self.is_scalar(a) and self.is_scalar(b):
                return Const(_fold(e.op, self.scalar(a), self.scalar(b)))
            if e.op == "/":
                if self.is_scalar(b):
                    return Bin("*", a, Const(1.0 / self.scalar(b)))
                recip = Call("reciprocal", (b,))
                return recip if self.is_scalar(a) and self.scalar(a) == 1.0 else Bin("*", a, recip)
            if e.op not in BINARY:
                fail(f"`{e.op}` in a T.Parallel body is outside tilefarm's TileLang subset", location=self.location)
            return Bin(e.op, a, b)
        if isinstance(e, Call):
            args = tuple(self.normalize(a) for a in e.args)
            if e.fn in ("max", "min"):
                return Bin(e.fn, *args)
            if e.fn == "exp2":
                return Call("exp", (Bin("*", args[0], Const(math.log(2.0))),))
            if e.fn == "rsqrt":
                return Call("reciprocal", (Call("sqrt", args),))
            if e.fn not in ("exp", "sqrt", "reciprocal"):
                fail(f"T.{e.fn} in a T.Parallel body is outside tilefarm's TileLang subset",
                     hint="element functions: T.exp, T.exp2, T.sqrt, T.rsqrt, T.max, T.min, T.cast",
                     location=self.location)
            return Call(e.fn, args)
        if isinstance(e, Cast):
            return Cast(e.dtype, self.normalize(e.x))
        if isinstance(e, (Load, Const)):
            return e
        if isinstance(e, Var):
            fail(f"the index `{e.name}` used as a value in a T.Parallel body (data-dependent values are outside "
                 "tilefarm's TileLang subset)", location=self.location)
        fail(f"`{describe(e)}` in a T.Parallel body is outside tilefarm's TileLang subset", location=self.location)

    def clobbers(self, e, dst: Region) -> bool:
        """Would evaluating `e` into dst (in compute()'s order) overwrite dst before a later op reads it?"""
        self.loads_of(e, dst)
        state = {"written": False, "bad": False}
        self.simulate(e, dst, True, state)
        return state["bad"]

    def simulate(self, e, dst: Region, into_dst: bool, st: dict) -> None:
        def read(x):
            if isinstance(x, Load) and self.same(x, dst) and st["written"]:
                st["bad"] = True

        def write():
            st["written"] = st["written"] or into_dst

        if isinstance(e, Load) or self.is_scalar(e):
            read(e)
            write()
        elif isinstance(e, (Cast, Call)):
            x = self.args_of(e)[0]
            if isinstance(x, Load):
                read(x)
                write()
            else:
                self.simulate(x, dst, into_dst, st)
        else:
            a, b = e.a, e.b
            if self.is_leaf(a) and self.is_leaf(b):
                read(a), read(b)
            elif self.is_leaf(b):
                self.simulate(a, dst, into_dst, st)
                read(b)
            elif self.is_leaf(a):
                self.simulate(b, dst, into_dst, st)
                read(a)
            else:
                self.simulate(b, dst, False, st)
                self.simulate(a, dst, into_dst, st)
            write()

    @staticmethod
    def args_of(e) -> tuple:
        if isinstance(e, Bin):
            return (e.a, e.b)
        if isinstance(e, Call):
            return e.args
        if isinstance(e, Cast):
            return (e.x,)
        return ()

    def same(self, load: Load, r: Region) -> bool:
        return load.buffer is r.buffer and self.region(load).key() == r.key()

    def loads_of(self, e, r: Region) -> int:
        if isinstance(e, Load):
            if e.buffer is r.buffer and not self.same(e, r):
                fail(f"`{describe(e)}` reads another part of the tile being written; write to a separate tile",
                     location=self.location)
            return int(e.buffer is r.buffer)
        return sum(self.loads_of(a, r) for a in self.args_of(e))

    # ---- evaluation into a tile ---------------------------------------------------------------------------
    def compute(self, e, dst: Region) -> None:
        d = dst.text()
        if isinstance(e, Load):
            if not self.same(e, dst):
                self.emit(f"T.tile.copy({d}, {self.operand(e)})")
            return
        if self.is_scalar(e):
            value = self.scalar(e)
            self.emit(f"T.tile.zero({d})" if value == 0 else f"T.tile.fill({d}, T.float32({value!r}))")
            return
        if isinstance(e, Cast):
            if isinstance(e.x, Load):
                self.emit(f"T.tile.cast({d}, {self.operand(e.x)})")
            else:  # the cast happens where the value is stored into dst (rounded to its dtype)
                self.compute(e.x, dst)
            return
        if isinstance(e, Call):
            fn = {"exp": "exp", "sqrt": "sqrt", "reciprocal": "reciprocal"}[e.fn]
            (x,) = e.args
            if isinstance(x, Load):
                self.emit(f"T.tile.{fn}({d}, {self.operand(x)})")
            else:
                self.compute(x, dst)
                self.emit(f"T.tile.{fn}({d}, {d})")
            return
        op = BINARY[e.op]
        a, b = e.a, e.b
        if self.is_leaf(a) and self.is_leaf(b):
            self.emit(f"T.tile.{op}({d}, {self.operand(a)}, {self.operand(b)})")
        elif self.is_leaf(b):
            self.compute(a, dst)
            self.emit(f"T.tile.{op}({d}, {d}, {self.operand(b)})")
        elif self.is_leaf(a):
            self.compute(b, dst)
            self.emit(f"T.tile.{op}({d}, {self.operand(a)}, {d})")
        else:
            tmp = self.rec.temp(dst.extents, dst.buffer.dtype, "local", self.location)
            self.compute(b, Region(tmp, (0, 0), tmp.shape))
            self.compute(a, dst)
            self.emit(f"T.tile.{op}({d}, {d}, {tmp.name})")


def _fold(op: str, a: float, b: float) -> float:
    return {"+": a + b, "-": a - b, "*": a * b, "/": a / b if b else math.inf,
            "max": max(a, b), "min": min(a, b)}.get(op, math.nan)


__all__ = ["lower_parallel", "render_index"]
