"""TTShareReads: a DRAM block that several cores read at the same step is read once and multicast.

Which cores share a read is decided from the IR's access pattern, never from the kernel's name: a read group
(reserve, page reads, barrier, push of one input CB) depends on the grid indices through the largest parts of its
page addresses (and of the trip counts of the loops around it) computed from grid indices alone. Two cores read
the same data at every step when they walk the same number of blocks and, block by block, those parts have the
same values -- the rows of a GEMM's A for the cores of a core row under a `block` partition, B for a core column,
attention's K and V for the cores of one (batch, head), and in grouped-query attention, whose K row is
`by // groups * S + ...`, for the cores of every query head of one KV head; a LayerNorm's gamma for every core.
A trip count computed from grid indices alone (causal attention's key
loop, `kb < ceildiv((bq + 1) * M, N)`) is compared by its value, block by block: query blocks whose key loops run
equally far (N a multiple of M) share their K and V reads, though their own indices differ. Each such set of cores
that forms a rectangle of the core grid (else its row runs, those spanning the same columns on consecutive rows
joined into rectangles) becomes a multicast group: its first core
reads the block and multicasts it, the others receive it, with the two semaphores of ttnn's 2-D multicast matmul
(receivers count themselves ready on the sender's, the sender raises their VALID flag after the data):

    cb_reserve_back(cb, n)
    if <cb>_mcast_role:                 sender: reads; barrier; mcast_send(cb, n, ..., rectangle, receivers)
    else:                               receiver: mcast_receive(cb, ..., sender)
    cb_push_back(cb, n)

A row or column group multicasts to the rest of its rectangle; a 2-D one includes its sender (loopback). The
roles and coordinates are per-core runtime args (`kind: multicast`); `tt.multicast` lists the groups and their
semaphores for the host program. A CB filled in more than one place (the masked and unmasked halves of a split
key loop) is shared only when every place is, by the same groups: the cores' CB pointers must stay in step.
"""
from __future__ import annotations

import math

import numpy as np
import tvm_ffi
from tvm import tirx

from .. import ops
from ..ir import seq, stmts_of
from .block_bounds import Unsupported, evaluate, grid_terms
from .partition_work import blocks_of
from .. import attrs

FIELDS = ("role", "sender_x", "sender_y", "start_x", "start_y", "end_x", "end_y", "receivers", "loopback")


def _vars(node) -> list:
    found = []
    tvm_ffi.structural_walk(node, (tirx.Var, found.append), order="pre")
    return found


def read_group_end(stmts: list, k: int, cbs: dict) -> int | None:
    """When stmts[k] reserves pages of an input CB the reader fills (an accumulated output read back, its producer
    the writer, is each core's own), the index of the push that closes its read group; else None."""
    args = ops.args_of(stmts[k], "cb_reserve_back")
    if args is None:
        return None
    info = cbs.get(int(args[0]))
    if info is None or info["role"] != "input" or info["producer"] != ops.READER:
        return None
    return next((j for j in range(k + 1, len(stmts))
                 if (a := ops.args_of(stmts[j], "cb_push_back")) is not None and int(a[0]) == int(args[0])), None)


def groups_of(cores: list[tuple], key) -> list[list[tuple]]:
    """Cores with the same key, as rectangles of the core grid: a set that fills its bounding box is one group, any
    other is cut into row runs, and runs spanning the same columns on consecutive rows are one rectangle again (a
    head's blocks dealt contiguously: a part row, full rows, a part row -- three groups)."""
    by_key: dict = {}
    for core in cores:
        by_key.setdefault(key(core), []).append(core)
    out = []
    for members in by_key.values():
        xs, ys = [c[0] for c in members], [c[1] for c in members]
        if len(members) == (max(xs) - min(xs) + 1) * (max(ys) - min(ys) + 1):
            out.append(sorted(members, key=lambda c: (c[1], c[0])))
            continue
        rows: dict = {}
        for x, y in members:
            rows.setdefault(y, []).append(x)
        open_runs: dict = {}        # (first x, last x) -> the rectangle whose last row is the previous row
        for y, row in sorted(rows.items()):
            row.sort()
            runs, run = [], [row[0]]
            for x in row[1:] + [None]:
                if x is not None and x == run[-1] + 1:
                    run.append(x)
                    continue
                runs.append((run[0], run[-1]))
                if x is not None:
                    run = [x]
            below = {}
            for span in runs:
                rect = open_runs.get(span)
                if rect is None or rect[-1][1] != y - 1:
                    rect = []
                    out.append(rect)
                rect += [(x, y) for x in range(span[0], span[1] + 1)]
                below[span] = rect
            open_runs = below
    return out


def block_loop(func) -> tuple[list, int | None]:
    """The kernel's top-level statements and the index of its block loop (the first loop; None without one)."""
    stmts = stmts_of(func.body)
    return stmts, next((k for k, s in enumerate(stmts) if isinstance(s, tirx.For)), None)


