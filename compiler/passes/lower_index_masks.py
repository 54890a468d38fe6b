"""TTLowerIndexMasks: element loops that write an index-dependent tile (a mask) -> tiles read from a constant table.

    for i, j in T.grid(64, 64):                          reader: the table's page of each tile neither all 0 nor -inf
        acc[i, j] = T.if_then_else(bx*64 + i >= k*64 + j,  ->   compute: that page into the tile, or a fill
                                   0.0, -inf)

A condition `a*i + b*j + d >= 0` (a, b in {-1, 0, 1}, d any integer expression of block and loop indices) takes,
inside the tile at (ti, tj), the form `a*r + b*c + d' >= 0` with d' = 32*a*ti + 32*b*tj + d: the tile depends only
on d', and only for the 64 (diagonal) or 33 (row / column boundary) values of d' where it is neither all true nor
all false. Those tiles plus the two constant ones form a table that the host program generates (a DRAM buffer of
role "constant" whose `generator` the plan carries). Reader and compute both evaluate each tile's d' (block and loop
indices are scalars to both): the reader reads entry d' - lo into the tile's page of a staging CB only when
lo < d' < hi, and compute copies that page into the tile there and fills the tile with the true value (d' >= hi)
or the false value (d' <= lo) elsewhere (ir.MaskSelect on the copy). So a causal diagonal step of a 4x8-tile block
reads 4 pages, not 32. Tiles the analyzer proves constant over the whole grid become fills. Conditions combine
with T.And / T.Or / T.Not when the values are an additive mask (0 / -inf) or a multiplicative one (1 / 0): the
atoms' masks are added, multiplied or maxed.

Runs after TTLowerToCircularBuffers (it adds a DRAM buffer, a staging CB and reader calls); TTCheckKernel calls
`check_mask` first so that every diagnostic is located before anything is lowered.
"""
from __future__ import annotations

import math

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx
from tvm.ir import Op

from .. import ops
from ..ir import MaskSelect, error_at, seq
from ..target import DATA_FORMATS, TILE
from .lower_to_circular_buffers import free_cb_index
from .. import attrs

STAGE = "check"
WHOLE_FROM = 4      # masks of more tiles than this (the smallest DST) are written by one op, not tile by tile
_COMPARE = {tirx.GE: (1, 0), tirx.GT: (1, -1), tirx.LE: (-1, 0), tirx.LT: (-1, -1)}   # sign, offset
# (true, false) values -> the op combining the atoms' masks, for (and, or)
_COMBINE = {(0.0, -math.inf): {"and": "add", "or": "maximum"}, (-math.inf, 0.0): {"and": "maximum", "or": "add"},
            (1.0, 0.0): {"and": "mul", "or": "maximum"}, (0.0, 1.0): {"and": "maximum", "or": "mul"}}


def i32(v) -> tirx.IntImm:
    return tirx.IntImm("int32", int(v))


def region(buffer, starts, extents) -> tvm.ir.TensorRegion:
    ranges = [tvm.ir.Range.from_min_extent(i32(s) if isinstance(s, int) else s, i32(e)) for s, e in zip(starts, extents)]
    return tvm.ir.TensorRegion(buffer, ranges, tirx.BufferRegionType())


def tile_call(name: str, *args, config: dict | None = None) -> tirx.TilePrimitiveCall:
    return tirx.TilePrimitiveCall(*args, op=Op.get(f"tirx.tile.{name}"), workspace={}, config=config or {},
                                  dispatch=None, scope=None)


class Atom:
    """`a*r + b*c + offset >= 0` inside a tile (r, c in 0..31), offset = 32*a*ti + 32*b*tj + d."""

    def __init__(self, a: int, b: int, d):
        self.a, self.b, self.d = a, b, d

    def negated(self) -> "Atom":          # not (x >= 0)  <=>  -x - 1 >= 0
        return Atom(-self.a, -self.b, -self.d - 1)

    @property
    def lo(self) -> int:                  # offsets <= lo: all false
        return -(max(self.a, 0) + max(self.b, 0)) * (TILE - 1) - 1

    @property
    def hi(self) -> int:                  # offsets >= hi: all true
        return -(min(self.a, 0) + min(self.b, 0)) * (TILE - 1)


