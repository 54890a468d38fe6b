"""TTTensorize for kernels with row reductions or column broadcasts: every computed tile lives in a CB.

`reduce_tile` and the broadcast ops read their operands from circular buffers, so in a kernel that uses them
every computed buffer (alloc_local, or a shared tile written by compute) is *CB-resident*: it owns an
intermediate CB (c_24..) in its own dtype that always holds exactly one version of the buffer at its front.
Each tile op runs tile by tile (acquire, compute into DST slot 0 from CB operands, pack, release) and writes a
new version of its destination behind the old one (tiles outside the op's region are copied through), then
pops the old version. Every block starts from an all-zero version (the reference's fresh buffers) and pops the
last one at its end. DST never holds a value across ops, so no window analysis is needed; the price is an
L1 round trip per op (element-wise chains are not fused in DST as in tensorize.py).

- `sum/max(m, X, axes=-1)` -> per row tile of m: [fill -inf for max | copy old m for accum], reduce_init,
  reduce_tile over X's row of tiles with the scaler CB, pack (reduce_init's packer mask zeroes columns 1..31),
  reduce_uninit. The reader fills the scaler CB once (`fill_reduce_scaler`), compute waits for it once.
- `op(Y, X, m)` with an (M, 1) column m -> `{add,sub,mul}_tiles_bcast_cols` for 16-bit CBs; for fp32 CBs, for
  maximum/minimum and for a column first operand: `unary_bcast<COL>` + `copy_tile` + the SFPU binary op
  (fp32 data would lose bits in the FPU's 19-bit source registers).
"""
from __future__ import annotations

from tvm import tirx

from .. import ops
from ..ir import error_at, get_attr, op_name, region_of, scalar_of, seq, stmts_of
from ..target import DATA_FORMATS, TILE, dst_capacity
from .tensorize import (INTERMEDIATE_CB_BASE, SCALAR_OP, SFPU_BINARY, SFPU_BINARY_INIT, UNARY_SFPU, float_bits, i32,
                        unpack_to_dest_fp32_cbs)

STAGE = "tensorize"
REDUCE_OPS = ("sum", "max")
LOWEST = -3.4028234663852886e38  # -FLT_MAX: the start of a max reduction (DST starts at zero)


def needs_cb_residency(func) -> bool:
    """True when the kernel has a reduction or a binary op with a broadcast (M, 1) operand."""
    found = []

    def visit(call):
        name = op_name(call)
        if name in REDUCE_OPS:
            found.append(call)
        elif name in SFPU_BINARY:
            dst = region_of(call.args[0])
            regions = [region_of(a) for a in call.args[1:3]]
            if any(r is not None and tuple(r.extents) != tuple(dst.extents) for r in regions):
                found.append(call)
    import tvm_ffi
    tvm_ffi.structural_walk(func.body, [(tirx.TilePrimitiveCall, visit)], order="pre")
    return bool(found)