def with_block_loop(func, stmts: list, index: int, body: list, args: list, flags: list):
    """`func` with the block loop at stmts[index] given `body`, preceded by a runtime-arg binding per (var, name) of
    `args` and by `flags` (the multicast flags a core sets before its first block)."""
    loop = stmts[index]
    new_loop = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, seq(body))
    binds = [tirx.Bind(var, ops.call_expr("runtime_arg", name)) for var, name in args]
    return func.with_body(seq(stmts[:index] + binds + list(flags) + [new_loop] + stmts[index + 1:]))


def roles(group: list[tuple]) -> dict:
    """core -> its multicast fields (logical coordinates; the host turns them into NoC coordinates)."""
    sender = group[0]
    x0, y0 = sender
    x1, y1 = max(c[0] for c in group), max(c[1] for c in group)
    receivers = len(group) - 1
    if receivers == 0:
        start, end, loopback = sender, sender, 0
    elif y0 == y1:
        start, end, loopback = (x0 + 1, y0), (x1, y1), 0
    elif x0 == x1:
        start, end, loopback = (x0, y0 + 1), (x1, y1), 0
    else:
        start, end, loopback = (x0, y0), (x1, y1), 1
    out = {}
    for core in group:
        out[core] = {"role": int(core == sender), "sender_x": sender[0], "sender_y": sender[1],
                     "start_x": start[0], "start_y": start[1], "end_x": end[0], "end_y": end[1],
                     "receivers": receivers, "loopback": loopback}
    return out


