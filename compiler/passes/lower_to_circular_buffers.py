"""TTLowerToCircularBuffers: staging tiles become circular buffers, DRAM<->L1 tile copies become NoC page moves.

- every shared tile filled from DRAM gets an input CB (c_0..), pages = tiles x cb_depth;
- every write-out into an output buffer gets an output CB (c_16..) that compute packs into and the writer drains;
- `copy(A_s, A[...])`  -> reader: reserve all tiles, one noc read per tile page, barrier, push
                         + a `compute_receive` marker where compute must wait for them;
- `copy(C[...], C_l)`  -> a `compute_send` marker (compute packs those tiles) + writer: per batch of up to 8 tiles
                         wait, write each, flush once, pop; the output CB holds two batches (compute packs one
                         while the writer drains the other), whatever the size of the block;
- a tensor the target keeps block-sharded in L1 (`l1_shard`): the CB is the core's shard itself (one whole block,
  pages in the shard's row-major order). An output: compute packs into it and the writer only waits for it to be
  complete; an input: the reader only pushes it. The block each core moves must be its shard (one block per core,
  block (by, bx) on core (bx, by), blocks tiling the tensor), an input read once per block.
Records `tt.cb_config` (and the shards in `tt.layout_desc`). Tiles outside the buffer are guarded later by TTPadTiles.
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from .. import ops
from ..errors import CompileError, Refusal
from ..ir import Region, error_at, op_name, reads_at_run_time, region_of, seq
from ..layout import UNIT, view_of
from ..target import BYTE_OUTPUTS, DATA_FORMATS, TILE
from .. import attrs

STAGE = "circular-buffers"
INPUT_CB_BASE, OUTPUT_CB_BASE = 0, 16
WRITE_BATCH = 8          # output tiles per flush: the most a 16-bit half-sync DST holds


def free_cb_index(used, count: int, preferred: int = 0) -> int:
    """The first CB index not in `used` from `preferred` on (then from 0): TT's convention places inputs at c_0..,
    outputs at c_16.., intermediates at c_24.., but a kernel with many values uses whatever is free. Past the
    device's `count`: TTVerifyProgram reports it."""
    return next((i for i in [*range(preferred, count), *range(preferred)] if i not in used), count + len(used))


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


