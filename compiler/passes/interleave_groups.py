"""TTInterleaveGroups: two group loops in a row, the second reading the first's output group by group, run as one.

TTTensorize emits each DST window over a block's rows as its own group loop: attention's final `acc /= l` is a
window of reciprocals (one tile of 1/l a row group, packed into a CB) and then a window that multiplies acc's rows by
them and packs O. The second window's group g reads only the reciprocal the first packed in its group g, yet it waits
for all of them: O's first pages reach the writer after the last row's reciprocal, at the kernel's end, where the
whole grid writes O at once. Run as one loop -- group g of the first window, then group g of the second -- the
writer gets each row group's pages as soon as that row is normalized.

Two loops `for g in range(N)` at the same level, A then B (with nothing between them but waits for A's pages and
statements of the dataflow kernels), become one when, for every CB c A pushes (p pages a group):
  - c is compute's own (no dataflow statement names it) and holds exactly A's N * p pages (A reserves them all in
    the original order, so the CB is empty when A starts: B's page index i is A's i-th push);
  - B reads c only through unpacking ops whose page index at group g is below (g + 1) * p (checked for every value of
    g and of B's inner loops), never pops, reserves or pushes it;
and A and B name no other CB in common, each group of each is whole DST windows (acquire .. release), A pops none of
its own pushes. B's groups then wait for (g + 1) * p pages of c; the waits between the loops follow the fused loop,
the dataflow statements precede it (they run in another kernel). Each group re-initializes its engines where the two
windows differ (TTHoistInits / TTConfigureUnpackers run after this pass), which is what this costs: only with one
block a core (or no block loop), where the output's write is the kernel's end and nothing else hides it. With several
blocks a core a block's write runs under the next block's compute, and the re-initializations are all that is left
(BH 1x10x8192x128 bfloat16 intermediates: 1977.33 -> 1978.52 us with it; as TTStreamReads' first-step streaming).
"""
from __future__ import annotations

import itertools

import tvm_ffi
from tvm import tirx

from .. import attrs, ops
from ..ir import compile_expr, seq, stmts_of
from .hoist_inits import init_kind

MAX_POINTS = 4096   # index checks enumerate B's loop nest; larger nests are left alone


def _intrinsics(stmt, out: list, loops: tuple = (), under_if: bool = False) -> list:
    """(spec, args, enclosing loops inside stmt, under an if) of every intrinsic in stmt."""
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            _intrinsics(s, out, loops, under_if)
    elif isinstance(stmt, tirx.For):
        _intrinsics(stmt.body, out, loops + (stmt,), under_if)
    elif isinstance(stmt, tirx.IfThenElse):
        _intrinsics(stmt.then_case, out, loops, True)
        if stmt.else_case is not None:
            _intrinsics(stmt.else_case, out, loops, True)
    elif isinstance(stmt, tirx.Evaluate):
        found = ops.intrinsic_of(stmt)
        if found is not None:
            out.append((found[0], found[1], loops, under_if))
    else:
        out.append((None, None, loops, under_if))   # anything else (a Bind ...): not ours to reason about
    return out


def _cbs(spec, args) -> list[int]:
    return [int(a) for kind, a in zip(spec.args, args) if kind == "cb" and isinstance(a, tirx.IntImm)]


def _is_dataflow(found: list) -> bool:
    return bool(found) and all(spec is not None and ops.COMPUTE not in spec.roles or
                               spec is not None and spec.roles == ops.ANY for spec, *_ in found) \
        and any(ops.COMPUTE not in spec.roles for spec, *_ in found)


def _const(e) -> int | None:
    return int(e.value) if isinstance(e, tirx.IntImm) else None


def _group_loop(stmt) -> int | None:
    if not isinstance(stmt, tirx.For) or stmt.kind != tirx.ForKind.SERIAL or _const(stmt.min) != 0:
        return None
    n = _const(stmt.extent)
    return n if n is not None and n > 1 else None


def _extent(loops: tuple) -> int | None:
    total = 1
    for loop in loops:
        n = _const(loop.extent)
        if n is None or _const(loop.min) != 0:
            return None
        total *= n
    return total


