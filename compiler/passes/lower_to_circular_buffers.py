"""TTLowerToCircularBuffers: staging tiles become circular buffers, DRAM<->L1 tile copies become NoC page moves.

- every shared tile filled from DRAM gets an input CB (c_0..), pages = tiles x cb_depth;
- every output buffer gets an output CB (c_16..) that compute packs into and the writer drains;
- `copy(A_s, A[...])`  -> reader: reserve all tiles, one noc read per tile page, barrier, push
                         + a `compute_receive` marker where compute must wait for them;
- `copy(C[...], C_l)`  -> a `compute_send` marker (compute packs those tiles) + writer: per batch of up to 8 tiles
                         wait, write each, flush once, pop; the output CB holds two batches (compute packs one
                         while the writer drains the other), whatever the size of the block.
Records `tt.cb_config`. Tiles outside the buffer are guarded later by TTPadTiles.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from .. import ops
from ..ir import op_name, region_of, seq
from ..layout import view_of
from ..target import DATA_FORMATS, TILE
from .. import attrs

INPUT_CB_BASE, OUTPUT_CB_BASE = 0, 16
WRITE_BATCH = 8          # output tiles per flush: the most a 16-bit half-sync DST holds


def write_batch(tiles: int) -> int:
    """The largest divisor of a region's tile count up to WRITE_BATCH."""
    return next(b for b in range(min(WRITE_BATCH, tiles), 0, -1) if tiles % b == 0)


def _tile_loops(rows: int, cols: int, make) -> tirx.Stmt:
    """for tr in range(rows): for tc in range(cols): make(tr, tc) -- loops of one iteration are elided."""
    tr, tc = tirx.Var("tr", "int32"), tirx.Var("tc", "int32")
    body = make(tr if rows > 1 else tirx.IntImm("int32", 0), tc if cols > 1 else tirx.IntImm("int32", 0))
    if cols > 1:
        body = tirx.For(tc, 0, cols, tirx.ForKind.SERIAL, body)
    if rows > 1:
        body = tirx.For(tr, 0, rows, tirx.ForKind.SERIAL, body)
    return body


def _write_batches(cb: int, name: str, r0, c0, rows: int, cols: int, batch: int) -> tirx.Stmt:
    """The writer's side of a write-out: per batch, wait for its tiles, write them, flush once, free them."""
    def batch_body(tile_of):
        q = tirx.Var("q", "int32")
        index = q if batch > 1 else tirx.IntImm("int32", 0)
        tr, tc = tile_of(index)
        write = ops.call("write_tile", cb, index, name, r0 + tr, c0 + tc)
        return seq([ops.call("cb_wait_front", cb, batch),
                    tirx.For(q, 0, batch, tirx.ForKind.SERIAL, write) if batch > 1 else write,
                    ops.call("noc_async_writes_flushed"),
                    ops.call("cb_pop_front", cb, batch)])

    if cols % batch == 0:    # batches along each tile row
        per_row = cols // batch
        return _tile_loops(rows, per_row, lambda tr, tcb: batch_body(lambda q: (tr, tcb * batch + q)))
    batches = rows * cols // batch
    t = tirx.Var("tb", "int32")

    def tile_of(q):
        flat = q if batches == 1 else t * batch + q
        return tirx.floordiv(flat, cols), tirx.floormod(flat, cols)
    body = batch_body(tile_of)
    return body if batches == 1 else tirx.For(t, 0, batches, tirx.ForKind.SERIAL, body)


@tirx.transform.prim_func_pass(opt_level=0, name="TTLowerToCircularBuffers")
def lower_to_circular_buffers(func, mod, ctx):
    target = attrs.TARGET.get(func)
    layouts = attrs.LAYOUT_DESC.get(func)
    buffers = attrs.BUFFERS.get(func)
    depth = target["cb_depth"]       # resolved by TTChooseBlocks (the target's, TileLang's num_stages, or the L1 budget's)
    analyzer = tvm.sym.Analyzer()
    cbs: dict[str, dict] = {}

    def cb_for(key: str, *, index_base: int, role: str, dtype: str, pages: int, buffer: str) -> dict:
        if key not in cbs:
            used = [c["index"] for c in cbs.values() if c["role"] == role]
            fmt = DATA_FORMATS[dtype]
            cbs[key] = {"index": index_base + len(used), "name": f"cb_{key}", "buffer": buffer, "role": role,
                        "data_format": fmt.name, "dtype": dtype, "page_bytes": fmt.tile_bytes, "num_pages": pages,
                        "producer": "reader" if role == "input" else "compute",
                        "consumer": "compute" if role == "input" else "writer"}
        else:
            cbs[key]["num_pages"] = max(cbs[key]["num_pages"], pages)
        return cbs[key]

    def page_origin(r):
        row, col = view_of(buffers[r.name]).page_origin(r.starts)
        return analyzer.simplify(row), analyzer.simplify(col)

    def lower_copy(call):
        if op_name(call) != "copy":
            return call
        dst, src = region_of(call.args[0]), region_of(call.args[1])
        tile = src if dst.scope == "global" else dst      # the L1 side: its extents are the tile grid moved
        rows, cols = (-(-e // TILE) for e in tile.extents)
        if src.scope == "global":          # DRAM -> L1 staging tile: the reader's job
            ntiles = rows * cols
            cb = cb_for(dst.name, index_base=INPUT_CB_BASE, role="input", dtype=dst.dtype,
                        pages=ntiles * depth, buffer=dst.name)
            r0, c0 = page_origin(src)
            return seq([
                ops.call("cb_reserve_back", cb["index"], ntiles),
                _tile_loops(rows, cols, lambda tr, tc: ops.call(
                    "read_tile", cb["index"], tr * cols + tc, src.name, r0 + tr, c0 + tc)),
                ops.call("noc_async_read_barrier", cb["index"]),
                ops.call("cb_push_back", cb["index"], ntiles),
                ops.call("compute_receive", cb["index"], dst.name),
            ])
        if dst.scope == "global":          # L1/DST -> DRAM: compute packs, the writer drains
            batch = write_batch(rows * cols)
            cb = cb_for(dst.name, index_base=OUTPUT_CB_BASE, role="output", dtype=dst.dtype,
                        pages=2 * batch, buffer=dst.name)
            r0, c0 = page_origin(dst)
            sr0, sc0 = (int(s) // TILE for s in src.starts)
            return seq([
                ops.call("compute_send", cb["index"], src.name, sr0, sc0, rows, cols),
                _write_batches(cb["index"], dst.name, r0, c0, rows, cols, batch),
            ])
        return call                        # L1 -> L1: a compute copy, tensorized later

    body = tvm_ffi.structural_map(func.body, (tirx.TilePrimitiveCall, lower_copy), order="post")
    table = sorted(cbs.values(), key=lambda c: c["index"])
    for c in table:
        c["tiles"] = layouts[c["buffer"]]["tiles"] if c["role"] == "input" else None
    return attrs.CB_CONFIG.on(func.with_body(body), table)