class Sharer:
    def __init__(self, func):
        self.func = func
        self.cbs = {c["index"]: c for c in attrs.CB_CONFIG.get(func)}
        grid = attrs.GRID.get(func)
        self.grid_names = list(grid["vars"])
        self.extents = list(grid["extents"])
        self.work = attrs.WORK_PARTITION.get(func)
        self.cores = {tuple(c["core"]): blocks_of(c) for c in self.work["cores"]}
        self.places: dict = {}          # input CB -> [(reads, context)], every place that fills it
        self.shared: dict = {}          # input CB -> (its send / receive, by the reads), for the CBs shared
        self.groups: list = []          # tt.multicast
        self.args: list = []            # (Var, runtime arg name)
        self.flags: list = []           # mcast_flag_valid calls

    def run(self):
        stmts, index = block_loop(self.func)
        if index is None:
            return self.func
        loop = stmts[index]
        self.inner_loop_vars = []
        tvm_ffi.structural_walk(loop.body, (tirx.For, lambda f: self.inner_loop_vars.append(f.loop_var)), order="pre")
        inner = stmts_of(loop.body)
        self.grid_vars = {str(s.var.name): s.var for s in inner if isinstance(s, tirx.Bind)
                          and str(s.var.name) in self.grid_names}
        fills: dict = {}
        tvm_ffi.structural_walk(loop, (tirx.Evaluate, lambda e: self.count_fill(e, fills)), order="pre")
        self.walk(inner, [], self.collect)
        for cb, places in sorted(self.places.items()):
            if len(places) == fills.get(cb, 0):
                self.decide(cb, places)
        if not self.groups:
            return self.func
        body = self.walk(inner, [], self.emit)
        return attrs.MULTICAST.on(with_block_loop(self.func, stmts, index, body, self.args, self.flags), self.groups)

    def count_fill(self, stmt, fills: dict):
        args = ops.args_of(stmt, "cb_reserve_back")
        if args is not None and self.cbs[int(args[0])]["role"] == "input":
            fills[int(args[0])] = fills.get(int(args[0]), 0) + 1

    def walk(self, stmts: list, context: list, visit) -> list:
        """The statement list with each read group (reserve .. push of a reader-filled input CB) passed to
        `visit(cb, pages, reads, context)`, replaced by what it returns unless None; `context` holds the bounds of the
        loops around it."""
        out, k = [], 0
        while k < len(stmts):
            s = stmts[k]
            if isinstance(s, tirx.For):
                body = self.walk(stmts_of(s.body), context + [s.min, s.extent], visit)
                out.append(tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(body)))
                k += 1
                continue
            end = read_group_end(stmts, k, self.cbs)
            if end is not None:
                cb, n = ops.args_of(s, "cb_reserve_back")
                shared = visit(int(cb), n, stmts[k + 1:end], context)
                if shared is not None:
                    out += [s, shared, stmts[end]]
                    k = end + 1
                    continue
            out.append(s)
            k += 1
        return out

    def collect(self, cb: int, n, reads: list, context: list):
        self.places.setdefault(cb, []).append((reads, context))

    def emit(self, cb: int, n, reads: list, context: list):
        if cb not in self.shared:
            return None
        v, sender_sem, receiver_sem = self.shared[cb]
        send = ops.call("mcast_send", cb, n, sender_sem, receiver_sem, v["start_x"], v["start_y"], v["end_x"],
                        v["end_y"], v["receivers"], v["loopback"])
        receive = ops.call("mcast_receive", cb, sender_sem, receiver_sem, v["sender_x"], v["sender_y"])
        return tirx.IfThenElse(v["role"] != 0, seq(list(reads) + [send]), receive)

    def dependence(self, reads: list, context: list) -> tuple[list, list] | None:
        """What the group's data and its number of reads depend on, as expressions of grid indices alone (compared
        by value, block by block): the largest such parts of its page addresses (`by // 4 * 32` of GQA's K row, not
        `by`: query heads of one KV head read the same pages) and of any loop bound that also depends on a loop
        index; and the loop bounds computed from grid indices alone. None when they depend on something else about
        the block."""
        local = set()
        for s in reads:
            tvm_ffi.structural_walk(s, (tirx.For, lambda f: local.add(f.loop_var)), order="pre")
        exprs = []
        for s in reads:
            tvm_ffi.structural_walk(s, (tirx.Evaluate, lambda e: exprs.append(e)), order="pre")
        terms, bounds, variables = [], [], []
        for e in exprs:
            args = ops.args_of(e, "read_tile")
            if args is not None:
                variables += _vars(e)
                terms += [t for a in args for t in grid_terms(a, self.is_grid_var)]
        for bound in context:
            found = _vars(bound)
            if all(self.is_grid_var(v) for v in found):
                if found:
                    bounds.append(bound)
            else:
                variables += found
                terms += grid_terms(bound, self.is_grid_var)
        for v in variables:
            if any(v.same_as(lv) for lv in local) or self.is_grid_var(v) or self.is_inner_loop_var(v):
                continue
            return None
        return terms, bounds

    def is_grid_var(self, v) -> bool:
        grid_var = self.grid_vars.get(str(v.name))
        return grid_var is not None and grid_var.same_as(v)

    def is_inner_loop_var(self, v) -> bool:
        """A loop index inside the block loop: the same on every core at the same step."""
        return any(v.same_as(lv) for lv in self.inner_loop_vars)

    def decide(self, cb: int, places: list):
        """Share `cb` when every place that fills it reads DRAM and can be shared: cores are grouped by the values,
        block by block, of what all its places depend on together, so each group's cores fill it in step."""
        terms, bounds = [], []
        for reads, context in places:
            if not any(ops.args_of(e, "read_tile") is not None for s in reads for e in _flat(s)):
                return
            found = self.dependence(reads, context)
            if found is None:
                return
            terms += [t for t in found[0] if not any(t.same_as(o) for o in terms)]
            bounds += [b for b in found[1] if not any(b.same_as(o) for o in bounds)]
        values = self.values(terms + bounds)
        if values is None:
            return
        axes = sorted({self.grid_names.index(str(v.name)) for t in terms for v in _vars(t)})

        def key(core):
            return tuple(values[b] for b in self.cores[core])
        groups = groups_of(sorted(self.cores), key)
        if all(len(g) == 1 for g in groups):
            return
        table = {}
        for g in groups:
            table.update(roles(g))
        index = len(self.groups)
        sender_sem, receiver_sem = 2 * index, 2 * index + 1
        name = self.cbs[cb]["name"]
        variables = {}
        for field in FIELDS:
            var = tirx.Var(f"{name}_mcast_{field}", "int32")
            variables[field] = var
            self.args.append((var, f"{name}_mcast_{field}"))
        self.groups.append({"cb": cb, "buffer": self.cbs[cb]["buffer"], "sender_semaphore": sender_sem,
                            "receiver_semaphore": receiver_sem, "axes": [self.grid_names[a] for a in axes],
                            "groups": len(groups),   # per core: x, y and the FIELDS (compact: attrs are FFI objects)
                            "cores": [[*c, *(v[f] for f in FIELDS)] for c, v in sorted(table.items())]})
        self.flags.append(ops.call("mcast_flag_valid", cb, receiver_sem))
        self.shared[cb] = (variables, sender_sem, receiver_sem)

    def values(self, exprs: list) -> list[tuple] | None:
        return block_values(exprs, [self.grid_vars.get(name) for name in self.grid_names], self.extents)


def block_values(exprs: list, grid_vars: list, extents: list[int]) -> list[tuple] | None:
    """Per block number (row-major over `extents`, the last index fastest, as TTGridToPersistent decodes it), the
    values there of expressions of the grid indices `grid_vars` (None for an index the kernel does not bind); None
    when one is not an index expression tilefarm evaluates."""
    blocks = np.arange(math.prod(extents))
    env, stride = [], 1
    for var, extent in reversed(list(zip(grid_vars, extents))):
        if var is not None:
            env.append((var, blocks // stride % extent))
        stride *= extent
    try:
        values = [np.broadcast_to(evaluate(e, env), blocks.shape) for e in exprs]
    except Unsupported:
        return None
    return list(zip(*(v.tolist() for v in values))) if values else [()] * len(blocks)


def _flat(stmt) -> list:
    found = []
    tvm_ffi.structural_walk(stmt, (tirx.Evaluate, found.append), order="pre")
    return found


@tirx.transform.prim_func_pass(opt_level=0, name="TTShareReads")
def share_reads(func, mod, ctx):
    return Sharer(func).run()
