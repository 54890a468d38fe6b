"""TTExchangePartials: two cores of a split row (TTSplitRows) swap their partial row reductions.

`exchange_partials(partial, part0, part1, level)` becomes, for the core holding part h of the row (h = cs), whose
partner at this level is the core of part h ^ 2^level, a swap on the writer RISC:

    compute_send(P, partial)                  compute packs its partial (one tile per tile row) into CB P
    cb_reserve_back(E_0, 1); cb_reserve_back(E_1, 1)
    mcast_receive_ready(E_other)              clear this core's flag, raise the partner's `ready`
    cb_wait_front(P, 1)
    copy_page(E_own, P); swap_send(E_own)     own = bit `level` of h: the partial to E_own's next page here, then,
                                              once the partner is ready, to the same address on it and its flag set
    mcast_receive_wait(E_other)               the partner's partial has arrived in E_other
    cb_push_back(E_j, 1); compute_receive(E_j, part_j) for j = 0, 1
    cb_pop_front(P, 1)

so that part j is the partial of the pair's core whose bit is j, on both cores, and both combine them in the same
order (the same bits); both directions move at once. Each E_j is a group of tt.multicast (per pair, its sender the
core whose bit is j, its one receiver the other) whose per-core runtime args (role, the partner's coordinates) the
host program reads as any other group's; the exchanges of one level share two semaphores (semaphores). A write-out
whose address does not depend on `cs` (layer norm's mean and rstd: the same values on every core of the row) is
written by part 0 only.
"""
from __future__ import annotations

import tvm_ffi
from tvm import tirx

from .. import attrs, ops
from ..errors import CompileError
from ..ir import seq, stmts_of
from ..target import DATA_FORMATS
from .lower_to_circular_buffers import INPUT_CB_BASE, OUTPUT_CB_BASE, free_cb_index
from .partition_work import blocks_of
from .share_reads import FIELDS, block_loop, with_block_loop


def _marker(stmt):
    args = ops.args_of(stmt, "exchange_partials") if isinstance(stmt, tirx.Evaluate) else None
    if args is None:
        return None
    *names, level = args
    return [str(a.value) for a in names], int(level)


def _uses(node, var) -> bool:
    found = []
    tvm_ffi.structural_walk(node, (tirx.Var, lambda v: found.append(1) if v.same_as(var) else None), order="pre")
    return bool(found)