class Mask:
    """One element loop: where it writes, its atoms (per tile: `tile_atoms[(ti, tj)][k]` is atom k inside tile (ti, tj)),
    how they combine, and the two values. An index value (`expand[i, j] = j`) has no atoms: `values[(ti, tj)]` is
    (a, b, offset), the tile holding a*r + b*c + offset."""

    def __init__(self, store, rows, cols, tile_atoms, combine, true_value, false_value, values=None):
        self.store, self.rows, self.cols = store, rows, cols
        self.tile_atoms, self.combine = tile_atoms, combine
        self.true_value, self.false_value = true_value, false_value
        self.values = values

    @property
    def count(self) -> int:
        return len(next(iter(self.tile_atoms.values())))


def match(loop) -> tuple | None:
    """(loop vars, extents, the store) of an element loop nest `for i, j: buf[...] = value`, or None."""
    variables, extents, node = [], [], loop
    while isinstance(node, tirx.For):
        if not (isinstance(node.min, tirx.IntImm) and int(node.min) == 0 and isinstance(node.extent, tirx.IntImm)):
            return None
        variables.append(node.loop_var)
        extents.append(int(node.extent))
        node = node.body
    if not isinstance(node, tirx.BufferStore):
        return None
    return variables, extents, node


def _constant(e) -> float | None:
    if isinstance(e, (tirx.FloatImm, tirx.IntImm)):
        return float(e.value)
    if isinstance(e, tirx.Cast):
        return _constant(e.value)
    return None


def _substitute(expr, mapping: dict):
    return tvm_ffi.structural_map(expr, (tirx.Var, lambda v: next((e for k, e in mapping.items() if k.same_as(v)), v)))


