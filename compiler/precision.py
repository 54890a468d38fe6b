"""Each output's tolerance from the operations on its own path (what `verify` holds a device run to).

The input kernel's tile ops are walked in program order, and every buffer gets a Path: what has happened to its
values since they left the kernel's inputs.

- exact:       only copies, conversions, fills of given values so far. The device moves the same bits and rounds
               a conversion as the reference does: such an output must be bit-exact (a copy one ulp off fails).
- operations:  element-wise ops on the way, each one rounding in the compute format: fp32 DST takes FPU operands
               through its TF32 source registers (2^-11), a 16-bit DST rounds each result to bfloat16 (2^-8).
- depth, mid:  the deepest reduction or matmul on the way (K, times the iterations of the loops that accumulate
               it, a symbolic trip count by its bound) and the format its terms are rounded to: 2 * sqrt(K) * u
               (verify.py's model).
- a narrowing store of an inexact value may round to the other side: one ulp of the stored dtype.
- a value a loop carries and rounds every trip (a per-row rescale through the FPU, carried_scale_on_fpu) counts
  that rounding once per trip: the trip counts of the loops around it, a symbolic one (causal attention's
  `kb < bq + 1`) by its bound over the grid (T.cta_id's extents) and the loops outside it.
- the approximate exp (the target's approx_exp: the LLK's Schraudolph exp) is an op whose unit is its own error,
  not a rounding: each result within EXP_APPROX_ERROR of exp (the algorithm's bound, measured over its whole
  domain by tests/emulator/test_tile_math.py's model), counted twice because a softmax divides the exps by their
  own sum, whose error need not cancel theirs.

An output's tolerance is built from its own path only: a softmax elsewhere in the kernel no longer loosens an
exact residual add beside it. `Path.explain()` says how the tolerance was derived (shown in the report).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

import tvm
import tvm_ffi
from tvm import tirx

from . import attrs
from .registry import BINARY, FPU_BINARY, REDUCE, TILE_OPS, UNARY, reduces_on_sfpu
from .verify import UNIT_ROUNDOFF

_WIDTH = {"float32": 32, "tf32": 19, "float16": 16, "bfloat16": 16}
# |exp_approx(x) / exp(x) - 1| over x * scale in [-87, 0.72]: the linear interpolation of 2^f between powers of two
# (+6.15% at most), scaled down by 2^(-11.18/256) to split it (-2.98%..+3.0%), the integer rounding of 256 log2
# (+-0.14%): 3.113-3.122% measured over 2M points per scale
EXP_APPROX_ERROR = 0.0313
OP_UNITS = {**UNIT_ROUNDOFF, "exp_approx": 2 * EXP_APPROX_ERROR}


@dataclass(frozen=True)
class Path:
    exact: bool = True
    ops: tuple[str, ...] = ()        # the rounding format of each element-wise op on the way
    depth: int = 0                   # K of the deepest reduction / matmul
    mid: str | None = None           # the format its terms are rounded to
    stores: tuple[str, ...] = ()     # narrowing stores of inexact values
    # roundings of a carried value, one a trip (rounds_every_trip): added to what flows into it, not the worse of
    # the two (the value carries every earlier trip's error and takes a new rounding on top)
    per_trip: tuple[str, ...] = ()

    def merge(self, *others: "Path") -> "Path":
        paths = (self, *others)
        deepest = max(paths, key=lambda p: (p.depth, UNIT_ROUNDOFF.get(p.mid or "float32", 0)))
        ops = max((p.ops for p in paths), key=lambda o: sum(OP_UNITS[u] for u in o))
        stores = max((p.stores for p in paths), key=lambda s: sum(UNIT_ROUNDOFF[u] for u in s))
        per_trip = max((p.per_trip for p in paths), key=lambda r: sum(UNIT_ROUNDOFF[u] for u in r))
        return Path(all(p.exact for p in paths), ops, deepest.depth, deepest.mid, stores, per_trip)

    def op(self, unit: str) -> "Path":
        return replace(self, exact=False, ops=self.ops + (unit,))

    def terms(self) -> float:
        """The relative error carried in, before the final store."""
        accumulation = 2.0 * math.sqrt(self.depth) * UNIT_ROUNDOFF[self.mid] if self.depth and self.mid else 0.0
        return sum(OP_UNITS[u] for u in self.ops) + sum(2 * UNIT_ROUNDOFF[u] for u in self.stores) + accumulation \
            + sum(OP_UNITS[u] for u in self.per_trip)

    def explain(self, out_dtype: str) -> str:
        if self.exact:
            return "copies and conversions only: bit-exact"
        parts = []
        if self.ops:
            counted = {u: self.ops.count(u) for u in dict.fromkeys(self.ops)}
            parts.append(" + ".join(
                f"{n} approximate exp{'s' if n > 1 else ''} ({n}x2x{EXP_APPROX_ERROR:.2%}: the LLK's Schraudolph exp, "
                f"normalized by its own sums)" if u == "exp_approx" else
                f"{n} op{'s' if n > 1 else ''} rounding to {u} ({n}x2^-{-int(math.log2(UNIT_ROUNDOFF[u]))})"
                for u, n in counted.items()))
        if self.depth and self.mid:
            parts.append(f"sums of {self.depth} terms in {self.mid} (2*sqrt({self.depth})*2^-"
                         f"{-int(math.log2(UNIT_ROUNDOFF[self.mid]))})")
        if self.stores:
            parts.append(f"{len(self.stores)} intermediate store(s) to {'/'.join(dict.fromkeys(self.stores))}")
        for u in dict.fromkeys(self.per_trip):
            n = self.per_trip.count(u)
            parts.append(f"a carried value rounded to {u} once a trip, {n} trips ({n}x2^-"
                         f"{-int(math.log2(UNIT_ROUNDOFF[u]))})")
        parts.append(f"the store to {out_dtype} (one ulp)")
        return "; ".join(parts) + "; atol the same relative to the output's largest value"


def _narrower(dst: str, src: str) -> bool:
    return _WIDTH.get(dst, 32) < _WIDTH.get(src, 32)


class PathWalk:
    def __init__(self, func, fp32_dest: bool, fpu_rounds: bool = True, approx_exp: bool = False,
                 held_bf16: frozenset = frozenset(), bf16_partials: dict | None = None,
                 carried_scale: bool = False, deferred_sums: frozenset = frozenset()):
        self.fp32_dest = fp32_dest
        # running row sums the program keeps as their row partials (tensorize defer_row_sum): the loop depth of
        # their update, once seen; read after that loop through one row reduction
        self.deferred_sums = deferred_sums
        self.deferred_depth: dict[str, int] = {}
        self.carried_scale = carried_scale   # carried per-row rescales round every trip (carried_scale_on_fpu)
        self.bounds = tvm.sym.Analyzer()     # the grid's and the loops' variables, for a symbolic trip count's bound
        self.trip_bounds: list[int] = []     # the enclosing loops' trip counts (a symbolic one by its bound)
        self.body_writes: list[set] = []     # per enclosing loop: buffers its body has written whole so far
        self.held_bf16 = held_bf16           # float32 values the program holds in bfloat16 tiles (intermediate_dtype)
        # value -> tiles per row of its row sums' bfloat16 partial (packer L1 accumulation into a bfloat16 tile:
        # each accumulated tile rounds the partial once)
        self.bf16_partials = bf16_partials or {}
        self.approx_exp = approx_exp         # exp / exp2 on the LLK's approximate exp
        self.fpu_rounds = fpu_rounds         # fp32 data may go through the FPU's TF32 registers (fp32_on_fpu)
        self.paths: dict[str, Path] = {}
        self.globals = {str(p.name) for p in func.params}
        self.dtypes: dict[str, str] = {}
        self.fpu_read: set[str] = set()
        # tile ops inside a loop (their fp32 operands stay off the FPU): the nodes themselves, which hash and compare by
        # identity; a walk hands each callback a new Python wrapper, so id() of one names nothing once it is freed
        self.in_loops: set = set()
        self.exact = frozenset(attrs.EXACT_VALUES.get(func, []) or [])    # values computed exactly (exact_values)
        tvm_ffi.structural_walk(func.body, [(tirx.For, self.note_loop)], order="pre")
        tvm_ffi.structural_walk(func.body, [(tirx.TilePrimitiveCall, self.note_fpu)], order="pre")
        self.walk(func.body)

    @staticmethod
    def region(arg):
        return arg.source if isinstance(arg, tvm.ir.TensorRegion) else None

    def on_sfpu(self, name: str, call) -> bool:
        """The reduction `call` runs on the SFPU (tensorize's plan.on_sfpu: the same rule on the same names)."""
        names = {str(self.region(a).name) for a in call.args[:2] if self.region(a) is not None}
        return reduces_on_sfpu(name, str(self.region(call.args[1]).dtype), bool(names & self.exact))

    def note_loop(self, loop) -> None:
        tvm_ffi.structural_walk(loop.body, [(tirx.TilePrimitiveCall, self.in_loops.add)],
                                order="pre")

    def note_fpu(self, call) -> None:
        name = str(call.op.name).removeprefix("tirx.tile.")
        if name == "gemm":
            self.fpu_read.update(str(self.region(a).name) for a in call.args[1:3] if self.region(a) is not None)
        elif name in REDUCE and self.region(call.args[1]) is not None and \
                not self.on_sfpu(name, call):
            self.fpu_read.add(str(self.region(call.args[1]).name))
        elif name in FPU_BINARY and self.fpu_rounds and call not in self.in_loops:
            # outside loops an add/sub/mul of fp32 CB tiles may run on the FPU (tensorize/strategies.py): its CBs
            # then go through the source registers for every reader, copies too
            self.fpu_read.update(str(r.name) for r in map(self.region, call.args[1:3])
                                 if r is not None and str(r.dtype) == "float32")

    def path(self, buf) -> Path:
        name = str(buf.name)
        self.dtypes[name] = str(buf.dtype)
        return self.paths.get(name, Path())

    def element_unit(self, operands) -> str:
        """What one element-wise op rounds to: the FPU's TF32 operands for fp32 data in an fp32 DST, else the
        16-bit DST's bfloat16 (float16 data in a float16 DST)."""
        if self.fp32_dest:
            return "tf32"
        return "float16" if operands and all(str(b.dtype) == "float16" for b in operands) else "bfloat16"

    def walk(self, stmt) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmt.seq:
                self.walk(s)
        elif isinstance(stmt, tirx.For):
            extent = stmt.extent
            self.trip_bounds.append(self.trip_bound(extent))
            self.bounds.bind(stmt.loop_var, tvm.ir.Range.from_min_extent(stmt.min, extent))
            self.body_writes.append(set())
            self.walk(stmt.body)
            self.body_writes.pop()
            self.trip_bounds.pop()
        elif type(stmt).__name__ == "ScopeIdDefStmt":      # T.cta_id: the grid's indices and their extents
            scope = getattr(stmt, "def")
            for var, n in zip(scope.def_ids, scope.extents):
                self.bounds.bind(var, tvm.ir.Range(0, n))
        elif isinstance(stmt, tirx.TilePrimitiveCall):
            self.call(stmt)
        elif isinstance(stmt, tirx.IfThenElse):
            self.walk(stmt.then_case)
            if stmt.else_case is not None:
                self.walk(stmt.else_case)
        elif isinstance(stmt, tirx.BufferStore):      # an element store: an op on whatever it loads
            loads = []
            tvm_ffi.structural_walk(stmt.value, [(tvm.ir.expr.TensorLoad, lambda e: loads.append(e.source))],
                                    order="pre")
            old = self.path(stmt.buffer)
            new = Path().merge(*(self.path(b) for b in loads)) if loads else Path()
            self.paths[str(stmt.buffer.name)] = old.merge(new.op(self.element_unit(loads)) if loads else new)
        else:
            for name in ("body", "then_case", "else_case", "seq"):
                sub = getattr(stmt, name, None)
                if isinstance(sub, tirx.Stmt):
                    self.walk(sub)

    def call(self, call) -> None:
        name = str(call.op.name).removeprefix("tirx.tile.")
        dst = self.region(call.args[0])
        if dst is None:
            return
        sources = [self.region(a) for a in call.args[1:] if self.region(a) is not None]
        for src in sources:
            self.reduce_deferred(str(src.name))
        before = self.path(dst)
        dst_dtype = str(dst.dtype)
        if name in ("copy", "cast"):
            src = sources[0]
            p = self.path(src)
            if str(src.dtype) == "float32" and str(src.name) in self.fpu_read and str(src.name) not in self.globals:
                p = p.op("tf32")      # a CB the FPU reads is unpacked through the TF32 source registers
            if _narrower(dst_dtype, str(src.dtype)) and not p.exact and str(dst.name) not in self.globals:
                p = replace(p, stores=p.stores + (dst_dtype,))
            new = p
        elif name in ("fill", "zero"):
            new = Path()
        elif name == "gemm":
            a, b = sources[0], sources[1]
            k = int(call.args[1].region[1].extent) if not _flag(call, 4) else int(call.args[1].region[0].extent)
            loops = self.trips_around(call)
            operand = "tf32" if "float32" in (str(a.dtype), str(b.dtype)) else None
            mid = operand or ("float32" if self.fp32_dest else "bfloat16")
            p = self.path(a).merge(self.path(b))
            new = replace(p, exact=False, depth=max(p.depth, k * loops), mid=_wider_unit(p.mid, mid))
            if _flag(call, 7) == 1.0:
                new = new.merge(before)
        elif name in REDUCE:
            src = sources[0]
            axes = [int(getattr(x, "value", x)) for x in call.args[2]] if len(call.args) > 2 else [-1]
            k = math.prod(int(call.args[1].region[ax % len(call.args[1].region)].extent) for ax in axes)
            accumulates = bool(_flag(call, 3))
            loops = self.trips_around(call) if accumulates else 1
            mid = "tf32" if str(src.dtype) == "float32" else ("float32" if self.fp32_dest else "bfloat16")
            p = self.path(src)
            if self.on_sfpu(name, call):
                # the SFPU's max / min (sfpu_reduce) is one of the values copied into DST, as they are there: a
                # copy's rounding only (TF32 when the FPU reads the same CB, a 16-bit DST's)
                if str(src.name) in self.fpu_read and str(src.name) not in self.globals:
                    p = p.op("tf32")
                new = p if self.fp32_dest else p.op("bfloat16")
            elif TILE_OPS[name].combine in (np.maximum, np.minimum):
                # a maximum / minimum is one of its terms, rounded once on the way (no sum of K roundings)
                new = p.op(mid)
            else:
                new = replace(p, exact=False, depth=max(p.depth, k * loops), mid=_wider_unit(p.mid, mid))
                if str(src.name) in self.bf16_partials:   # summed through a bfloat16 partial: a rounding per tile
                    new = replace(new, stores=new.stores + ("bfloat16",) * self.bf16_partials[str(src.name)])
            if accumulates:
                new = new.merge(before)
        elif name in UNARY or name in BINARY:
            p = Path().merge(*(self.path(s) for s in sources)) if sources else before
            new = p.op("exp_approx" if self.approx_exp and name in ("exp", "exp2") else self.element_unit(sources))
            if self.rounds_every_trip(name, call, dst):
                new = replace(new, per_trip=new.per_trip + (self.element_unit(sources),) * math.prod(self.trip_bounds))
            elif str(dst.name) in self.deferred_sums and name == "mul" and self.trip_bounds:
                # l * alpha on the FPU from l's float32 CB: l through the TF32 source registers, once a trip (alpha's
                # rounding is the one the carried O takes beside it)
                self.deferred_depth[str(dst.name)] = len(self.trip_bounds)
                new = replace(new, per_trip=new.per_trip + ("tf32",) * math.prod(self.trip_bounds))
            if any(str(s.name) == str(dst.name) for s in sources):
                new = new.merge(before)
        else:
            new = Path(exact=False).merge(*(self.path(s) for s in sources))
        whole = all(isinstance(r.min, tirx.IntImm) and int(r.min) == 0 for r in call.args[0].region) and \
            [int(r.extent) for r in call.args[0].region] == [int(d) for d in dst.shape]
        # a copy or a maximum / minimum of values already in bfloat16 is one of them: packed to a bfloat16 tile as it
        # is (the running max of bfloat16 scores, tensorize's bfloat16_extremes)
        picks = name == "copy" or name in REDUCE and TILE_OPS[name].combine in (np.maximum, np.minimum)
        of_bf16 = sources and all(str(s.name) in self.held_bf16 or str(s.dtype) == "bfloat16" for s in sources)
        if str(dst.name) in self.held_bf16 and dst_dtype == "float32" and not new.exact and not (picks and of_bf16):
            new = replace(new, stores=new.stores + ("bfloat16",))    # packed to a bfloat16 tile: one rounding
        self.paths[str(dst.name)] = new if whole else before.merge(new)
        if whole and self.body_writes:
            self.body_writes[-1].add(str(dst.name))

    def reduce_deferred(self, name: str) -> None:
        """A deferred running sum read outside the loop that updates it: its one row reduction (the FPU's
        reduce_tile of the float32 partial, through the TF32 source registers) before the first such read."""
        depth = self.deferred_depth.get(name)
        if depth is not None and len(self.trip_bounds) < depth:
            self.paths[name] = self.paths.get(name, Path()).op("tf32")
            del self.deferred_depth[name]

    def trips_around(self, call) -> int:
        """How many times the loops around `call` run it, a symbolic trip count (causal attention's `kb < bq + 1`)
        by its bound: an accumulated sum's depth, never fewer terms than the longest trip adds."""
        if min(self.trip_bounds, default=1) < 0:
            raise ValueError(f"`{self.region(call.args[0]).name}` accumulates over a loop whose trip count has no "
                             "bound: no tolerance can be derived for it")
        return math.prod(self.trip_bounds)

    def trip_bound(self, extent) -> int:
        """A loop's trip count, or its bound when symbolic (over the grid and the loops outside it)."""
        if isinstance(extent, tirx.IntImm):
            return int(extent.value)
        bound = self.bounds.const_int_bound(extent).max_value
        return bound if bound < 2 ** 30 else -1        # -1: unbounded (rounds_every_trip refuses to count it)

    def rounds_every_trip(self, name: str, call, dst) -> bool:
        """The op rescales a value the innermost loop around it carries (read before the body writes it whole), in
        place, by a per-row broadcast (scales_carried_row), where the plan takes it through the FPU: every trip
        rounds the carried value again. Counted wherever the class and the mode match, also where the plan keeps
        the op on the SFPU (a float32 output that sees the value: plan.Window.broadcast_on_fpu's may_round): a
        looser bound there, never a tighter one."""
        if not self.carried_scale or not self.trip_bounds or str(dst.name) in self.body_writes[-1] \
                or name not in BINARY or str(dst.dtype) != "float32":
            return False
        regions = [self.region(a) for a in call.args[1:3]]
        if any(r is None for r in regions):
            return False
        extents = [[int(getattr(r.extent, "value", -1)) for r in a.region] for a in call.args[:3]]
        full = [r for r, e in zip(regions, extents[1:]) if e == extents[0]]
        other = [e for e in extents[1:] if e != extents[0]]
        if len(full) != 1 or len(other) != 1 or len(extents[0]) != 2:
            return False
        bcast = "col" if other[0][-1] == 1 and extents[0][-1] > 1 and other[0][0] == extents[0][0] else None
        if not scales_carried_row(name, str(dst.name), str(full[0].name), bcast):
            return False
        if min(self.trip_bounds) < 0:
            raise ValueError(f"`{dst.name}` is rounded once per trip of a loop whose trip count has no bound: no "
                             "tolerance can be derived for it")
        return True


def _flag(call, k: int) -> float:
    """Constant argument k of a tile op (a transpose or accumulate flag, gemm's beta); 0 when absent."""
    value = call.args[k] if len(call.args) > k else 0
    return float(getattr(value, "value", value))


def _wider_unit(a: str | None, b: str) -> str:
    return b if a is None or UNIT_ROUNDOFF[b] >= UNIT_ROUNDOFF[a] else a


def fp32_on_fpu(output_dtypes) -> bool:
    """Whether an element-wise op of fp32 CB tiles may run on the FPU, which reads them through its 19-bit (TF32)
    source registers: only when every output is 16 bits or narrower, whose own rounding (bfloat16 2^-8, float16
    2^-11) is at least TF32's 2^-11. A kernel with a float32 output keeps its fp32 arithmetic exact on the SFPU:
    a user who writes float32 in and out gets float32 results."""
    return all(_WIDTH.get(str(d), 32) <= 16 for d in output_dtypes)


def fpu_readable(func, output_dtypes: dict[str, str]) -> frozenset[str]:
    """The fp32 values the FPU may read from their CBs in a kernel with a float32 output (where fp32_on_fpu is
    False). The FPU reads through its 19-bit (TF32) source registers, and a CB it reads is read that way by every
    reader (no UnpackToDestFp32: copies too). So a value qualifies when nothing read from its CB (the FPU op's own
    result included) reaches an output wider than 16 bits, except through a matmul or a sum, which read fp32
    through TF32 anyway (not a max or min: the SFPU's, exact). A whole write-out right after the ops that compute the value is packed from their DST
    slots (tensorize's Window.try_send), not read from the CB. Layer norm: `centered` and `inv` feed bfloat16 y, and
    float32 rstd only through the variance's reduction and inv's own window: the FPU may read them; `x = x * s`
    written to a float32 output may not. `func`: the tensorize pass's input (tile ops, CB write-out markers)."""
    exact = frozenset(attrs.EXACT_VALUES.get(func, []) or [])
    flows: dict[str, set[str]] = {}      # value -> values computed from it (any way)
    from_cb: dict[str, set[str]] = {}    # value -> values computed from it as read from its CB
    names: set[str] = set(output_dtypes)

    def add(src: str, dst: str, packed_from_dst: bool = False) -> None:
        flows.setdefault(src, set()).add(dst)
        if not packed_from_dst:
            from_cb.setdefault(src, set()).add(dst)
        names.update((src, dst))

    def visit(stmts: list) -> None:
        last_dst = None
        for stmt in stmts:
            if isinstance(stmt, tirx.SeqStmt):
                visit(list(stmt.seq))
                last_dst = None
            elif isinstance(stmt, tirx.TilePrimitiveCall):
                regions = [a.source for a in stmt.args if isinstance(a, tvm.ir.TensorRegion)]
                name = str(stmt.op.name).removeprefix("tirx.tile.")
                for src in regions[1:]:
                    through_tf32 = name == "gemm" or name in REDUCE and not reduces_on_sfpu(
                        name, str(src.dtype), bool({str(r.name) for r in regions[:2]} & exact))
                    if not (through_tf32 and str(src.dtype) == "float32"):
                        # `inv = inv + eps` right after inv's last op reads it in DST, not from its CB
                        add(str(src.name), str(regions[0].name), packed_from_dst=str(src.name) == last_dst)
                last_dst = str(regions[0].name) if regions else None
            elif isinstance(stmt, tirx.Evaluate) and isinstance(stmt.value, tvm.ir.Call) \
                    and str(getattr(stmt.value.op, "name", "")) == "tirx.tt.compute_send":
                args = stmt.value.args
                buffer, tensor = str(args[1].value), str(args[6].value)
                whole = all(isinstance(a, tirx.IntImm) and int(a) == 0 for a in args[2:4])
                add(buffer, tensor, packed_from_dst=whole and buffer == last_dst)
            elif isinstance(stmt, tirx.BufferStore):
                loads: list = []
                tvm_ffi.structural_walk(stmt.value, [(tvm.ir.expr.TensorLoad, lambda e: loads.append(e.source))],
                                        order="pre")
                for b in loads:
                    add(str(b.name), str(stmt.buffer.name))
                last_dst = None
            elif isinstance(stmt, tirx.IfThenElse):
                branches = [stmt.then_case] + ([stmt.else_case] if stmt.else_case is not None else [])
                visit(branches)
                if any(_has_tile_ops(b) or _has_compute_send(b) for b in branches):
                    last_dst = None
                # else: a reader's or writer's guarded step (a split row's write of its statistics by part 0 only,
                # TTExchangePartials) between the op and the value's send leaves the window and its DST as they are
            elif not isinstance(stmt, (tirx.Evaluate, tirx.Bind)):
                inner = getattr(stmt, "body", None)
                if isinstance(inner, tirx.Stmt):
                    visit([inner])
                    if _has_tile_ops(inner):
                        last_dst = None      # a reader's or writer's loop joins the open window (Planner.plan)

    visit([func.body])
    reaches_wide = {name for name, dtype in output_dtypes.items() if _WIDTH.get(str(dtype), 32) > 16}
    changed = True
    while changed:                       # backwards over the flows to a fixed point
        changed = False
        for src, dsts in flows.items():
            if src not in reaches_wide and dsts & reaches_wide:
                reaches_wide.add(src)
                changed = True
    wide_outputs = {name for name, dtype in output_dtypes.items() if _WIDTH.get(str(dtype), 32) > 16}
    return frozenset(name for name in names
                     if name not in wide_outputs and not (from_cb.get(name, set()) & reaches_wide))


def _has_tile_ops(stmt) -> bool:
    found: list = []
    tvm_ffi.structural_walk(stmt, [(tirx.TilePrimitiveCall, found.append)], order="pre")
    return bool(found)


def _has_compute_send(stmt) -> bool:
    found: list = []
    tvm_ffi.structural_walk(stmt, [(tvm.ir.Call, lambda c: found.append(c) if str(getattr(c.op, "name", ""))
                                    == "tirx.tt.compute_send" else None)], order="pre")
    return bool(found)


COMPARE_WITH_ZERO = ("gtz", "gez", "ltz", "lez", "eqz", "nez")    # a comparison's tile op, on a difference


def _buffers(func) -> list:
    """The kernel's tensors and allocated tiles."""
    found = list(func.params)
    tvm_ffi.structural_walk(func.body, [(tirx.AllocBuffer, lambda a: found.append(a.buffer)),
                                        (tirx.DeclBuffer, lambda d: found.append(d.buffer))], order="pre")
    return found


def exact_values(func, declared: dict[str, str]) -> frozenset[str]:
    """The values an element-wise op computes exactly in fp32, never reading them through the FPU's 19-bit (TF32)
    source registers (11 significant bits): the integer tensors and tiles (`declared`: attrs.DECLARED_DTYPES;
    float32 tiles holding integers, exact below 2^24, which verification compares exactly, as a GPU's int32
    arithmetic is) and every value one of them is computed from (`T.cast(x * 2 + j, "int32")`: the GPU's float32
    arithmetic before the conversion). Not a matmul's operands (its product passes the source registers anyway).
    And a comparison of data with data (top-k's `max_val[i] == x[i, j]`: the difference of two values, compared with
    zero), whose answer a TF32 rounding of either side would change; not one of data with a constant (`x > 0.5`,
    `m == -inf`), which the FPU reads as the device does. Empty for a float kernel without such comparisons: its
    choices are unchanged."""
    exact = {name for name, dtype in declared.items() if str(dtype).startswith(("int", "uint"))}
    sources: dict[str, set[str]] = {}    # value -> the values it is computed from
    compared: list[str] = []             # the values compare-with-zero ops test
    extremes: set[str] = set()           # the results of row maxima / minima
    written: set[str] = set()            # values copied whole into a tensor
    fp32 = {str(b.name) for b in _buffers(func) if str(b.dtype) == "float32"}
    params = {str(p.name) for p in func.params}

    def tile_op(call) -> None:
        regions = [a.source for a in call.args if isinstance(a, tvm.ir.TensorRegion)]
        name = str(call.op.name).removeprefix("tirx.tile.")
        if regions and name in COMPARE_WITH_ZERO:
            compared.append(str(regions[0].name))
        if regions and name in ("max", "min") and name in REDUCE:
            extremes.add(str(regions[0].name))
        if len(regions) == 2 and name == "copy" and str(regions[0].name) in params:
            written.add(str(regions[1].name))
        if regions and name != "gemm":
            sources.setdefault(str(regions[0].name), set()).update(str(r.name) for r in regions[1:])

    def store(stmt) -> None:
        loads: list = []
        tvm_ffi.structural_walk(stmt.value, [(tvm.ir.expr.TensorLoad, lambda e: loads.append(e.source))], order="pre")
        sources.setdefault(str(stmt.buffer.name), set()).update(str(b.name) for b in loads)

    tvm_ffi.structural_walk(func.body, [(tirx.TilePrimitiveCall, tile_op), (tirx.BufferStore, store)], order="pre")
    # a comparison of fp32 data with data (16-bit values pass the FPU's registers unrounded), and a maximum written
    # out as it is (a GPU's max is one of the values): exact
    exact |= {name for name in compared if len(sources.get(name, set()) - {name}) >= 2 and sources[name] & fp32}
    exact |= {name for name in extremes & written if name in fp32}
    todo = list(exact)
    while todo:                          # backwards over what each value is computed from
        for src in sources.get(todo.pop(), ()):
            if src not in exact:
                exact.add(src)
                todo.append(src)
    return frozenset(exact)


def carried_scale_on_fpu(intermediate_dtype: str | None) -> bool:
    """Whether a value a loop carries may be scaled through the FPU, its float32 rounded to TF32 (2^-11) once a
    trip (scales_carried_row): only where the user has accepted reduced-precision intermediates
    (TargetConfig.intermediate_dtype "bfloat16", ttnn's SDPA precision, which holds O itself in bfloat16, 2^-8 a
    trip). PathWalk counts that rounding once per trip, tensorize's plan takes the FPU call: the same rule."""
    return intermediate_dtype == "bfloat16"


def scales_carried_row(op: str, dst: str, full: str, other_bcast: str | None) -> bool:
    """The op is a per-row rescale of a value in place: `x = x * v` with v broadcast down each row (an (M, 1)
    column across x's columns: the online softmax's `acc *= alpha`). Inside a loop that carries x, the FPU's
    `mul_tiles_bcast_cols` reads x through its TF32 source registers every trip (carried_scale_on_fpu)."""
    return op == "mul" and full == dst and other_bcast == "col"


def may_round(readable: frozenset[str] | None, names) -> bool:
    """Whether the FPU may read these fp32 values (`readable`: fpu_readable's set; None: any)."""
    return readable is None or all(name in readable for name in names)


def output_paths(func, plan: dict) -> dict[str, Path]:
    """The Path of every output of the input kernel (`plan`: its compiled plan, for the DST format)."""
    fp32_dest = bool(plan.get("compute_config", {}).get("fp32_dest_acc_en", plan["target"].get("fp32_accumulation")))
    outputs = [b["name"] for b in plan["buffers"] if b["role"] == "output"]
    held_bf16 = frozenset(c["buffer"] for c in plan.get("circular_buffers", [])
                          if c["role"] == "intermediate" and c["dtype"] == "bfloat16")
    # the row-sum partials TTTensorize holds in bfloat16 (`<value>_rowsum`, tensorize partial_cb): the value's
    # tiles per row, each a rounding of the partial it is accumulated into
    cbs = {c["buffer"]: c for c in plan.get("circular_buffers", []) if c["role"] == "intermediate"}
    bf16_partials = {name[:-len("_rowsum")]: int(cbs[name[:-len("_rowsum")]]["tiles"][1])
                     for name, c in cbs.items() if name.endswith("_rowsum") and c["dtype"] == "bfloat16"
                     and name[:-len("_rowsum")] in cbs and cbs[name[:-len("_rowsum")]].get("tiles")}
    # the running sums TTTensorize keeps as row partials (defer_row_sum): a rounding a trip, one in the final sum
    deferred_sums = frozenset(name for name, c in cbs.items() if c.get("deferred_sum"))
    walk = PathWalk(func, fp32_dest, fp32_on_fpu([b["dtype"] for b in plan["buffers"] if b["role"] == "output"]),
                    approx_exp=bool(plan["target"].get("approx_exp")), held_bf16=held_bf16,
                    bf16_partials=bf16_partials, deferred_sums=deferred_sums,
                    carried_scale=carried_scale_on_fpu(plan["target"].get("intermediate_dtype")))
    return {name: walk.paths.get(name, Path()) for name in outputs}
