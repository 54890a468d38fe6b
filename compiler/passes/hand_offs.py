"""Every hand-off of a tile through a circular buffer, proved at compile time where it can be decided.

The compute kernel says which DRAM tile each page it packs is for (tt.page_tag after a pack) and which DRAM tile it
expects at each position of a staging CB (tt.page_expect); the reader and writer say which DRAM tile each page
they move is (read_tile / write_tile). One block of each kernel is replayed (its inner loops unrolled, the block's
own indices kept symbolic): page k of a CB as its producer makes it must be page k as its consumer takes it. Two
index expressions the analyzer proves different are a compiler bug caught before any code runs; what it cannot
decide (a loop whose trip count depends on the block) is left to the emulator, which checks every page it moves
(TTEMU_PAGE_TAGS, emulator/src/page_tags.cpp).
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from .. import ops
from ..errors import CompileError
from ..ir import stmts_of

STAGE = "verify"
MAX_EVENTS = 50_000          # pages replayed per kernel and block; past it the emulator's check is the proof


class Undecided(Exception):
    pass


class Replay:
    """One block of a kernel: per CB, the DRAM tile of each page it produces and of each page it consumes."""

    def __init__(self, func, names: dict):
        self.names = names                   # variable name -> one shared Var (both kernels' `bx` are the same)
        self.produced: dict[int, list] = {}
        self.consumed: dict[int, list] = {}
        self.back: dict[int, int] = {}       # pages pushed so far, per CB
        self.front: dict[int, int] = {}      # pages popped so far
        self.last_pack: tuple[int, int] | None = None
        self.packed: dict[int, int] = {}     # pages packed since the CB's last push
        self.events = 0
        self.analyzer = tvm.sym.Analyzer()
        body = func.body
        loops = [s for s in stmts_of(body) if isinstance(s, tirx.For)]
        self.run(loops[0].body if loops else body, {})

    def value(self, e, env: dict):
        def var(v):
            if v in env:
                return env[v]
            return self.names.setdefault(str(v.name), tirx.Var(str(v.name), "int32"))
        return tvm_ffi.structural_map(e, (tirx.Var, var), order="post") if isinstance(e, tvm.ir.expr.Expr) else e

    def tile(self, args, env: dict) -> tuple:
        return str(args[0].value), self.value(args[1], env), self.value(args[2], env)

    def run(self, stmt, env: dict) -> None:
        if isinstance(stmt, tirx.SeqStmt):
            for s in stmts_of(stmt):
                self.run(s, env)
        elif isinstance(stmt, tirx.Bind):
            env[stmt.var] = self.value(stmt.value, env)
        elif isinstance(stmt, tirx.For):
            lo, extent = self.value(stmt.min, env), self.value(stmt.extent, env)
            if not isinstance(lo, tirx.IntImm) or not isinstance(extent, tirx.IntImm):
                raise Undecided("a loop whose trip count is known at run time")   # never printed: may not print
            for k in range(int(lo), int(lo) + int(extent)):
                self.run(stmt.body, {**env, stmt.loop_var: tirx.IntImm("int32", k)})
        elif isinstance(stmt, tirx.IfThenElse):
            raise Undecided("a condition")         # a guarded page (padding): decided on the emulator
        else:
            self.call(stmt, env)

    def call(self, stmt, env: dict) -> None:
        found = ops.intrinsic_of(stmt)
        if found is None:
            return
        spec, args = found
        self.events += 1
        if self.events > MAX_EVENTS:
            raise Undecided("too many pages to replay")
        name = spec.name
        if name in ("cb_push_back", "cb_pop_front"):
            if name == "cb_push_back":
                self.packed.pop(int(args[0]), None)
            side = self.back if name == "cb_push_back" else self.front
            side[int(args[0])] = side.get(int(args[0]), 0) + int(self.value(args[1], env))
        elif name == "read_tile":                                 # reader: page back + index is this DRAM tile
            self.put(self.produced, int(args[0]), self.back.get(int(args[0]), 0), args[1], env,
                     self.tile(args[2:5], env))
        elif name == "write_tile":                                # writer: page front + index goes to this tile
            self.put(self.consumed, int(args[0]), self.front.get(int(args[0]), 0), args[1], env,
                     self.tile(args[2:5], env))
        elif name == "pack_tile":          # in order: the next page after those packed since the last push
            cb = int(args[1])
            self.last_pack = (cb, self.back.get(cb, 0) + self.packed.get(cb, 0))
            self.packed[cb] = self.packed.get(cb, 0) + 1
        elif name == "pack_tile_at":       # out of order: that page of those reserved
            cb = int(args[1])
            self.last_pack = (cb, self.back.get(cb, 0) + int(self.value(args[2], env)))
        elif name == "page_tag" and self.last_pack is not None:
            cb, page = self.last_pack
            self.produced.setdefault(cb, {})[page] = self.tile(args, env)
        elif name == "page_expect":
            self.put(self.consumed, int(args[0]), self.front.get(int(args[0]), 0), args[1], env,
                     self.tile(args[2:5], env))

    def put(self, table: dict, cb: int, base: int, index, env: dict, tile: tuple) -> None:
        index = self.value(index, env)
        if not isinstance(index, tirx.IntImm):
            index = self.analyzer.simplify(index)
            if not isinstance(index, tirx.IntImm):
                raise Undecided("a page index that depends on the block")
        table.setdefault(cb, {})[base + int(index)] = tile


def _different(a: tuple, b: tuple, analyzer) -> bool:
    if a[0] != b[0]:
        return True
    for x, y in zip(a[1:], b[1:]):
        diff = analyzer.simplify(x - y)
        if isinstance(diff, tirx.IntImm) and int(diff) != 0:
            return True
    return False


def _show(tile: tuple) -> str:
    return f"{tile[0]} tile ({tile[1]}, {tile[2]})"


def check_hand_offs(mod, cbs: list[dict]) -> list[str]:
    """Problems: pages whose producer and consumer provably mean different DRAM tiles."""
    names: dict = {}
    replays = {}
    for role in ("reader", "compute", "writer"):
        try:
            replays[role] = Replay(mod[role], names)
        except Undecided:
            replays[role] = None
    analyzer = tvm.sym.Analyzer()
    problems = []
    for c in cbs:
        producer, consumer = replays.get(c["producer"]), replays.get(c["consumer"])
        if producer is None or consumer is None:
            continue
        made, taken = producer.produced.get(c["index"], {}), consumer.consumed.get(c["index"], {})
        for page in sorted(set(made) & set(taken)):
            if _different(made[page], taken[page], analyzer):
                problems.append(f"{c['name']} (c_{c['index']}): page {page} of a block is made by the "
                                f"{c['producer']} as {_show(made[page])} but taken by the {c['consumer']} as "
                                f"{_show(taken[page])}")
                break
    return problems


def verify_hand_offs(mod, cbs: list[dict]) -> None:
    problems = check_hand_offs(mod, cbs)
    if problems:
        raise CompileError("generated program failed verification: the tiles are handed over in another order "
                           "than they were meant: " + "; ".join(problems), stage=STAGE,
                           hint="this is a compiler bug; please report the kernel")