def analyze(func, loop, analyzer) -> Mask:
    """The mask an element loop writes; a located CompileError when it is not one tilefarm can lower."""
    def error(node, message, hint=None):
        return error_at(node, func, message, stage=STAGE, hint=hint)

    variables, extents, store = match(loop)
    buf = store.buffer
    if str(buf.scope()) not in ("local", "shared") or len(buf.shape) != 2:
        raise error(store, f"element store to `{buf.name}`: outside tile operations only index masks into 2-D tiles "
                           "are supported")
    axis_var, written = {}, [1, 1]
    for axis, index in enumerate(store.indices):
        if isinstance(index, tirx.IntImm) and int(index) == 0:
            continue
        hit = [k for k, v in enumerate(variables) if index.same_as(v)]
        if not hit:
            raise error(store, f"element store to `{buf.name}`: an index mask writes the tile element by element "
                               "from its origin")
        axis_var[variables[hit[0]]] = axis
        written[axis] = extents[hit[0]]
    if written != [int(d) for d in buf.shape]:
        raise error(store, f"an index mask must write the whole tile `{buf.name}` {tuple(int(d) for d in buf.shape)}")
    value = store.value
    if not (isinstance(value, tvm.ir.Call) and str(value.op.name).endswith("if_then_else")):
        return Mask(store, written[0], written[1], {}, None, None, None,
                    values=_index_values(value, axis_var, written, analyzer, error))
    cond, a, b = value.args
    true_value, false_value = _constant(a), _constant(b)
    if true_value is None or false_value is None:
        raise error(store, "an index mask's T.if_then_else values must be constants (data goes through the mask: "
                           "x + mask, x * mask)")

    def flatten(c):
        if isinstance(c, tirx.Not) and isinstance(c.a, (tirx.And, tirx.Or, tirx.Not)):   # De Morgan: an `else:`
            inner = c.a
            if isinstance(inner, tirx.Not):
                return flatten(inner.a)
            flip = tirx.Or if isinstance(inner, tirx.And) else tirx.And
            return flatten(flip(tirx.Not(inner.a), tirx.Not(inner.b)))
        if isinstance(c, (tirx.And, tirx.Or)):
            kind = "and" if isinstance(c, tirx.And) else "or"
            parts = []
            for sub in (c.a, c.b):
                k, p = flatten(sub)
                if len(p) > 1 and k != kind:
                    raise error(store, "a mask condition mixes T.And and T.Or; write separate masks")
                parts += p
            return kind, parts
        return "and", [c]

    # inside tile (ti, tj) an element index is TILE * t + r, r in [0, TILE): an atom is taken tile by tile, so a
    # condition that is linear inside every tile (`i // 32 == j // 32`, block-diagonal and block-causal masks:
    # constant per tile) is a mask as much as a diagonal is
    inner = {axis: tirx.Var(f"tt_mask_{'rc'[axis]}", "int32") for axis in (0, 1)}
    for v in inner.values():
        analyzer.bind(v, tvm.ir.Range(0, TILE))

    def atom(c, ti: int, tj: int) -> Atom:
        if isinstance(c, tirx.Not):
            return atom(c.a, ti, tj).negated()
        if type(c) not in _COMPARE:
            raise error(store, f"mask condition `{c}`: use <, <=, > or >= between index expressions")
        sign, offset = _COMPARE[type(c)]
        diff = (c.a - c.b) * sign + offset                 # diff >= 0
        tile_start = {0: ti * TILE, 1: tj * TILE}
        local = _substitute(diff, {v: i32(tile_start[axis]) + inner[axis] for v, axis in axis_var.items()})
        zero = {inner[axis]: i32(0) for axis in axis_var.values()}
        base = analyzer.simplify(_substitute(local, zero))
        coefs = {}
        for axis in axis_var.values():
            one = dict(zero)
            one[inner[axis]] = i32(1)
            k = analyzer.simplify(_substitute(local, one) - base)
            if not isinstance(k, tirx.IntImm) or int(k) not in (-1, 0, 1):
                raise error(store, f"mask condition `{c}`: the element indices must appear with coefficient 1 or -1 "
                                   "(a diagonal, row or column boundary) inside each 32x32 tile")
            coefs[axis] = int(k)
        linear = base + sum((coefs[axis] * inner[axis] for axis in axis_var.values()), i32(0))
        if not analyzer.can_prove(local - linear == 0):
            raise error(store, f"mask condition `{c}` is not linear in the element indices inside a 32x32 tile")
        # the table offset of a tile at (0, 0) form: d' = d + TILE * (a * ti + b * tj)
        a, b = coefs.get(0, 0), coefs.get(1, 0)
        return Atom(a, b, analyzer.simplify(base - TILE * (a * ti + b * tj)))

    kind, conds = flatten(cond)
    tiles = [(ti, tj) for ti in range(-(-written[0] // TILE)) for tj in range(-(-written[1] // TILE))]
    tile_atoms = {(ti, tj): [atom(c, ti, tj) for c in conds] for ti, tj in tiles}
    atoms = tile_atoms[tiles[0]]
    combine = None
    if len(atoms) > 1:
        # all true gives the true value, any false the false one: with true > false an T.And is the atoms' minimum
        # and a T.Or their maximum, the other way round with true < false (0 / -inf and 1 / 0 keep their add / mul)
        table = _COMBINE.get((true_value, false_value)) or \
            ({"and": "minimum", "or": "maximum"} if true_value > false_value else {"and": "maximum", "or": "minimum"})
        combine = table[kind]
    return Mask(store, written[0], written[1], tile_atoms, combine, true_value, false_value)


# an index value is exact in the table's float dtype: float32 holds every integer below 2^24 in magnitude
EXACT_INDEX = 1 << 24


def _index_values(value, axis_var: dict, written: list, analyzer, error) -> dict:
    """An element store of an integer index expression (`expand[i, j] = j`, `bx * 64 + i`) -> per tile (ti, tj)
    (a, b, offset): the tile holds a*r + b*c + offset. a, b are the expression's coefficients of the element
    indices (the same in every tile), offset an integer known when the kernel is built."""
    value = value.value if isinstance(value, tirx.Cast) and "int" in str(value.value.ty) else value
    if "int" not in str(value.ty):
        raise error(value, f"`{value}`: a value computed from element indices must be an integer index expression "
                           "or a mask T.if_then_else(condition on indices, constant, constant)")
    rc = {axis: tirx.Var(f"tt_value_{'rc'[axis]}", "int32") for axis in (0, 1)}
    for v in rc.values():
        analyzer.bind(v, tvm.ir.Range(0, TILE))
    out = {}
    for ti in range(-(-written[0] // TILE)):
        for tj in range(-(-written[1] // TILE)):
            start = {0: ti * TILE, 1: tj * TILE}
            local = _substitute(value, {v: i32(start[axis]) + rc[axis] for v, axis in axis_var.items()})
            zero = {v: i32(0) for v in rc.values()}
            base = analyzer.simplify(_substitute(local, zero))
            coefs = []
            for axis in (0, 1):
                one = dict(zero)
                one[rc[axis]] = i32(1)
                coefs.append(analyzer.simplify(_substitute(local, one) - base))
            if not all(isinstance(k, tirx.IntImm) for k in (base, *coefs)):
                raise error(value, f"`{value}`: an index used as a value must be an expression of the element "
                                   "indices and sizes known when the kernel is built (block and loop indices are not)")
            a, b = int(coefs[0]), int(coefs[1])
            linear = analyzer.simplify(base + a * rc[0] + b * rc[1])
            if not analyzer.can_prove(local - linear == 0):
                raise error(value, f"`{value}`: an index used as a value must be linear in the element indices "
                                   "inside each 32x32 tile")
            corners = [int(base) + a * r + b * c for r in (0, TILE - 1) for c in (0, TILE - 1)]
            if max(abs(x) for x in corners) >= EXACT_INDEX:
                raise error(value, f"`{value}` reaches {max(corners, key=abs)}: index values are held as float32, "
                                   "exact below 2^24 in magnitude")
            out[(ti, tj)] = (a, b, int(base))
    if len({v[:2] for v in out.values()}) > 1:
        raise error(value, f"`{value}`: an index used as a value must have the same coefficients in every tile")
    return out


def check_mask(func, loop, analyzer) -> str:
    """For TTCheckKernel: validate the element loop early; returns the name of the tile it writes."""
    return str(analyze(func, loop, analyzer).store.buffer.name)


def _json_float(value: float):
    return value if math.isfinite(value) else ("inf" if value > 0 else "-inf")


class MaskLowering:
    def __init__(self, func):
        self.func = func
        self.analyzer = tvm.sym.Analyzer()
        self.buffers = dict(attrs.BUFFERS.get(func))
        self.layouts = dict(attrs.LAYOUT_DESC.get(func))
        self.cbs = [dict(c) for c in attrs.CB_CONFIG.get(func)]
        self.target = attrs.TARGET.get(func)
        self.depth = self.target["cb_depth"]
        self.tables: dict[tuple, object] = {}
        self.new_params: list = []
        self.count = 0

    def bind_ranges(self) -> None:
        grid = attrs.GRID.get(self.func)
        extents = dict(zip(grid["vars"], grid["extents"]))

        def visit(node):
            if isinstance(node, tirx.Bind) and str(node.var.name) in extents:
                self.analyzer.bind(node.var, tvm.ir.Range(0, extents[str(node.var.name)]))
            elif isinstance(node, tirx.For) and match(node) is None:
                extent = node.extent
                if not isinstance(extent, tirx.IntImm):
                    extent = i32(max(1, self.analyzer.const_int_bound(extent).max_value))
                self.analyzer.bind(node.loop_var, tvm.ir.Range(node.min, node.min + extent))
        tvm_ffi.structural_walk(self.func.body, [((tirx.For, tirx.Bind), visit)], order="pre")

    # ---- tables, staging CBs -------------------------------------------------------------------------------------
    def table(self, atom: Atom, mask: Mask):
        key = (atom.a, atom.b, mask.true_value, mask.false_value)
        if key not in self.tables:
            name = f"tt_mask{len(self.tables)}"
            entries = atom.hi - atom.lo + 1
            dtype = table_dtype(mask.true_value, mask.false_value)
            buf = tirx.decl_buffer((entries * TILE, TILE), dtype, name)
            self.tables[key] = buf
            self.new_params.append(buf)
            fmt = DATA_FORMATS[dtype]
            self.buffers[name] = {"role": "constant", "scope": "global", "shape": [entries * TILE, TILE],
                                  "dtype": dtype, "tile_axes": [0, 1],
                                  "generator": {"kind": "affine_mask", "row_coef": atom.a, "col_coef": atom.b,
                                                "first_offset": atom.lo, "entries": entries,
                                                "true_value": _json_float(mask.true_value),
                                                "false_value": _json_float(mask.false_value)}}
            self.layouts[name] = {"memory": "DRAM", "data_format": fmt.name, "tile_shape": [TILE, TILE],
                                  "tile_bytes": fmt.tile_bytes, "shape": [entries * TILE, TILE],
                                  "padded_shape": [entries * TILE, TILE], "tiles": [entries, 1], "tile_axes": [0, 1],
                                  "layout": self.target["dram_layout"], "page_bytes": fmt.tile_bytes,
                                  "pages": entries, "banks": self.target["dram_banks"],
                                  "tile_order": self.target["tile_order"]}
        return self.tables[key]

    def staging(self, tiles: int, mask: Mask, shape: tuple | None = None, dtype: str | None = None):
        """A staging tile of `tiles` pages (a column of 32x32 tiles, or a tile grid of `shape`) with its input CB,
        in the mask's table dtype."""
        self.count += 1
        name = f"tt_mask_s{self.count}"
        shape = shape or (tiles * TILE, TILE)
        grid = [-(-shape[0] // TILE), -(-shape[1] // TILE)]
        dtype = dtype or table_dtype(mask.true_value, mask.false_value)
        buf = tirx.decl_buffer(shape, dtype, name, scope="shared")
        fmt = DATA_FORMATS[dtype]
        index = free_cb_index({c["index"] for c in self.cbs}, self.target["num_cbs"])
        self.cbs.append({"index": index, "name": f"cb_{name}", "buffer": name, "role": "input",
                         "data_format": fmt.name, "dtype": dtype, "page_bytes": fmt.tile_bytes,
                         "num_pages": tiles * self.depth, "producer": "reader", "consumer": "compute",
                         "tiles": grid})
        self.buffers[name] = {"role": "staging", "scope": "shared", "shape": list(shape), "dtype": dtype}
        self.layouts[name] = {"memory": "L1", "data_format": fmt.name, "tile_shape": [TILE, TILE],
                              "tile_bytes": fmt.tile_bytes, "shape": list(shape),
                              "padded_shape": [d * TILE for d in grid], "tiles": grid}
        return buf, index

    # ---- lowering ----------------------------------------------------------------------------------------------
    def value_table(self, mask: Mask):
        """The table of an index value: entry n is the tile a*r + b*c + offsets[n], one entry per distinct offset."""
        (a, b), offsets = {v[:2] for v in mask.values.values()}.pop(), sorted({v[2] for v in mask.values.values()})
        key = ("value", a, b, tuple(offsets))
        if key not in self.tables:
            name = f"tt_mask{len(self.tables)}"
            extremes = [o + a * r + b * c for o in offsets for r in (0, TILE - 1) for c in (0, TILE - 1)]
            dtype = "bfloat16" if max(abs(x) for x in extremes) <= 256 else "float32"   # bf16: integers to 256
            buf = tirx.decl_buffer((len(offsets) * TILE, TILE), dtype, name)
            self.tables[key] = buf
            self.new_params.append(buf)
            fmt = DATA_FORMATS[dtype]
            self.buffers[name] = {"role": "constant", "scope": "global", "shape": [len(offsets) * TILE, TILE],
                                  "dtype": dtype, "tile_axes": [0, 1],
                                  "generator": {"kind": "affine_value", "row_coef": a, "col_coef": b,
                                                "offsets": offsets, "entries": len(offsets)}}
            self.layouts[name] = {"memory": "DRAM", "data_format": fmt.name, "tile_shape": [TILE, TILE],
                                  "tile_bytes": fmt.tile_bytes, "shape": [len(offsets) * TILE, TILE],
                                  "padded_shape": [len(offsets) * TILE, TILE], "tiles": [len(offsets), 1],
                                  "tile_axes": [0, 1], "layout": self.target["dram_layout"],
                                  "page_bytes": fmt.tile_bytes, "pages": len(offsets),
                                  "banks": self.target["dram_banks"], "tile_order": self.target["tile_order"]}
        return self.tables[key], offsets

    def value_tiles(self, mask: Mask) -> list:
        """An index value: every tile read from its entry of the value table into a staging tile, then copied."""
        table, offsets = self.value_table(mask)
        tiles = sorted(mask.values)
        dtype = str(table.dtype)
        stage, cb = self.staging(len(tiles), mask, (mask.rows, mask.cols), dtype=dtype)
        reader = [ops.call("cb_reserve_back", cb, len(tiles))]
        reader += [ops.call("read_tile", cb, n, table.name, i32(offsets.index(mask.values[t][2])), 0)
                   for n, t in enumerate(tiles)]
        reader += [ops.call("noc_async_read_barrier", cb), ops.call("cb_push_back", cb, len(tiles)),
                   ops.call("compute_receive", cb, stage.name, "", 0, 0)]
        whole = [mask.rows, mask.cols]
        return reader + [tile_call("copy", region(mask.store.buffer, [0, 0], whole), region(stage, [0, 0], whole))]

    def lower(self, loop) -> tirx.Stmt:
        mask = analyze(self.func, loop, self.analyzer)
        if mask.values is not None:
            return seq(self.value_tiles(mask))
        dst = mask.store.buffer
        targets = [dst]
        for k in range(1, mask.count):
            name = f"{dst.name}_m{k}"
            targets.append(tirx.decl_buffer((mask.rows, mask.cols), "float32", name, scope="local"))
            self.buffers[name] = {"role": "compute", "scope": "local", "shape": [mask.rows, mask.cols],
                                  "dtype": "float32"}
            self.layouts[name] = {"memory": "DST", "data_format": "Float32", "tile_shape": [TILE, TILE],
                                  "tile_bytes": DATA_FORMATS["float32"].tile_bytes, "shape": [mask.rows, mask.cols],
                                  "padded_shape": [-(-mask.rows // TILE) * TILE, -(-mask.cols // TILE) * TILE],
                                  "tiles": [-(-mask.rows // TILE), -(-mask.cols // TILE)]}
        out = []
        for k, target in enumerate(targets):
            out += self.atom_tiles(k, mask, target)
        if mask.combine is not None:
            whole = region(dst, [0, 0], [mask.rows, mask.cols])
            for tmp in targets[1:]:
                out.append(tile_call(mask.combine, whole, whole, region(tmp, [0, 0], [mask.rows, mask.cols])))
        return seq(out)

    def offset(self, mask: Mask, k: int, ti: int, tj: int) -> tuple:
        """(atom k inside tile (ti, tj), that tile's table offset d')."""
        atom = mask.tile_atoms[(ti, tj)][k]
        return atom, self.analyzer.simplify(atom.d + TILE * (atom.a * ti + atom.b * tj))

    def read_if_needed(self, cb: int, page: int, table, atom: Atom, offset):
        """The reader's statement for one tile: its table entry read into page `page` only when the tile is neither
        all true nor all false (lo < d' < hi); None when the analyzer proves it never is."""
        bound = self.analyzer.const_int_bound(offset)
        if bound.min_value >= atom.hi or bound.max_value <= atom.lo:
            return None
        # the entry clamped to the range the branch takes (a no-op there) to show TTPadTiles it is in the table
        entry = tirx.max(tirx.min(offset, i32(atom.hi - 1)), i32(atom.lo + 1)) - atom.lo
        read = ops.call("read_tile", cb, page, table.name, self.analyzer.simplify(entry), 0)
        needed = self.analyzer.simplify(tirx.And(offset > atom.lo, offset < atom.hi))
        return read if self.analyzer.can_prove(needed) else tirx.IfThenElse(needed, read, None)

    @staticmethod
    def selection(mask: Mask, atom: Atom, offset, row_step: int = 0, col_step: int = 0) -> MaskSelect:
        return MaskSelect(offset, row_step, col_step, atom.lo, atom.hi, mask.true_value, mask.false_value)

    def atom_tiles(self, k: int, mask: Mask, target) -> list:
        """Atom k of the mask into `target`, tile by tile: a fill where the analyzer proves the tile constant, else
        a copy that takes the tile's page of the atom's table where the tile is neither all true nor all false and
        fills it with the constant otherwise (MaskSelect: the reader reads only those pages; tiles whose atoms
        differ in shape read from their own tables)."""
        fills, reads = [], []
        for ti in range(-(-mask.rows // TILE)):
            for tj in range(-(-mask.cols // TILE)):
                atom, offset = self.offset(mask, k, ti, tj)
                h, w = min(TILE, mask.rows - ti * TILE), min(TILE, mask.cols - tj * TILE)
                tile = region(target, [ti * TILE, tj * TILE], [h, w])
                bound = self.analyzer.const_int_bound(offset)
                if bound.min_value >= atom.hi:
                    fills.append(_fill(tile, mask.true_value))
                elif bound.max_value <= atom.lo:
                    fills.append(_fill(tile, mask.false_value))
                else:
                    reads.append((tile, h, w, offset, atom))
        if not reads:
            if len(fills) > WHOLE_FROM and len({_fill_value(f) for f in fills}) == 1:
                return [_fill(region(target, [0, 0], [mask.rows, mask.cols]), _fill_value(fills[0]))]
            if len(fills) <= WHOLE_FROM:
                return fills
        if len(fills) + len(reads) > WHOLE_FROM:
            return self.whole_tiles(k, mask, target)
        stage, cb = self.staging(len(reads), mask)
        reader = [ops.call("cb_reserve_back", cb, len(reads))]
        reader += [self.read_if_needed(cb, n, self.table(atom, mask), atom, offset)
                   for n, (_, _, _, offset, atom) in enumerate(reads)]
        reader += [ops.call("noc_async_read_barrier", cb), ops.call("cb_push_back", cb, len(reads)),
                   ops.call("compute_receive", cb, stage.name, "", 0, 0)]
        moves = [tile_call("copy", tile, region(stage, [n * TILE, 0], [h, w]),
                           config=self.selection(mask, atom, offset).config())
                 for n, (tile, h, w, offset, atom) in enumerate(reads)]
        return fills + reader + moves

    def whole_selection(self, mask: Mask, offsets: dict) -> MaskSelect | None:
        """One MaskSelect for the whole mask when its tiles' offsets are one affine function of the tile indices
        (every condition `a*i + b*j + d >= 0`: d' = d + 32*a*ti + 32*b*tj) and its atoms one shape; else None."""
        atoms = {(atom.a, atom.b, atom.lo, atom.hi) for atom, _ in offsets.values()}
        if len(atoms) != 1:
            return None
        atom, base = offsets[(0, 0)]
        row, col = TILE * atom.a, TILE * atom.b
        for (ti, tj), (_, offset) in offsets.items():
            if not self.analyzer.can_prove(offset - (base + row * ti + col * tj) == 0):
                return None
        return self.selection(mask, atom, base, row, col)

    def whole_tiles(self, k: int, mask: Mask, target) -> list:
        """A mask of more tiles than the smallest DST holds, written by one op: the tiles that are neither all true
        nor all false read from the atom's table into a staging tile of the mask's shape, then one copy that takes
        those pages and fills the others (MaskSelect; each tile's copy would be a DST window over a buffer that does
        not fit DST). Tiles whose offsets are not one affine function of the tile indices are all read (a constant
        tile from its all-true or all-false entry) and copied whole."""
        tiles = [(ti, tj) for ti in range(-(-mask.rows // TILE)) for tj in range(-(-mask.cols // TILE))]
        offsets = {t: self.offset(mask, k, *t) for t in tiles}
        select = self.whole_selection(mask, offsets)
        stage, cb = self.staging(len(tiles), mask, (mask.rows, mask.cols))
        reader = [ops.call("cb_reserve_back", cb, len(tiles))]
        for n, t in enumerate(tiles):
            atom, offset = offsets[t]
            table = self.table(atom, mask)
            if select is not None:
                read = self.read_if_needed(cb, n, table, atom, offset)
                reader += [read] if read is not None else []
                continue
            entry = self.analyzer.simplify(tirx.max(tirx.min(offset, i32(atom.hi)), i32(atom.lo)) - atom.lo)
            reader.append(ops.call("read_tile", cb, n, table.name, entry, 0))
        reader += [ops.call("noc_async_read_barrier", cb), ops.call("cb_push_back", cb, len(tiles)),
                   ops.call("compute_receive", cb, stage.name, "", 0, 0)]
        whole = [mask.rows, mask.cols]
        config = select.config() if select is not None else None
        return reader + [tile_call("copy", region(target, [0, 0], whole), region(stage, [0, 0], whole),
                                   config=config)]

    def run(self):
        found = []
        tvm_ffi.structural_walk(self.func.body, (tirx.For, lambda s: found.append(s) if match(s) else None),
                                order="pre")
        if not found:
            return self.func
        self.bind_ranges()
        body = tvm_ffi.structural_mutate(self.func.body, [(tirx.For, lambda s, m: self.lower(s) if match(s) is not None
                                                           else m.default_mutate(s))])
        func = tirx.PrimFunc(list(self.func.params) + self.new_params, body, attrs=self.func.attrs)
        return attrs.put(func, {attrs.BUFFERS: self.buffers, attrs.LAYOUT_DESC: self.layouts,
                                attrs.CB_CONFIG: sorted(self.cbs, key=lambda c: c["index"])})


def table_dtype(*values: float) -> str:
    """bfloat16 when every value of the mask is one exactly (0, 1, -inf, ...: half the bytes of float32 to read and
    stage, the same values once copied into the float32 tile), else float32."""
    exact = all(np.float32(v).view(np.uint32) & 0xFFFF == 0 for v in values)
    return "bfloat16" if exact else "float32"


def _fill_value(fill) -> float:
    return 0.0 if fill.op.name.endswith("zero") else float(fill.args[1].value)


def _fill(tile, value: float):
    if value == 0.0:
        return tile_call("zero", tile)
    return tile_call("fill", tile, tirx.FloatImm("float32", value))


@tirx.transform.prim_func_pass(opt_level=0, name="TTLowerIndexMasks")
def lower_index_masks(func, mod, ctx):
    return MaskLowering(func).run()
