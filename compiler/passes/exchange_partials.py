"""TTExchangePartials: the two cores of a split row (TTSplitRows) swap their partial row reductions.

`exchange_partials(partial, part0, part1)` becomes, for the core holding half k of the row (k = cs):

    compute_send(P, partial)                  compute packs its partial (one tile per tile row) into CB P
    cb_wait_front(P, 1)                       the writer RISC, per part j = 0, 1 (every core in the same order):
    cb_reserve_back(E_j, 1)
    if E_j_mcast_role (j == k):               the page P holds goes to E_j's next page here, then to the same
        copy_page(E_j, P); mcast_send(E_j)    address on the partner (TTShareReads' two-semaphore protocol, one
    else: mcast_receive(E_j)                  receiver, no loopback)
    cb_push_back(E_j, 1); compute_receive(E_j, part_j)
    cb_pop_front(P, 1)

so that part j is core j's partial on both cores and both combine them in the same order (the same bits). Each E_j
is a multicast group of tt.multicast (its sender the pair's core j, its one receiver the other core), with its
semaphores and per-core runtime args, read by the host program as any other group. A write-out whose address does
not depend on `cs` (layer norm's mean and rstd: the same values on both cores) is written by core 0 only.
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
from .split_rows import SPLIT


def _marker(stmt):
    found = ops.intrinsic_of(stmt) if isinstance(stmt, tirx.Evaluate) else None
    if found is None or found[0].name != "exchange_partials":
        return None
    return [str(a.value) for a in found[1]]


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

    def cb(self, buffer: str, role: str, producer: str, consumer: str) -> int:
        info = self.buffers[buffer]
        fmt = DATA_FORMATS[info["dtype"]]
        index = free_cb_index({c["index"] for c in self.cbs}, attrs.TARGET.get(self.func)["num_cbs"],
                              OUTPUT_CB_BASE if role == "output" else INPUT_CB_BASE)
        self.cbs.append({"index": index, "name": f"cb_{buffer}", "buffer": buffer, "role": role,
                         "data_format": fmt.name, "dtype": fmt.dtype, "page_bytes": fmt.tile_bytes, "num_pages": 1,
                         "producer": producer, "consumer": consumer, "tiles": [1, 1]})
        return index

    def group(self, cb: int, buffer: str, part: int) -> dict:
        """The multicast group of part `part`: per pair of cores, the one with cs == part sends to the other."""
        index = len(self.groups)
        table = []
        rows = attrs.GRID.get(self.func)["extents"][1]
        for block, core in sorted(self.block_core.items()):
            half, row = divmod(block, rows)
            sender = self.block_core[part * rows + row]
            receiver = self.block_core[(1 - part) * rows + row]
            fields = {"role": int(half == part), "sender_x": sender[0], "sender_y": sender[1],
                      "start_x": receiver[0], "start_y": receiver[1], "end_x": receiver[0], "end_y": receiver[1],
                      "receivers": 1, "loopback": 0}
            table.append([*core, *(fields[f] for f in FIELDS)])
        self.groups.append({"cb": cb, "buffer": buffer, "sender_semaphore": 2 * index,
                            "receiver_semaphore": 2 * index + 1, "axes": ["row_half"],
                            "groups": len(self.block_core) // SPLIT, "cores": table})
        name = f"cb_{buffer}"
        variables = {}
        for field in FIELDS:
            var = tirx.Var(f"{name}_mcast_{field}", "int32")
            variables[field] = var
            self.args.append((var, f"{name}_mcast_{field}"))
        self.flags.append(ops.call("mcast_flag_valid", cb, 2 * index + 1))
        return {"vars": variables, "sender": 2 * index, "receiver": 2 * index + 1}

    def exchange(self, partial: str, parts: list[str]) -> list:
        p = self.cb(partial, "output", ops.COMPUTE, ops.WRITER)
        out = [ops.call("compute_send", p, partial, 0, 0, 1, 1, "", 0, 0), ops.call("cb_wait_front", p, 1)]
        for j, part in enumerate(parts):
            e = self.cb(part, "input", ops.WRITER, ops.COMPUTE)
            g = self.group(e, part, j)
            v = g["vars"]
            send = seq([ops.call("copy_page", e, p),
                        ops.call("mcast_send", e, 1, g["sender"], g["receiver"], v["start_x"], v["start_y"],
                                 v["end_x"], v["end_y"], v["receivers"], v["loopback"])])
            receive = ops.call("mcast_receive", e, g["sender"], g["receiver"], v["sender_x"], v["sender_y"])
            out += [ops.call("cb_reserve_back", e, 1), tirx.IfThenElse(v["role"] != 0, send, receive),
                    ops.call("cb_push_back", e, 1), ops.call("compute_receive", e, part, "", 0, 0)]
        out.append(ops.call("cb_pop_front", p, 1))
        return out

    def rewrite(self, stmts: list) -> list:
        out = []
        for s in stmts:
            if isinstance(s, tirx.Bind) and str(s.var.name) == "row_half":
                self.cs = s.var
            names = _marker(s)
            if names is not None:
                out += self.exchange(names[0], names[1:])
            elif isinstance(s, tirx.For):
                out.append(tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(self.rewrite(stmts_of(s.body)))))
            elif self.cs is not None and self.is_unsplit_write(s):
                out.append(tirx.IfThenElse(self.cs == 0, s, None))
            else:
                out.append(s)
        return out

    def is_unsplit_write(self, stmt) -> bool:
        found = ops.intrinsic_of(stmt) if isinstance(stmt, tirx.Evaluate) else None
        return found is not None and found[0].name == "write_tile" and not _uses(stmt, self.cs)

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