class Exchanger:
    def __init__(self, func):
        self.func = func
        self.cbs = [dict(c) for c in attrs.CB_CONFIG.get(func)]
        self.buffers = attrs.BUFFERS.get(func)
        self.groups = list(attrs.MULTICAST.get(func, None) or [])
        work = attrs.WORK_PARTITION.get(func)
        self.block_core = {}
        for c in work["cores"]:
            blocks = blocks_of(c)
            if len(blocks) > 1:
                raise CompileError("a split row's core has more than one block", stage="exchange-partials",
                                   hint="internal: TTSplitRows needs one block per core")
            for b in blocks:
                self.block_core[b] = tuple(c["core"])
        self.args: list = []
        self.flags: list = []
        self.cs = None
        self.level_semaphores: dict = {}

    def cb(self, buffer: str, role: str, producer: str, consumer: str) -> int:
        info = self.buffers[buffer]
        fmt = DATA_FORMATS[info["dtype"]]
        index = free_cb_index({c["index"] for c in self.cbs}, attrs.TARGET.get(self.func)["num_cbs"],
                              OUTPUT_CB_BASE if role == "output" else INPUT_CB_BASE)
        self.cbs.append({"index": index, "name": f"cb_{buffer}", "buffer": buffer, "role": role,
                         "data_format": fmt.name, "dtype": fmt.dtype, "page_bytes": fmt.tile_bytes, "num_pages": 1,
                         "producer": producer, "consumer": consumer, "tiles": [1, 1]})
        return index

    def group(self, cb: int, buffer: str, part: int, level: int, semaphores: tuple[int, int]) -> dict:
        """The multicast group of part `part` at `level`: per pair of cores whose part indices differ in bit `level`,
        the one whose bit is `part` sends to the other."""
        table = []
        rows = attrs.GRID.get(self.func)["extents"][1]
        bit = 1 << level
        for block, core in sorted(self.block_core.items()):
            index, row = divmod(block, rows)
            sender_index = (index & ~bit) | (part * bit)
            sender = self.block_core[sender_index * rows + row]
            receiver = self.block_core[(sender_index ^ bit) * rows + row]
            fields = {"role": int(index == sender_index), "sender_x": sender[0], "sender_y": sender[1],
                      "start_x": receiver[0], "start_y": receiver[1], "end_x": receiver[0], "end_y": receiver[1],
                      "receivers": 1, "loopback": 0}
            table.append([*core, *(fields[f] for f in FIELDS)])
        self.groups.append({"cb": cb, "buffer": buffer, "sender_semaphore": semaphores[0],
                            "receiver_semaphore": semaphores[1], "axes": ["row_half"],
                            "groups": len(self.block_core) // 2, "cores": table})
        name = f"cb_{buffer}"
        variables = {}
        for field in FIELDS:
            var = tirx.Var(f"{name}_mcast_{field}", "int32")
            variables[field] = var
            self.args.append((var, f"{name}_mcast_{field}"))
        self.flags.append(ops.call("mcast_flag_valid", cb, semaphores[1]))
        return {"vars": variables, "sender": semaphores[0], "receiver": semaphores[1]}

    def semaphores(self, level: int) -> tuple[int, int]:
        """The two semaphore ids of every exchange at `level` (after every id the other multicast groups use):
        `ready` (raised by the partner when its page is reserved) and `valid` (set by the partner when its page has
        been written). All of them are shared: at one level only the two cores of a pair touch them, both go through
        that level's exchanges in the same order, and each use is closed by its own handshake -- a core clears its
        `valid` before it raises the partner's `ready`, waits for its own `ready` (and resets it) before it writes,
        and leaves an exchange only once its `valid` is set, which the partner does after its own reset -- so no
        flag or count is taken for another use's. Pairs of different levels differ, so each level has its own."""
        if level not in self.level_semaphores:
            first = max((max(g["sender_semaphore"], g["receiver_semaphore"]) + 1 for g in self.groups), default=0)
            self.level_semaphores[level] = (first, first + 1)
        return self.level_semaphores[level]

    def exchange(self, partial: str, parts: list[str], level: int) -> list:
        p = self.cb(partial, "output", ops.COMPUTE, ops.WRITER)
        out = [ops.call("compute_send", p, partial, 0, 0, 1, 1, "", 0, 0), ops.call("cb_wait_front", p, 1)]
        semaphores = self.semaphores(level)
        # a swap: each core reserves both parts' pages, tells its partner it may send, sends its own partial and
        # only then waits for the partner's -- both directions at once, not part 1 after part 0
        es, gs = [], []
        for j, part in enumerate(parts):
            es.append(self.cb(part, "input", ops.WRITER, ops.COMPUTE))
            gs.append(self.group(es[j], part, j, level, semaphores))
        out += [ops.call("cb_reserve_back", e, 1) for e in es]

        def send(j):
            v = gs[j]["vars"]
            return seq([ops.call("copy_page", es[j], p),
                        ops.call("swap_send", es[j], semaphores[0], semaphores[1], v["start_x"], v["start_y"])])

        def ready(j):
            v = gs[j]["vars"]
            return ops.call("mcast_receive_ready", es[j], semaphores[0], semaphores[1], v["sender_x"], v["sender_y"])

        sends_part0 = gs[0]["vars"]["role"] != 0
        out += [tirx.IfThenElse(sends_part0, ready(1), ready(0)), tirx.IfThenElse(sends_part0, send(0), send(1)),
                ops.call("mcast_receive_wait", es[0], semaphores[1])]    # the level's one flag, either part
        for j, part in enumerate(parts):
            out += [ops.call("cb_push_back", es[j], 1), ops.call("compute_receive", es[j], part, "", 0, 0)]
        out.append(ops.call("cb_pop_front", p, 1))
        return out

    def rewrite(self, stmts: list) -> list:
        out = []
        for s in stmts:
            if isinstance(s, tirx.Bind) and str(s.var.name) == "row_half":
                self.cs = s.var
            marker = _marker(s)
            if marker is not None:
                names, level = marker
                out += self.exchange(names[0], names[1:], level)
            elif isinstance(s, tirx.For):
                out.append(tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(self.rewrite(stmts_of(s.body)))))
            elif self.cs is not None and self.is_unsplit_write(s):
                out.append(tirx.IfThenElse(self.cs == 0, s, None))
            else:
                out.append(s)
        return out

    def is_unsplit_write(self, stmt) -> bool:
        return isinstance(stmt, tirx.Evaluate) and ops.args_of(stmt, "write_tile") is not None \
            and not _uses(stmt, self.cs)

    def run(self):
        stmts, index = block_loop(self.func)
        if index is None:
            return self.func
        body = self.rewrite(stmts_of(stmts[index].body))
        if not self.args:
            return self.func
        return attrs.put(with_block_loop(self.func, stmts, index, body, self.args, self.flags),
                         {attrs.CB_CONFIG: self.cbs, attrs.MULTICAST: self.groups})


@tirx.transform.prim_func_pass(opt_level=0, name="TTExchangePartials")
def exchange_partials(func, mod, ctx):
    if attrs.GRID.get(func)["vars"][:1] != ["row_half"]:
        return func
    return Exchanger(func).run()