def _grid(r) -> tuple[int, int, int, int]:
    """(first tile row, first tile col, tile rows, tile cols) of a region."""
    r0, c0 = (int(s) // TILE for s in r.starts)
    rows, cols = (-(-e // TILE) for e in r.extents)
    return r0, c0, rows, cols


class CBTensorizer:
    def __init__(self, func):
        self.func = func
        self.buffers = get_attr(func, "tt.buffers")
        self.layouts = get_attr(func, "tt.layout_desc")
        self.target = get_attr(func, "tt.target")
        self.cbs = {c["index"]: c for c in get_attr(func, "tt.cb_config")}
        self.staging_cb = {c["buffer"]: c["index"] for c in self.cbs.values() if c["role"] == "input"}
        self.fp32 = self.target["fp32_accumulation"]
        self.resident: dict[str, int] = {}
        for name, info in self.buffers.items():
            if info["role"] == "compute":
                self.resident[name] = self.add_cb(name, f"cb_{name}", info["dtype"], 2 * self.ntiles(name),
                                                  "intermediate", "compute")
        self.scaler_cb = None

    def error(self, node, message, hint=None):
        return error_at(node, self.func, message, stage=STAGE, hint=hint)

    def tiles(self, name) -> list[int]:
        return self.layouts[name]["tiles"]

    def ntiles(self, name) -> int:
        rows, cols = self.tiles(name)
        return rows * cols

    def add_cb(self, buffer, cb_name, dtype, pages, role, producer) -> int:
        index = INTERMEDIATE_CB_BASE + sum(1 for c in self.cbs.values() if c["index"] >= INTERMEDIATE_CB_BASE)
        if role == "input":  # the scaler: an input CB after the staging ones
            index = max((c["index"] for c in self.cbs.values() if c["role"] == "input"), default=-1) + 1
        fmt = DATA_FORMATS[dtype]
        self.cbs[index] = {"index": index, "name": cb_name, "buffer": buffer, "role": role, "data_format": fmt.name,
                           "dtype": dtype, "page_bytes": fmt.tile_bytes, "num_pages": pages, "producer": producer,
                           "consumer": "compute", "tiles": self.tiles(buffer) if buffer in self.layouts else [1, 1]}
        return index

    def cb_of(self, name) -> int:
        return self.resident[name] if name in self.resident else self.staging_cb[name]

    def is_fp32(self, cb) -> bool:
        return self.cbs[cb]["data_format"] == "Float32"

    # ---- versions of CB-resident buffers ---------------------------------------------------------------
    def pack_slot0(self, cb) -> list:
        return [ops.call("tile_regs_commit"), ops.call("tile_regs_wait"), ops.call("pack_reconfig_data_format", cb),
                ops.call("pack_tile", i32(0), cb), ops.call("tile_regs_release")]

    def new_version(self, name, region, make_tile, *, after_pack=()) -> list:
        """Write a new version of `name`: make_tile(i, j) computes the tile at (i, j) of `region` into DST slot 0;
        tiles outside the region are copied from the current version."""
        cb = self.resident[name]
        n = self.ntiles(name)
        rows, cols = self.tiles(name)
        if region is None:
            r0, c0, rr, rc = 0, 0, rows, cols
        else:
            r0, c0, rr, rc = _grid(region)
        ti, tj = tirx.Var("ti", "int32"), tirx.Var("tj", "int32")
        i = ti if rows > 1 else i32(0)
        j = tj if cols > 1 else i32(0)
        inside = make_tile(i - r0, j - c0)
        whole = (r0, c0, rr, rc) == (0, 0, rows, cols)
        if whole:
            compute = seq(inside)
        else:
            keep = [ops.call("copy_init", cb), ops.call("copy_tile", cb, i * cols + j, i32(0))]
            cond = tirx.And(tirx.And(i >= r0, i < r0 + rr), tirx.And(j >= c0, j < c0 + rc))
            compute = tirx.IfThenElse(cond, seq(inside), seq(keep))
        body = seq([ops.call("tile_regs_acquire"), compute, *self.pack_slot0(cb), *after_pack])
        if cols > 1:
            body = tirx.For(tj, 0, cols, tirx.ForKind.SERIAL, body)
        if rows > 1:
            body = tirx.For(ti, 0, rows, tirx.ForKind.SERIAL, body)
        return [ops.call("cb_reserve_back", cb, n), body, ops.call("cb_push_back", cb, n),
                ops.call("cb_pop_front", cb, n), ops.call("cb_wait_front", cb, n)]

    def zero_version(self, name) -> list:
        cb, n = self.resident[name], self.ntiles(name)
        t = tirx.Var("t", "int32")
        body = seq([ops.call("tile_regs_acquire"), *self.pack_slot0(cb)])
        return [ops.call("cb_reserve_back", cb, n), tirx.For(t, 0, n, tirx.ForKind.SERIAL, body) if n > 1 else body,
                ops.call("cb_push_back", cb, n), ops.call("cb_wait_front", cb, n)]

    # ---- operands ----------------------------------------------------------------------------------------
    def operand_index(self, r, i, j):
        """CB tile index of region r at (i, j) of the op's grid; a one-column region broadcasts along j."""
        r0, c0, _, rc = _grid(r)
        cols = self.tiles(r.name)[1]
        return (r0 + i) * cols + c0 + (j if rc > 1 else 0)

    def load(self, r, i, j, slot) -> list:
        cb = self.cb_of(r.name)
        return [ops.call("copy_init", cb), ops.call("copy_tile", cb, self.operand_index(r, i, j), i32(slot))]

    # ---- ops -----------------------------------------------------------------------------------------------
    def lower_op(self, call) -> list:
        name = op_name(call)
        dst = region_of(call.args[0])
        if dst.name not in self.resident:
            raise self.error(call, f"internal: `{dst.name}` is not a computed buffer")
        if name == "zero":
            return self.new_version(dst.name, dst, lambda i, j: [])
        if name == "fill":
            value = scalar_of(call.args[1])
            return self.new_version(dst.name, dst, lambda i, j: [ops.call("fill_tile_init"),
                                                                 ops.call("fill_tile", i32(0), value)])
        if name in ("copy", "cast") or name in UNARY_SFPU:
            src = region_of(call.args[1])
            unary = UNARY_SFPU.get(name)

            def tile(i, j):
                out = self.load(src, i, j, 0)
                if unary:
                    out += [ops.call(f"{unary}_tile_init"), ops.call(f"{unary}_tile", i32(0))]
                return out
            return self.new_version(dst.name, dst, tile)
        if name in SFPU_BINARY:
            return self.new_version(dst.name, dst, lambda i, j: self.binary_tile(call, name, dst, i, j))
        if name in REDUCE_OPS:
            return self.reduce(call, name, dst)
        raise self.error(call, f"internal: no lowering for T.tile.{name}")

    def binary_tile(self, call, name, dst, i, j) -> list:
        a, b = call.args[1], call.args[2]
        ra, rb = region_of(a), region_of(b)
        if ra is None or rb is None:                       # tile (op) scalar on the SFPU
            tile, scalar, scalar_first = (ra, scalar_of(b), False) if rb is None else (rb, scalar_of(a), True)
            fn, init = SCALAR_OP[name]
            if scalar_first and name == "sub":
                fn = "rsub_unary_tile"
            return self.load(tile, i, j, 0) + [ops.call(init), ops.call(fn, i32(0), tirx.IntImm("uint32", float_bits(scalar)))]
        wide = tuple(dst.extents)
        col_a, col_b = tuple(ra.extents) != wide, tuple(rb.extents) != wide
        if not (col_a or col_b):                           # same shapes: both unpacked to DST, SFPU op
            return self.load(ra, i, j, 0) + self.load(rb, i, j, 1) + [
                ops.call(SFPU_BINARY_INIT[name]), ops.call(SFPU_BINARY[name], i32(0), i32(1), i32(0))]
        full, col = (rb, ra) if col_a else (ra, rb)
        cfull, ccol = self.cb_of(full.name), self.cb_of(col.name)
        fpu_ok = name in ("add", "sub", "mul") and not (col_a and name == "sub") and \
            not (self.is_fp32(cfull) or self.is_fp32(ccol))
        if fpu_ok:                                         # FPU: in1's column 0 broadcast along the row
            return [ops.call(f"{name}_bcast_cols_init", cfull, ccol),
                    ops.call(f"{name}_tiles_bcast_cols", cfull, ccol, self.operand_index(full, i, j),
                             self.operand_index(col, i, j), i32(0))]
        col_slot, full_slot = (0, 1) if col_a else (1, 0)
        return [ops.call("unary_bcast_cols_init", ccol),
                ops.call("unary_bcast_cols", ccol, self.operand_index(col, i, j), i32(col_slot)),
                *self.load(full, i, j, full_slot),
                ops.call(SFPU_BINARY_INIT[name]), ops.call(SFPU_BINARY[name], i32(0), i32(1), i32(0))]

    def reduce(self, call, name, dst) -> list:
        src = region_of(call.args[1])
        accum = bool(call.args[3]) if len(call.args) > 3 else False
        csrc = self.cb_of(src.name)
        cdst = self.resident[dst.name]
        scaler = self.scaler()
        _, sc0, _, k_tiles = _grid(src)
        src_cols = self.tiles(src.name)[1]
        pool = "max" if name == "max" else "sum"

        def tile(i, j):
            sr0 = int(src.starts[0]) // TILE
            out = []
            if accum:
                out += self.load(dst, i, j, 0)
            elif pool == "max":
                out += [ops.call("fill_tile_init"), ops.call("fill_tile", i32(0), LOWEST)]
            # REDUCE_ROW SUM feeds the scaler to SrcA and the data to SrcB (reduce.h); MAX the other way round
            order = (scaler, csrc) if pool == "sum" else (csrc, scaler)
            out += [ops.call("reconfig_data_format", *order), ops.call(f"reduce_init_{pool}", csrc, scaler, cdst)]
            k = tirx.Var("kt", "int32")
            step = ops.call(f"reduce_tile_{pool}", csrc, scaler, (sr0 + i) * src_cols + sc0 + k, i32(0), i32(0))
            out.append(tirx.For(k, 0, k_tiles, tirx.ForKind.SERIAL, step) if k_tiles > 1 else
                       ops.call(f"reduce_tile_{pool}", csrc, scaler, (sr0 + i) * src_cols + sc0, i32(0), i32(0)))
            return out
        # the packer mask of reduce_init stays in effect through the pack; reduce_uninit restores it afterwards
        return self.new_version(dst.name, dst, tile, after_pack=[ops.call("reduce_uninit")])

    def scaler(self) -> int:
        if self.scaler_cb is None:
            self.scaler_cb = self.add_cb("reduce_scaler", "cb_reduce_scaler", "bfloat16", 1, "input", "reader")
        return self.scaler_cb

    # ---- statement lists -------------------------------------------------------------------------------
    def lower_list(self, stmts) -> list:
        out, pending = [], {}
        for s in stmts:
            found = ops.intrinsic_of(s)
            if found and found[0].name == "compute_receive":
                cb = int(found[1][0])
                if cb in pending:
                    out.append(ops.call("cb_pop_front", cb, pending.pop(cb)))
                n = self.ntiles(self.cbs[cb]["buffer"])
                pending[cb] = n
                out.append(ops.call("cb_wait_front", cb, n))
            elif found and found[0].name == "compute_send":
                out += self.send(found[1])
            elif isinstance(s, tirx.TilePrimitiveCall):
                out += self.lower_op(s)
            elif isinstance(s, tirx.For):
                out.append(tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(self.lower_list(stmts_of(s.body)))))
            else:
                out.append(s)
        return out + [ops.call("cb_pop_front", cb, n) for cb, n in pending.items()]

    def send(self, args) -> list:
        out_cb, name = int(args[0]), str(args[1].value)
        r0, c0, rows, cols = (int(x) for x in args[2:6])
        grid_cols = self.tiles(name)[1]
        cb = self.resident[name]
        ti, tj = tirx.Var("ti", "int32"), tirx.Var("tj", "int32")
        i = ti if rows > 1 else i32(0)
        j = tj if cols > 1 else i32(0)
        body = seq([ops.call("tile_regs_acquire"), ops.call("copy_init", cb),
                    ops.call("copy_tile", cb, (r0 + i) * grid_cols + c0 + j, i32(0)),
                    ops.call("tile_regs_commit"), ops.call("tile_regs_wait"),
                    ops.call("pack_reconfig_data_format", out_cb), ops.call("cb_reserve_back", out_cb, 1),
                    ops.call("pack_tile", i32(0), out_cb), ops.call("cb_push_back", out_cb, 1),
                    ops.call("tile_regs_release")])
        if cols > 1:
            body = tirx.For(tj, 0, cols, tirx.ForKind.SERIAL, body)
        if rows > 1:
            body = tirx.For(ti, 0, rows, tirx.ForKind.SERIAL, body)
        return [body]

    def run(self):
        stmts = [s for s in stmts_of(self.func.body) if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer))]
        first_loop = next(k for k, s in enumerate(stmts) if isinstance(s, tirx.For))
        block = stmts[first_loop]
        inner = self.lower_list(stmts_of(block.body))
        binds = [s for s in inner if isinstance(s, tirx.Bind)]
        rest = [s for s in inner if not isinstance(s, tirx.Bind)]
        versions = [s for name in self.resident for s in self.zero_version(name)]
        last = [ops.call("cb_pop_front", cb, self.ntiles(name)) for name, cb in self.resident.items()]
        loop = tirx.For(block.loop_var, block.min, block.extent, block.kind, seq(binds + versions + rest + last))
        before, after = stmts[:first_loop], stmts[first_loop + 1:]
        setup, teardown = [], []
        if self.scaler_cb is not None:
            sc = self.scaler_cb
            setup = [ops.call("cb_reserve_back", sc, 1), ops.call("fill_reduce_scaler", sc),
                     ops.call("cb_push_back", sc, 1), ops.call("cb_wait_front", sc, 1)]
            teardown = [ops.call("cb_pop_front", sc, 1)]
        body = before + [self.hw_startup()] + setup + [loop] + teardown + after
        config = {"fp32_dest_acc_en": self.fp32, "dst_full_sync_en": False,
                  "math_fidelity": self.target["math_fidelity"], "dst_capacity": dst_capacity(self.fp32, False),
                  "math_approx_mode": False, "unpack_to_dest_fp32_cbs": self.unpack_to_dest_cbs(seq(body))}
        table = sorted(self.cbs.values(), key=lambda c: c["index"])
        return self.func.with_body(seq(body)).with_attrs({"tt.compute_config": config, "tt.cb_config": table})

    def hw_startup(self):
        outputs = sorted(c["index"] for c in self.cbs.values() if c["role"] == "output")
        inputs = sorted(self.staging_cb.values()) or sorted(self.resident.values())
        if len(inputs) >= 2:
            return ops.call("hw_startup_binary", inputs[0], inputs[1], outputs[0])
        return ops.call("hw_startup_unary", inputs[0], outputs[0])

    def unpack_to_dest_cbs(self, body) -> list[int]:
        return unpack_to_dest_fp32_cbs(body, self.cbs) if self.fp32 else []