def _write_batches(cb: int, name: str, r0, c0, rows: int, cols: int, batch: int, row_guard=None,
                   write_page=None, convert: str | None = None) -> tirx.Stmt:
    """The writer's side of a write-out: per batch, wait for its tiles, write them, flush once, free them.
    `write_page(index, tr, tc)`: the write of the page at `index` (default: the whole tile (r0 + tr, c0 + tc)).
    `convert`: the declared dtype of an integer output: int32, whose float32 pages the writer converts to int32
    before writing them, or int8 / uint8, whose pages it converts to 1024 bytes each (pages_to_bytes)."""
    def batch_body(tile_of):
        q = tirx.Var("q", "int32")
        index = q if batch > 1 else tirx.IntImm("int32", 0)
        tr, tc = tile_of(index)
        write = ops.call("write_tile", cb, index, name, r0 + tr, c0 + tc) if write_page is None else \
            write_page(index, tr, tc)
        cond = row_guard(tr) if row_guard is not None else None
        if cond is not None:
            write = tirx.IfThenElse(cond, write, None)
        return seq([ops.call("cb_wait_front", cb, batch),
                    *([ops.call("pages_to_int32", cb, batch)] if convert == "int32" else []),
                    *([ops.call("pages_to_bytes", cb, batch, int(convert == "int8"))]
                      if convert in BYTE_OUTPUTS else []),
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


class Shards:
    """The tensors the target keeps block-sharded in L1 (`l1_shard`): each core's block of one must be its shard --
    one block per core, block (by, bx) on core (bx, by), the blocks tiling the tensor exactly, the block at
    (by * rows, bx * cols); an input read once per block."""

    def __init__(self, func, page_origin, analyzer):
        self.func, self.page_origin, self.analyzer = func, page_origin, analyzer
        self.buffers = attrs.BUFFERS.get(func)
        self.names = set(attrs.TARGET.get(func).get("l1_shard", []))
        self.found: dict[str, dict] = {}       # tensor -> its shard grid and shape (tt.layout_desc)
        tensors = [n for n, b in self.buffers.items() if b["scope"] == "global"]
        for name in sorted(self.names):
            if name not in tensors:
                raise CompileError(f"l1_shard names `{name}`, which is not a tensor of the kernel (its tensors: "
                                   f"{', '.join(tensors)})", stage=STAGE, subject=name)
            if self.buffers[name]["role"] not in ("input", "output"):
                raise CompileError(f"l1_shard: `{name}` is {self.buffers[name]['role']}; only inputs and outputs are "
                                   "kept sharded in L1", stage=STAGE, subject=name)
        if not self.names:
            return
        self.grid = attrs.GRID.get(func)
        self.work = attrs.WORK_PARTITION.get(func)
        self.bound = {}                         # grid variable name -> its Var (bound per block)
        self.nested: list = []                  # tile copies inside a loop of the block (a K loop)
        self.reads: dict[str, int] = {}         # tensor -> copies reading it

        def bind(node):
            self.bound[str(node.var.name)] = node.var
        tvm_ffi.structural_walk(func.body, [(tirx.Bind, bind)], order="pre")
        self.walk(func.body, 0)

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def walk(self, stmt, depth: int) -> None:
        if isinstance(stmt, tirx.For):
            return self.walk(stmt.body, depth + 1)
        if isinstance(stmt, tirx.TilePrimitiveCall):
            src = region_of(stmt.args[1]) if op_name(stmt) == "copy" else None
            if src is not None and src.scope == "global":
                self.reads[src.name] = self.reads.get(src.name, 0) + 1
                if depth > 1:   # the persistent block loop is depth 1
                    self.nested.append(stmt)
            return
        children = list(stmt.seq) if isinstance(stmt, tirx.SeqStmt) else \
            [getattr(stmt, name, None) for name in ("body", "then_case", "else_case")]
        for sub in children:
            if isinstance(sub, tirx.Stmt):
                self.walk(sub, depth)

    def check_read(self, call, region, rows: int, cols: int) -> None:
        if any(call.same_as(n) for n in self.nested) or self.reads.get(region.name, 0) > 1:
            raise error_at(call, self.func, f"`{region.name}` cannot be kept sharded in L1: each core must read its "
                                            "block of it once (this read is in a loop, or there are several)",
                           stage=STAGE, hint=f"drop `{region.name}` from l1_shard (a GEMM operand read a K step at a "
                                             "time is read from DRAM and shared by multicast)")
        self.check(call, region, rows, cols)

    def check(self, call, region, rows: int, cols: int) -> None:
        """`region` (rows x cols tiles of a sharded tensor, moved by `call`) must be the core's shard."""
        grid, work, name = self.grid, self.work, region.name
        tiles = attrs.LAYOUT_DESC.get(self.func)[name]["tiles"]
        names, (gy, gx) = grid["vars"], (grid["extents"] + [1])[:2]
        problem = None
        if len(names) != 2 or len(self.buffers[name]["shape"]) != 2:
            problem = "the kernel's grid and the tensor must be 2-D"
        elif any(c["count"] != 1 or c["core"] != [c["start"] % gx, c["start"] // gx] for c in work["cores"]):
            problem = (f"each core must compute exactly one block, block ({names[0]}, {names[1]}) on core "
                       f"({names[1]}, {names[0]}) (the grid is {gy}x{gx} blocks on {len(work['cores'])} cores, "
                       f"`{work['policy']}` partition)")
        elif [rows * gy, cols * gx] != list(tiles):
            problem = (f"the blocks ({rows}x{cols} tiles on a {gy}x{gx} grid) must tile `{name}`'s {tiles[0]}x{tiles[1]} "
                       "tiles exactly")
        else:
            r0, c0 = self.page_origin(region)
            by, bx = (self.bound.get(n) for n in names)
            if by is None or bx is None or not self.analyzer.can_prove_equal(r0, by * rows) \
                    or not self.analyzer.can_prove_equal(c0, bx * cols):
                problem = f"the block must be at [{names[0]} * {rows * TILE}, {names[1]} * {cols * TILE}]"
        if problem:
            raise error_at(call, self.func, f"`{name}` cannot be kept sharded in L1: {problem}", stage=STAGE,
                           hint="drop it from l1_shard, or give each core one whole block of it (blocks of "
                                "M / core rows x N / core columns)")
        xs, ys = (sorted({c["core"][k] for c in work["cores"]}) for k in (0, 1))
        self.found[name] = {"cores": [[xs[0], ys[0]], [xs[-1], ys[-1]]], "shard_shape": [rows * TILE, cols * TILE],
                            "shard_tiles": [rows, cols]}

    def record(self, func):
        """`tt.layout_desc` with the sharded tensors in L1; a named tensor never moved whole is an error."""
        for name in sorted(self.names - set(self.found)):
            raise CompileError(f"l1_shard names `{name}`, which the kernel never moves whole between DRAM and a tile",
                               stage=STAGE, subject=name)
        if not self.found:
            return func
        layouts = {name: dict(lay, memory="L1", layout="block_sharded", shard=self.found[name])
                   if name in self.found else lay for name, lay in attrs.LAYOUT_DESC.get(func).items()}
        return attrs.LAYOUT_DESC.on(func, layouts)


def transposed_operands(func) -> set[str]:
    """Staging tiles read from DRAM whose only use is the B operand of transposed gemms (attention's K in Q @ K^T):
    their CB holds the tiles column by column, so the K-step's tiles of consecutive output columns are consecutive
    pages and one matmul_block (transposing each tile as it unpacks it) computes a run of output columns, as ttnn's
    SDPA reader lays K out."""
    as_b_t: set[str] = set()
    other: set[str] = set()

    def visit(call):
        name = op_name(call)
        regions = [region_of(a) for a in call.args]
        if name == "copy" and any(r is not None and r.scope == "global" for r in regions[:2]):
            return
        for k, r in enumerate(regions):
            if r is None:
                continue
            if name == "gemm" and k == 2 and bool(call.args[5]) and not bool(call.args[4]):
                as_b_t.add(r.name)
            else:
                other.add(r.name)
    tvm_ffi.structural_walk(func.body, (tirx.TilePrimitiveCall, visit), order="pre")
    staging = {n for n, info in attrs.BUFFERS.get(func).items() if info["role"] == "staging"}
    return (as_b_t - other) & staging


@tirx.transform.prim_func_pass(opt_level=0, name="TTLowerToCircularBuffers")
def lower_to_circular_buffers(func, mod, ctx):
    target = attrs.TARGET.get(func)
    layouts = attrs.LAYOUT_DESC.get(func)
    buffers = attrs.BUFFERS.get(func)
    declared = attrs.DECLARED_DTYPES.get(func, {}) or {}    # int32 outputs: their pages are converted by the writer
    depth = target["cb_depth"]       # resolved by TTChooseBlocks (the target's, TileLang's num_stages, or the L1 budget's)
    single = set(attrs.SINGLE_BUFFERED.get(func, []))    # inputs refilled while the key step's other windows run
    analyzer = tvm.sym.Analyzer()
    cbs: dict[str, dict] = {}

    def cb_for(key: str, *, index_base: int, role: str, dtype: str, pages: int, buffer: str) -> dict:
        if key not in cbs:
            index = free_cb_index({c["index"] for c in cbs.values()}, target["num_cbs"], index_base)
            fmt = DATA_FORMATS[dtype]
            cbs[key] = {"index": index, "name": f"cb_{key}", "buffer": buffer, "role": role,
                        "data_format": fmt.name, "dtype": dtype, "page_bytes": fmt.tile_bytes, "num_pages": pages,
                        "producer": "reader" if role == "input" else "compute",
                        "consumer": "compute" if role == "input" else "writer"}
        else:
            cbs[key]["num_pages"] = max(cbs[key]["num_pages"], pages)
        return cbs[key]

    def page_origin(r):
        row, col = view_of(buffers[r.name]).page_origin(r.starts)
        return analyzer.simplify(row), analyzer.simplify(col)

    shards = Shards(func, page_origin, analyzer)
    column_major = transposed_operands(func)
    write_outs: dict[str, int] = {}

    def out_key(name: str) -> str:
        """Each write-out into a tensor drains its own output CB: the writer takes a write-out's tiles in the order
        compute packs them, whatever compute does for the tensor's other regions in between (two halves of a row
        computed in one loop pack tile by tile, interleaved)."""
        n = write_outs[name] = write_outs.get(name, -1) + 1
        return name if n == 0 else f"{name}_{n}"

    def row_guard(r, rows: int):
        """A block that runs past the end of its tensor's row axis, in a tensor with batch axes: its last tiles
        would be the next matrix's first ones in the flattened page view (TTPadTiles bounds that view only), so
        tile row `tr` is moved only while it starts inside the axis. None when the blocks tile the axis exactly (a
        start that is a multiple of the block, in an axis the block divides; `32 * sid + 64 * k` with 64-row blocks
        is not one: its last block passes the end)."""
        view = view_of(buffers[r.name])
        axis = view.tile_axes[0]
        if axis == UNIT or view.batch <= 1:
            return None
        block = rows * TILE
        if view.shape[axis] % block == 0 and analyzer.can_prove(tirx.floormod(r.starts[axis], block) == 0):
            return None
        return lambda tr: r.starts[axis] + tr * TILE < view.shape[axis]

    def lower_copy(call):
        if op_name(call) != "copy":
            return call
        dst, src = region_of(call.args[0]), region_of(call.args[1])
        tile = src if dst.scope == "global" else dst      # the L1 side: its extents are the tile grid moved
        rows, cols = (-(-e // TILE) for e in tile.extents)
        if src.scope == "global" and src.name in shards:   # the core's own L1 shard: already in place
            shards.check_read(call, src, rows, cols)
            cb = cb_for(dst.name, index_base=INPUT_CB_BASE, role="input", dtype=dst.dtype, pages=rows * cols,
                        buffer=dst.name)
            cb["shard_of"] = src.name
            return seq([ops.call("cb_reserve_back", cb["index"], rows * cols),
                        ops.call("cb_push_back", cb["index"], rows * cols),
                        ops.call("compute_receive", cb["index"], dst.name, "", 0, 0)])
        if src.scope == "global":          # DRAM -> L1 staging tile: the reader's job
            ntiles = rows * cols
            cb = cb_for(dst.name, index_base=INPUT_CB_BASE, role="input", dtype=dst.dtype,
                        pages=ntiles * (1 if dst.name in single else depth), buffer=dst.name)
            r0, c0 = page_origin(src)
            after_writes = []
            if buffers[src.name].get("accumulate"):
                # an output added into block after block (tt.accumulate): the writer reads its tiles back, once its
                # own earlier writes of them have landed
                cb["producer"] = "writer"
                after_writes = [ops.call("write_barrier_before_read", cb["index"])]
            if dst.name in column_major:
                cb["tile_order"] = "column_major"

            def page(tr, tc):
                return tc * rows + tr if dst.name in column_major else tr * cols + tc
            if shifted_cols(src) or (shifted_rows(src) and sub_tile_rows(src)):
                # columns from a start between tile boundaries, or fewer rows than a tile's from such a start: pages
                # built element by element
                return seq(after_writes + window_reads(src, cb, rows, cols, page))
            if shifted_rows(src):   # rows from a start between tile boundaries, known when the kernel runs or not
                return seq(after_writes + run_time_rows(src, cb, rows, cols, page))
            guard = row_guard(src, rows)

            def read(tr, tc):
                stmt = ops.call("read_tile", cb["index"], page(tr, tc), src.name, r0 + tr, c0 + tc)
                if guard is None:
                    return stmt
                return tirx.IfThenElse(guard(tr), stmt, ops.call("zero_tile", cb["index"], page(tr, tc)))
            return seq(after_writes + [
                ops.call("cb_reserve_back", cb["index"], ntiles),
                _tile_loops(rows, cols, read),
                ops.call("noc_async_read_barrier", cb["index"]),
                ops.call("cb_push_back", cb["index"], ntiles),
                ops.call("compute_receive", cb["index"], dst.name, src.name, r0, c0),
            ])
        if dst.scope == "global" and dst.name in shards:   # into the core's own L1 shard
            shards.check(call, dst, rows, cols)
            cb = cb_for(dst.name, index_base=OUTPUT_CB_BASE, role="output", dtype=dst.dtype, pages=rows * cols,
                        buffer=dst.name)
            cb["shard_of"] = dst.name
            sr0, sc0 = (int(s) // TILE for s in src.starts)
            return seq([
                ops.call("compute_send", cb["index"], src.name, sr0, sc0, rows, cols, "", 0, 0),
                ops.call("cb_wait_front", cb["index"], rows * cols),
                ops.call("cb_pop_front", cb["index"], rows * cols),
            ])
        if dst.scope == "global":          # L1/DST -> DRAM: compute packs, the writer drains
            batch = write_batch(rows * cols)
            cb = cb_for(out_key(dst.name), index_base=OUTPUT_CB_BASE, role="output", dtype=dst.dtype,
                        pages=2 * batch, buffer=dst.name)
            sr0, sc0 = (int(s) // TILE for s in src.starts)
            bounds = {str(k): v for k, v in (call.config or {}).items() if str(k) in ("row_begin", "row_end")}
            if bounds or shifted_rows(dst) or shifted_cols(dst):
                if declared.get(dst.name) in BYTE_OUTPUTS:
                    raise error_at(call, func, f"`{dst.name}` is {declared[dst.name]}: its pages are converted to "
                                               "bytes and written whole; rows written one by one (a bound on the "
                                               "rows kept, a start between tile boundaries) are not lowered for it",
                                   stage=STAGE, hint="write whole tiles of it, or make it float16",
                                   refusal=Refusal.not_lowered("an int8 / uint8 output written row by row"))
                return seq([ops.call("compute_send", cb["index"], src.name, sr0, sc0, rows, cols, "", 0, 0),
                            _write_batches(cb["index"], dst.name, 0, 0, rows, cols, batch,
                                           write_page=rows_writer(dst, cb, bounds),
                                           convert=declared.get(dst.name))])
            r0, c0 = page_origin(dst)
            return seq([
                ops.call("compute_send", cb["index"], src.name, sr0, sc0, rows, cols, dst.name, r0, c0),
                _write_batches(cb["index"], dst.name, r0, c0, rows, cols, batch, row_guard(dst, rows),
                               convert=declared.get(dst.name)),
            ])
        return call                        # L1 -> L1: a compute copy, tensorized later

    def shifted_rows(r) -> bool:
        """A region whose first row is not on a tile boundary (TTCheckKernel accepted it for a row-by-row move)."""
        row_axis = view_of(buffers[r.name]).tile_axes[0]
        return row_axis != UNIT and (reads_at_run_time(r.starts[row_axis])
                                     or not analyzer.can_prove(tirx.floormod(r.starts[row_axis], TILE) == 0))

    def sub_tile_rows(r) -> bool:
        """A region of fewer rows than a tile's multiple (`glse[bz, by, 0:2]`: one row of a [heads, splits] matrix)."""
        return r.extents[view_of(buffers[r.name]).tile_axes[0]] % TILE != 0

    def shifted_cols(r) -> bool:
        """A region whose first column is not on a tile boundary (TTCheckKernel accepted it for a read into a tile,
        or a write that stays inside one tile column)."""
        col_axis = view_of(buffers[r.name]).tile_axes[1]
        return col_axis != UNIT and not analyzer.can_prove(tirx.floormod(r.starts[col_axis], TILE) == 0)

    row_offsets: dict[str, int] = {}

    def note_row_offsets(first, rows: int) -> None:
        """The integer tensors whose elements place rows of a `rows`-row matrix (`cu_seqlens_q[bz] + bx * 64`): a
        variable-length batch's sequence offsets, which random inputs make non-decreasing from 0 to at most `rows`."""
        def visit(load):
            name = str(load.source.name)
            row_offsets[name] = min(row_offsets.get(name, rows), rows)
        tvm_ffi.structural_walk(first, [(tvm.ir.expr.TensorLoad, visit)], order="pre")

    def run_time_rows(src, cb: dict, rows: int, cols: int, page) -> list:
        """A region whose first row is read while the kernel runs (`Q[cu_seqlens_q[bz] + bx * 64:..., :]`): the
        reader builds each page from the 32 rows it needs (read_rows: the pages that hold them, then row by row
        into the faces; rows outside the matrix are zeros). No page identity: a page holds rows of two tiles."""
        view = view_of(buffers[src.name])
        row_axis = view.tile_axes[0]
        base, c0 = page_origin(Region(src.buffer, tuple(tirx.IntImm("int32", 0) if a == row_axis else s
                                                        for a, s in enumerate(src.starts)), src.extents))
        elem = DATA_FORMATS[src.dtype].tile_bytes // (TILE * TILE)
        first = src.starts[row_axis]
        note_row_offsets(first, view.shape[row_axis])

        def read(tr, tc):
            return ops.call("read_rows", cb["index"], page(tr, tc), src.name, first + tr * TILE,
                            view.shape[row_axis], base, c0 + tc, elem)
        return [ops.call("cb_reserve_back", cb["index"], rows * cols), _tile_loops(rows, cols, read),
                ops.call("noc_async_read_barrier", cb["index"]), ops.call("cb_push_back", cb["index"], rows * cols),
                ops.call("compute_receive", cb["index"], cb["buffer"], "", 0, 0)]

    def window_reads(src, cb: dict, rows: int, cols: int, page) -> list:
        """A region whose first column is between tile boundaries, known when the kernel runs or not (`LSE[h,
        seq_start + t * 64:...]`: a variable-length batch's tokens along the columns): the reader builds each page
        from the 32x32 window of elements it needs (read_window: the pages it overlaps, one at a time, then element by
        element into the faces; elements outside the matrix are zeros). No page identity: a page holds parts of four."""
        view = view_of(buffers[src.name])
        row_axis, col_axis = view.tile_axes
        zero = tirx.IntImm("int32", 0)
        base, _ = page_origin(Region(src.buffer, tuple(zero if a in (row_axis, col_axis) else s
                                                       for a, s in enumerate(src.starts)), src.extents))
        elem = DATA_FORMATS[src.dtype].tile_bytes // (TILE * TILE)
        first_row = zero if row_axis == UNIT else src.starts[row_axis]
        total_rows = 1 if row_axis == UNIT else view.shape[row_axis]
        first_col = src.starts[col_axis]
        if row_axis != UNIT:
            note_row_offsets(first_row, total_rows)
        note_row_offsets(first_col, view.shape[col_axis])
        # a region of fewer columns than its tiles hold (`Wp[0, k * 16]`, 16 packed bytes) ends before the matrix
        # does: the window's columns past it are zeros, as a tile's padding read from DRAM is
        width = src.extents[col_axis]
        last_col = view.shape[col_axis] if width % TILE == 0 else \
            tirx.min(first_col + tirx.IntImm("int32", width), tirx.IntImm("int32", view.shape[col_axis]))

        def read(tr, tc):
            return ops.call("read_window", cb["index"], page(tr, tc), src.name, first_row + tr * TILE,
                            first_col + tc * TILE, total_rows, last_col, base, elem)
        return [ops.call("cb_reserve_back", cb["index"], rows * cols), _tile_loops(rows, cols, read),
                ops.call("noc_async_read_barrier", cb["index"]), ops.call("cb_push_back", cb["index"], rows * cols),
                ops.call("compute_receive", cb["index"], cb["buffer"], "", 0, 0)]

    def rows_writer(dst, cb: dict, bounds: dict):
        """The writer's write of page (tr, tc) of a region written row by row (write_rows: each row's two 16-element
        halves into the DRAM tile that holds it): its first row is between tile boundaries (a vector into row `sid`
        of a tile) or read while the kernel runs (`O[cu_seqlens_q[bz] + bx * 64:..., :]`), or a guard keeps only the
        region's rows [row_begin, row_end) (`if bx * 64 + i < q_len:`). No page identity: a page's rows land in two
        tiles. Rows, not tiles: a DRAM tile at a sequence's end also holds the next sequence's rows, which another
        core writes; reading the tile back to merge them (a read-modify-write) would race with that core."""
        view = view_of(buffers[dst.name])
        row_axis = view.tile_axes[0]
        base, c0 = page_origin(Region(dst.buffer, tuple(tirx.IntImm("int32", 0) if a == row_axis else s
                                                        for a, s in enumerate(dst.starts)), dst.extents))
        elem = DATA_FORMATS[dst.dtype].tile_bytes // (TILE * TILE)
        first, extent = dst.starts[row_axis], tirx.IntImm("int32", dst.extents[row_axis])
        note_row_offsets(first, view.shape[row_axis])
        begin = bounds.get("row_begin", tirx.IntImm("int32", 0))
        end = tirx.min(bounds["row_end"], extent) if "row_end" in bounds else extent

        col_axis = view.tile_axes[1]
        col_off, ncols = tirx.IntImm("int32", 0), tirx.IntImm("int32", TILE)
        if col_axis != UNIT and dst.extents[col_axis] < TILE:
            # the region's columns start at col_off of tile column c0 and end inside it (TTCheckKernel): only they
            # are written, the tile's other columns may be other blocks'
            col_off = analyzer.simplify(tirx.floormod(dst.starts[col_axis], TILE))
            ncols = tirx.IntImm("int32", dst.extents[col_axis])

        def write(index, tr, tc):
            return ops.call("write_rows", cb["index"], index, dst.name, first + tr * TILE, begin - tr * TILE,
                            end - tr * TILE, view.shape[row_axis], base, c0 + tc, elem, col_off, ncols)
        return write

    body = tvm_ffi.structural_map(func.body, (tirx.TilePrimitiveCall, lower_copy), order="post")
    table = sorted(cbs.values(), key=lambda c: c["index"])
    for c in table:
        c["tiles"] = layouts[c["buffer"]]["tiles"] if c["role"] == "input" else None
    func = shards.record(func)
    if row_offsets:
        buffers = {name: dict(info, row_offsets=row_offsets[name]) if name in row_offsets else info
                   for name, info in attrs.BUFFERS.get(func).items()}
        func = attrs.BUFFERS.on(func, buffers)
    return attrs.CB_CONFIG.on(func.with_body(body), table)