class _Interleaver:
    def __init__(self, func):
        self.pages = {int(c["index"]): int(c["num_pages"]) for c in attrs.CB_CONFIG.get(func)}
        self.dataflow_cbs: set[int] = set()   # CBs a reader / writer statement names
        for spec, args, _, _ in _intrinsics(func.body, []):
            if spec is not None and ops.COMPUTE not in spec.roles:
                self.dataflow_cbs.update(_cbs(spec, args))

    def rewrite(self, stmt):
        if isinstance(stmt, tirx.SeqStmt):
            return seq(self.fuse([self.rewrite(s) for s in stmts_of(stmt)]))
        if isinstance(stmt, tirx.For):
            body = self.rewrite(stmt.body)
            return stmt if body.same_as(stmt.body) else tirx.For(
                stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body, annotations=stmt.annotations)
        if isinstance(stmt, tirx.IfThenElse):
            then = self.rewrite(stmt.then_case)
            other = self.rewrite(stmt.else_case) if stmt.else_case is not None else None
            return tirx.IfThenElse(stmt.condition, then, other)
        return stmt

    def fuse(self, stmts: list) -> list:
        out: list = []
        while stmts:
            fused = self.try_fuse(stmts[0], stmts, 1) if _group_loop(stmts[0]) is not None else None
            if fused is None:
                out.append(stmts[0])
                stmts = stmts[1:]
                continue
            before, loop, after, j = fused
            out += before
            stmts = [loop] + after + stmts[j + 1:]   # the fused loop may take a third one next
        return out

    def pushes(self, a) -> dict[int, int] | None:
        """CB -> pages A pushes a group; None when A is not whole windows or pushes under a condition."""
        found = _intrinsics(a.body, [])
        names = [spec.name if spec is not None else None for spec, *_ in found]
        if None in names or names.count("tile_regs_acquire") != names.count("tile_regs_release") \
                or "tile_regs_acquire" not in names:
            return None
        pushed: dict[int, int] = {}
        for spec, args, loops, under_if in found:
            if spec.name == "cb_push_back":
                n, times = _const(args[1]), _extent(loops)
                if under_if or n is None or times is None:
                    return None
                pushed[int(args[0])] = pushed.get(int(args[0]), 0) + n * times
        return pushed

    def try_fuse(self, a, stmts: list, j: int):
        n = _group_loop(a)
        pushed = self.pushes(a)
        if not pushed:
            return None
        between, waits = [], []
        while j < len(stmts):
            s = stmts[j]
            args = ops.args_of(s, "cb_wait_front")
            if args is not None and isinstance(args[0], tirx.IntImm) and int(args[0]) in pushed:
                waits.append(s)
            elif _is_dataflow(found := _intrinsics(s, [])):
                if any(set(_cbs(spec, args_)) & set(pushed) for spec, args_, _, _ in found):
                    return None
                between.append(s)
            else:
                break
            j += 1
        if j >= len(stmts) or _group_loop(stmts[j]) != n:
            return None
        b = stmts[j]
        if self.pushes(b) is None:
            return None
        for c, p in pushed.items():
            if c in self.dataflow_cbs or self.pages.get(c) != n * p:
                return None
        found_a, found_b = _intrinsics(a.body, []), _intrinsics(b.body, [])
        if any(spec.name == "cb_pop_front" and int(args[0]) in pushed for spec, args, _, _ in found_a):
            return None
        cbs_a = {c for spec, args, _, _ in found_a for c in _cbs(spec, args)}
        cbs_b = {c for spec, args, _, _ in found_b for c in _cbs(spec, args)}
        if (cbs_a & cbs_b) - set(pushed):
            return None
        read: set[int] = set()
        for spec, args, loops, _ in found_b:
            mine = [c for c in _cbs(spec, args) if c in pushed]
            if not mine:
                continue
            if init_kind(spec.name) is not None or spec.configures is not None:
                continue   # an engine init or a reconfiguration for the CB's format: no page of it
            if spec.unpacks is None:
                return None   # a wait, pop, reserve or push of A's pages, or an op that names them otherwise
            if not self.reads_behind(spec, args, b.loop_var, n, loops, pushed):
                return None
            read.update(mine)
        if not read:
            return None
        wait = [ops.call("cb_wait_front", c, (b.loop_var + 1) * pushed[c]) for c in sorted(read)]
        body_b = tvm_ffi.structural_map(seq(wait + stmts_of(b.body)),
                                        (tirx.Var, lambda v: a.loop_var if v.same_as(b.loop_var) else v))
        loop = tirx.For(a.loop_var, a.min, a.extent, a.kind, seq(stmts_of(a.body) + stmts_of(body_b)),
                        annotations=a.annotations)
        return between, loop, waits, j

    @staticmethod
    def reads_behind(spec, args, g, n: int, loops: tuple, pushed: dict) -> bool:
        """Every page of A's CBs this op unpacks, at every point of B's loop nest, was pushed by group g."""
        lead = 0
        while lead < len(spec.args) and spec.args[lead] == "cb":
            lead += 1
        variables = [g] + [loop.loop_var for loop in loops]
        ranges = [range(n)]
        for loop in loops:
            extent = _const(loop.extent)
            if extent is None or _const(loop.min) != 0:
                return False
            ranges.append(range(extent))
        points = 1
        for r in ranges:
            points *= len(r)
        if points > MAX_POINTS:
            return False
        for k in spec.unpacks:
            if k is None or k >= lead or int(args[k]) not in pushed:
                continue
            if lead + k >= len(spec.args) or spec.args[lead + k] != "expr":
                return False
            try:
                index = compile_expr(args[lead + k], variables)
            except (KeyError, TypeError):
                return False
            p = pushed[int(args[k])]
            if any(index(vals) >= (vals[0] + 1) * p or index(vals) < 0 for vals in itertools.product(*ranges)):
                return False
        return True


def interleave_groups_in(func: tirx.PrimFunc) -> tirx.PrimFunc:
    work = attrs.WORK_PARTITION.get(func, None)
    if work is not None and max((core["count"] for core in work["cores"]), default=1) > 1:
        return func   # several blocks a core: a block's write-out runs under the next block's compute anyway
    return func.with_body(_Interleaver(func).rewrite(func.body))


@tirx.transform.prim_func_pass(opt_level=0, name="TTInterleaveGroups")
def interleave_groups(func, mod, ctx):
    return interleave_groups_in(func)
