"""TTSerializeAccumulation: outputs that several blocks add into (TileLang's `T.atomic_add`) get one core per tile.

A GPU adds into such an output with atomics; Tensix cores have none between them. Instead every block that may
touch a tile of an accumulated output (`tt.accumulate`: read, added to, written back) runs on the same core, in
order, so each read sees the previous block's write (the writer RISC reads the tile after its own write barrier;
TTLowerToCircularBuffers). The result is the sum in block order -- the order the reference runs the blocks in.

Which blocks may share a tile is decided per accumulated buffer and axis: an axis whose region starts depend only
on block indices *separates* blocks when distinct starts are at least a region's extent apart; blocks that agree
on every separating axis may meet (loop-dependent axes are wildcards). The groups of blocks that may meet
(transitively) must be runs of consecutive blocks of one length for a core's contiguous walk: the grid's axes are
reordered (a block's number is row-major in the cta_id order) to the order that gives the most groups; when no
order does, the whole grid is one group on one core. Records `tt.serial_group` (blocks per group) and rewrites the
cta_id order; the blocking stays as written (TTChooseBlocks) and the partition contiguous along groups
(TTPartitionWork).
"""
from __future__ import annotations

import itertools

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx
from tvm.tirx import exec_scope

from .. import attrs
from ..ir import op_name, region_of

_NUMPY_BINARY = {
    tirx.Add: np.add, tirx.Sub: np.subtract, tirx.Mul: np.multiply, tirx.FloorDiv: np.floor_divide,
    tirx.FloorMod: np.mod, tirx.Min: np.minimum, tirx.Max: np.maximum,
}


def evaluate_blocks(expr, env: dict):
    """An index expression of the block indices, for every block at once (env: Var name -> int64 array)."""
    if isinstance(expr, tirx.IntImm):
        return np.int64(expr.value)
    if isinstance(expr, (tvm.ir.Var, tirx.Var)):
        return env[str(expr.name)]
    if isinstance(expr, tirx.Cast):
        return evaluate_blocks(expr.value, env)
    fn = _NUMPY_BINARY.get(type(expr))
    if fn is None:
        raise TypeError(f"cannot evaluate {type(expr).__name__}: {expr}")
    return fn(evaluate_blocks(expr.a, env), evaluate_blocks(expr.b, env))


def _free_vars(expr) -> set[str]:
    found: set[str] = set()
    tvm_ffi.structural_walk(expr, [(tirx.Var, lambda v: found.add(str(v.name)))], order="pre")
    return found


def accesses(body, names: set[str]) -> dict[str, list]:
    """buffer -> [region] of every tile op touching an accumulated buffer."""
    out: dict[str, list] = {}

    def visit(call):
        for arg in call.args[:2] if op_name(call) in ("copy", "cast") else call.args:
            r = region_of(arg)
            if r is not None and r.name in names:
                out.setdefault(r.name, []).append(r)
    tvm_ffi.structural_walk(body, [(tirx.TilePrimitiveCall, visit)], order="pre")
    return out


def _components(keys: list[np.ndarray], n: int) -> np.ndarray:
    """Connected components of the blocks, joined when any key array gives them one value: a label per block."""
    labels = np.arange(n, dtype=np.int64)
    inverses = [np.unique(k, axis=0, return_inverse=True)[1].reshape(-1) for k in keys]
    while True:
        before = labels
        for inv in inverses:
            low = np.full(int(inv.max()) + 1, n, dtype=np.int64)
            np.minimum.at(low, inv, labels)
            labels = np.minimum(labels, low[inv])
        labels = labels[labels]
        if np.array_equal(labels, before):
            return labels


def group_size(labels: np.ndarray, linear: np.ndarray) -> int | None:
    """Blocks per group when every group is a run of consecutive block numbers of one length, else None."""
    _, inverse, counts = np.unique(labels, return_inverse=True, return_counts=True)
    low = np.full(len(counts), linear.max() + 1)
    high = np.full(len(counts), -1)
    np.minimum.at(low, inverse, linear)
    np.maximum.at(high, inverse, linear)
    if not np.all(high - low + 1 == counts) or len(set(counts.tolist())) != 1:
        return None
    return int(counts[0])


class Serializer:
    def __init__(self, func):
        self.func = func
        self.names = set(attrs.ACCUMULATE.get(func))
        grid = attrs.GRID.get(func)
        self.vars, self.extents = list(grid["vars"]), list(grid["extents"])

    def keys(self) -> list[np.ndarray]:
        """Per accumulated buffer, each block's value on the buffer's separating axes (one array per access)."""
        n = int(np.prod(self.extents))
        coords = np.unravel_index(np.arange(n), self.extents)
        env = {v: coords[k].astype(np.int64) for k, v in enumerate(self.vars)}
        out = []
        for name, regions in accesses(self.func.body, self.names).items():
            rank = len(regions[0].starts)
            separating = [a for a in range(rank) if all(_free_vars(r.starts[a]) <= set(self.vars) for r in regions)]
            values = {a: [np.broadcast_to(evaluate_blocks(r.starts[a], env), (n,)) for r in regions]
                      for a in separating}
            for a in list(separating):   # distinct starts must be a region's extent apart for the axis to separate
                starts = np.unique(np.concatenate(values[a]))
                if len(starts) > 1 and np.diff(starts).min() < max(r.extents[a] for r in regions):
                    separating.remove(a)
            for k in range(len(regions)):
                key = np.stack([values[a][k] for a in separating], axis=1) if separating \
                    else np.zeros((n, 1), dtype=np.int64)
                out.append(key)
        return out

    def choose(self) -> tuple[list[int], int]:
        """(the grid order as a permutation of the cta_id axes, blocks per group)."""
        n = int(np.prod(self.extents))
        labels = _components(self.keys(), n)
        coords = np.unravel_index(np.arange(n), self.extents)
        best = (list(range(len(self.extents))), n)
        for order in itertools.permutations(range(len(self.extents))):
            linear = np.ravel_multi_index([coords[k] for k in order], [self.extents[k] for k in order])
            size = group_size(labels, linear)
            if size is not None and size < best[1]:
                best = (list(order), size)
        return best

    def run(self):
        order, size = self.choose()
        func = self.func
        if order != list(range(len(order))):
            def scope_id(s):
                d = getattr(s, "def")
                parent, cur = exec_scope._SCOPE_BINDING_TO_PARENT_CUR[d.scope]
                ids, extents = list(d.def_ids), list(d.extents)
                return tirx.ScopeIdDefStmt(exec_scope.ScopeIdDef([ids[k] for k in order], [extents[k] for k in order],
                                                                 parent, cur), span=s.span)
            func = func.with_body(tvm_ffi.structural_map(func.body, [(tirx.ScopeIdDefStmt, scope_id)], order="post"))
        grid = {"vars": [self.vars[k] for k in order], "extents": [self.extents[k] for k in order]}
        return attrs.put(func, {attrs.GRID: grid, attrs.SERIAL_GROUP: size})


@tirx.transform.prim_func_pass(opt_level=0, name="TTSerializeAccumulation")
def serialize_accumulation(func, mod, ctx):
    if not attrs.ACCUMULATE.get(func, []):
        return func
    return Serializer(func).run()

