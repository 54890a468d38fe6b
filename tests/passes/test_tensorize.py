"""TTTensorize: where each computed value lives and which calls compute it, on small kernels.

One planner for every kernel shape: an accumulator that fits DST stays there across its K loop and its epilogue;
a value the FPU reads (a reduction source, a matmul operand, a broadcast) is packed to its own CB first; values
wider than DST are processed a group of tile positions at a time.

Each `before` is the compute side of a block loop as it reaches TTTensorize (tile ops between the reader's
`compute_receive` and the writer's `compute_send` markers) with the attributes the pass reads: tt.buffers (role,
dtype), tt.layout_desc (tiles), tt.cb_config (staging and output CBs so far) and tt.target (fp32 accumulation:
DST holds 4 tiles half-synced). The kernels run end to end, on the emulator, in test_pipeline.py."""
from __future__ import annotations

import pytest
from tvm import tirx
from tvm.script import tirx as T

from compiler.errors import CompileError
from compiler.ir import op_name, stmts_of
from compiler.passes import tensorize as tensorize_module
from compiler.passes.tensorize import plan as plan_module
from compiler.passes.tensorize import tensorize
from compiler.passes.tensorize.plan import LoopItem, Planner, Window, cb_resident, hoist_copies, op_info
from compiler.target import DATA_FORMATS

from .helpers import assert_ir_equal, run, target_attr

SCOPES = {"input": "global", "output": "global", "staging": "shared", "compute": "local"}


def tensorize_attrs(buffers: dict, cbs: list) -> dict:
    """The attributes TTTensorize reads. `buffers`: name -> (role, dtype, tiles); `cbs`: (index, buffer, pages) of
    the staging (input) and output CBs TTLowerToCircularBuffers made."""
    def cb(index, buffer, pages):
        role, dtype, tiles = buffers[buffer]
        fmt, staged = DATA_FORMATS[dtype], role == "staging"
        return {"index": index, "name": f"cb_{buffer}", "buffer": buffer, "role": "input" if staged else "output",
                "data_format": fmt.name, "dtype": dtype, "page_bytes": fmt.tile_bytes, "num_pages": pages,
                "producer": "reader" if staged else "compute", "consumer": "compute" if staged else "writer",
                "tiles": list(tiles) if staged else None}
    return {"tt.buffers": {n: {"role": role, "scope": SCOPES[role], "dtype": dtype, "shape": [32 * r, 32 * c]}
                           for n, (role, dtype, (r, c)) in buffers.items()},
            "tt.layout_desc": {n: {"tiles": list(tiles)} for n, (_, _, tiles) in buffers.items()},
            "tt.cb_config": [cb(*c) for c in cbs],
            "tt.target": target_attr()}


GEMM_EPILOGUE = tensorize_attrs(
    {"A_s": ("staging", "float16", (1, 1)), "B_s": ("staging", "float16", (1, 1)),
     "bias_s": ("staging", "float32", (1, 1)), "C_l": ("compute", "float32", (1, 1)),
     "C": ("output", "float32", (2, 2))},
    [(0, "A_s", 2), (1, "B_s", 2), (2, "bias_s", 2), (16, "C", 2)])


def gemm_epilogue(zero: bool = True):
    """C = max(A @ B + bias, 0) on one 32x32 tile per block, K in two steps; `zero`: C_l zeroed before its K loop."""
    @T.prim_func
    def before(block_count: T.int32):
        T.func_attr(GEMM_EPILOGUE)
        A_s = T.alloc_shared((32, 32), "float16")
        B_s = T.alloc_shared((32, 32), "float16")
        bias_s = T.alloc_shared((32, 32), "float32")
        C_l = T.alloc_local((32, 32), "float32")
        for i in range(block_count):
            by: T.let[T.int32] = i // 2
            bx: T.let[T.int32] = i % 2
            if zero:
                T.tile.zero(C_l[0:32, 0:32])
            for k in range(2):
                T.tt.compute_receive(0, "A_s", "A", by, k)
                T.tt.compute_receive(1, "B_s", "B", k, bx)
                T.tile.gemm(C_l[0:32, 0:32], A_s[0:32, 0:32], B_s[0:32, 0:32], C_l[0:32, 0:32], False, False,
                            T.float32(1.0), T.float32(1.0))
            T.tt.compute_receive(2, "bias_s", "bias", by, bx)
            T.tile.add(C_l[0:32, 0:32], C_l[0:32, 0:32], bias_s[0:32, 0:32])
            T.tile.maximum(C_l[0:32, 0:32], C_l[0:32, 0:32], T.float32(0.0))
            T.tt.compute_send(16, "C_l", 0, 0, 1, 1, "C", by, bx)
    return before


GEMM_EPILOGUE_AFTER = {**GEMM_EPILOGUE, "tt.compute_config": {
    "fp32_dest_acc_en": True, "dst_full_sync_en": False, "math_fidelity": "HiFi4", "dst_capacity": 4,
    "math_approx_mode": False, "unpack_to_dest_fp32_cbs": [2]}}


def test_gemm_and_its_epilogue_share_one_dst_window():
    """The accumulator stays in DST slot 0 across its K loop and the epilogue (bias copied into scratch slot 1, an
    SFPU add, an SFPU max), packed once to C's CB: no intermediate CB. bias's fp32 CB feeds only copy_tile, so it
    unpacks straight to DST."""
    @T.prim_func
    def expected(block_count: T.int32):
        T.func_attr(GEMM_EPILOGUE_AFTER)
        T.tt.hw_startup_matmul(0, 1, 16)
        for i in range(block_count):
            by: T.let[T.int32] = i // 2
            bx: T.let[T.int32] = i % 2
            T.tt.tile_regs_acquire()
            for k in range(2):
                T.tt.cb_wait_front(0, 1)
                T.tt.page_expect(0, 0, "A", by, k)
                T.tt.cb_wait_front(1, 1)
                T.tt.page_expect(1, 0, "B", k, bx)
                T.tt.matmul_init(0, 1, 0)
                T.tt.matmul_tiles(0, 1, 0, 0, 0)
                T.tt.cb_pop_front(0, 1)
                T.tt.cb_pop_front(1, 1)
            T.tt.cb_wait_front(2, 1)
            T.tt.page_expect(2, 0, "bias", by, bx)
            T.tt.copy_init(2)
            T.tt.copy_tile(2, 0, 1)                     # bias into the scratch slot
            T.tt.add_binary_tile_init()
            T.tt.add_binary_tile(0, 1, 0)
            T.tt.unary_max_tile_init()
            T.tt.unary_max_tile(0, T.uint32(0))         # max(x, 0.0): the bits of 0.0f
            T.tt.tile_regs_commit()
            T.tt.tile_regs_wait()
            T.tt.pack_reconfig_data_format(16)
            T.tt.cb_reserve_back(16, 1)
            T.tt.pack_tile(0, 16, 0)
            T.tt.page_tag("C", by, bx)                  # lands at page 0: C's (by, bx)
            T.tt.cb_push_back(16, 1)
            T.tt.tile_regs_release()
            T.tt.cb_pop_front(2, 1)

    assert_ir_equal(run(tensorize, gemm_epilogue())["main"], expected)


def test_reading_an_uninitialized_tile_is_located_at_the_reader():
    with pytest.raises(CompileError) as info:
        run(tensorize, gemm_epilogue(zero=False))
    assert "`C_l` is read before it is initialized" in info.value.message


def block_of(func):
    """The block loop's body: the statements TTTensorize plans."""
    loop = next(s for s in stmts_of(func.body) if isinstance(s, tirx.For))
    return [s for s in stmts_of(loop.body) if not isinstance(s, tirx.Bind)]


def plan_of(func):
    """(windows and loops, CB-resident buffers) the planner makes for TTTensorize's input `func` (DST: 4 tiles)."""
    buffers, layouts = func.attrs["tt.buffers"], func.attrs["tt.layout_desc"]
    tiles = {n: tuple(int(t) for t in layouts[n]["tiles"]) for n in buffers if buffers[n]["scope"] != "global"}
    roles = {n: str(b["role"]) for n, b in buffers.items()}
    items = Planner(4, tiles, roles).plan(block_of(func))
    return items, cb_resident(items, lambda n: roles.get(n) == "compute", tiles)


ATTENTION = tensorize_attrs(
    {"q": ("staging", "float16", (1, 1)), "k": ("staging", "float16", (1, 1)), "v": ("staging", "float16", (1, 1)),
     "s": ("compute", "float32", (1, 1)), "p": ("compute", "float16", (1, 1)), "acc": ("compute", "float32", (1, 1)),
     "m": ("compute", "float32", (1, 1)), "m_prev": ("compute", "float32", (1, 1)),
     "alpha": ("compute", "float32", (1, 1)), "l": ("compute", "float32", (1, 1)),
     "O": ("output", "float32", (2, 1))},
    [(0, "q", 2), (1, "k", 2), (2, "v", 2), (16, "O", 2)])


@T.prim_func
def attention(block_count: T.int32):
    """Online-softmax attention, one 32-row block of Q against four 32-row blocks of K and V."""
    T.func_attr(ATTENTION)
    q = T.alloc_shared((32, 32), "float16")
    k = T.alloc_shared((32, 32), "float16")
    v = T.alloc_shared((32, 32), "float16")
    s = T.alloc_local((32, 32), "float32")
    p = T.alloc_local((32, 32), "float16")
    acc = T.alloc_local((32, 32), "float32")
    m = T.alloc_local((32, 1), "float32")
    m_prev = T.alloc_local((32, 1), "float32")
    alpha = T.alloc_local((32, 1), "float32")
    l = T.alloc_local((32, 1), "float32")
    for bx in range(block_count):
        T.tt.compute_receive(0, "q", "Q", bx, 0)
        T.tile.zero(acc[0:32, 0:32])
        T.tile.zero(l[0:32, 0])
        T.tile.fill(m[0:32, 0], T.float32("-inf"))
        for j in range(4):
            T.tt.compute_receive(1, "k", "K", j, 0)
            T.tile.gemm(s[0:32, 0:32], q[0:32, 0:32], k[0:32, 0:32], s[0:32, 0:32], False, True, T.float32(1.0),
                        T.float32(0.0))
            T.tile.copy(m_prev[0:32, 0], m[0:32, 0])
            T.tile.max(m[0:32, 0], s[0:32, 0:32], [-1], True)
            T.tile.sub(alpha[0:32, 0], m_prev[0:32, 0], m[0:32, 0])
            T.tile.exp(alpha[0:32, 0])
            T.tile.sub(s[0:32, 0:32], s[0:32, 0:32], m[0:32, 0])
            T.tile.exp(s[0:32, 0:32])
            T.tile.mul(l[0:32, 0], l[0:32, 0], alpha[0:32, 0])
            T.tile.sum(l[0:32, 0], s[0:32, 0:32], [-1], True)
            T.tile.cast(p[0:32, 0:32], s[0:32, 0:32])
            T.tile.mul(acc[0:32, 0:32], acc[0:32, 0:32], alpha[0:32, 0])
            T.tt.compute_receive(2, "v", "V", j, 0)
            T.tile.gemm(acc[0:32, 0:32], p[0:32, 0:32], v[0:32, 0:32], acc[0:32, 0:32], False, False, T.float32(1.0),
                        T.float32(1.0))
        T.tile.mul(acc[0:32, 0:32], acc[0:32, 0:32], T.float32(1.0))
        T.tt.compute_send(16, "acc", 0, 0, 1, 1, "O", bx, 0)


def test_attention_values_the_fpu_reads_and_loop_carried_values_live_in_cbs():
    items, resident = plan_of(attention)
    # s feeds a reduction and a broadcast subtraction; p feeds the second matmul; acc, m, l carry over iterations;
    # m (broadcast) and alpha (broadcast) are FPU operands too
    assert {"s", "p", "acc", "m", "l", "alpha"} <= resident
    loop = next(i for i in items if isinstance(i, LoopItem))
    windows = [w for w in loop.body if isinstance(w, Window)]
    for w in windows:   # nothing the FPU reads in a window was computed in that same window
        written = set()
        for kind, *rest in w.items:
            if kind == "op":
                info = rest[0]
                assert not [o for o in info.operands if o.fpu and o.region is not None and o.region.name in written]
                written.add(info.dst.name)
    after = run(tensorize, attention)["main"]
    intermediates = {str(c["buffer"]) for c in after.attrs["tt.cb_config"] if c["role"] == "intermediate"}
    assert resident <= intermediates   # each resident value got its CB


SPLIT_ATTENTION = tensorize_attrs(
    {"q": ("staging", "float16", (1, 1)), "k": ("staging", "float16", (1, 1)), "v": ("staging", "float16", (1, 1)),
     "s": ("compute", "float32", (1, 1)), "p": ("compute", "float16", (1, 1)), "acc": ("compute", "float32", (1, 1)),
     "m": ("compute", "float32", (1, 1)), "m_prev": ("compute", "float32", (1, 1)),
     "alpha": ("compute", "float32", (1, 1)), "l": ("compute", "float32", (1, 1)), "t": ("compute", "float32", (1, 1)),
     "O": ("output", "float32", (2, 1))},
    [(0, "q", 2), (1, "k", 2), (2, "v", 2), (16, "O", 2)])


def attention_split_in_two():
    """`attention` with its key loop split as TTLowerIndexMasks splits a causal one: the same step over keys 0-1,
    then 2-3, alpha computed in a temporary t."""
    @T.macro
    def step(j, q, k, v, s, p, acc, m, m_prev, alpha, l, t):
        T.tt.compute_receive(1, "k", "K", j, 0)
        T.tile.gemm(s[0:32, 0:32], q[0:32, 0:32], k[0:32, 0:32], s[0:32, 0:32], False, True, T.float32(1.0),
                    T.float32(0.0))
        T.tile.copy(m_prev[0:32, 0], m[0:32, 0])
        T.tile.max(m[0:32, 0], s[0:32, 0:32], [-1], True)
        T.tile.sub(t[0:32, 0], m_prev[0:32, 0], m[0:32, 0])
        T.tile.exp(t[0:32, 0])
        T.tile.copy(alpha[0:32, 0], t[0:32, 0])
        T.tile.sub(s[0:32, 0:32], s[0:32, 0:32], m[0:32, 0])
        T.tile.exp(s[0:32, 0:32])
        T.tile.mul(l[0:32, 0], l[0:32, 0], alpha[0:32, 0])
        T.tile.sum(l[0:32, 0], s[0:32, 0:32], [-1], True)
        T.tile.cast(p[0:32, 0:32], s[0:32, 0:32])
        T.tile.mul(acc[0:32, 0:32], acc[0:32, 0:32], alpha[0:32, 0])
        T.tt.compute_receive(2, "v", "V", j, 0)
        T.tile.gemm(acc[0:32, 0:32], p[0:32, 0:32], v[0:32, 0:32], acc[0:32, 0:32], False, False, T.float32(1.0),
                    T.float32(1.0))

    @T.prim_func
    def split(block_count: T.int32):
        T.func_attr(SPLIT_ATTENTION)
        q = T.alloc_shared((32, 32), "float16")
        k = T.alloc_shared((32, 32), "float16")
        v = T.alloc_shared((32, 32), "float16")
        s = T.alloc_local((32, 32), "float32")
        p = T.alloc_local((32, 32), "float16")
        acc = T.alloc_local((32, 32), "float32")
        m = T.alloc_local((32, 1), "float32")
        m_prev = T.alloc_local((32, 1), "float32")
        alpha = T.alloc_local((32, 1), "float32")
        l = T.alloc_local((32, 1), "float32")
        t = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "q", "Q", bx, 0)
            T.tile.zero(acc[0:32, 0:32])
            T.tile.zero(l[0:32, 0])
            T.tile.fill(m[0:32, 0], T.float32("-inf"))
            for j in range(2):
                step(j, q, k, v, s, p, acc, m, m_prev, alpha, l, t)
            for j in range(2, 4):
                step(j, q, k, v, s, p, acc, m, m_prev, alpha, l, t)
            T.tile.mul(acc[0:32, 0:32], acc[0:32, 0:32], T.float32(1.0))
            T.tt.compute_send(16, "acc", 0, 0, 1, 1, "O", bx, 0)
    return split


def test_a_temporary_of_a_loop_split_in_two_stays_in_dst():
    """t is written whole before it is read in each of the two loops' windows: no value crosses windows, so it
    lives in DST in each (it got a CB, packed every step, when it was in two windows); what the loops carry (m, l,
    acc), what the FPU reads (s, p, alpha) and m_prev (copied in one window, read in the next) keep their CBs."""
    _, resident = plan_of(attention_split_in_two())
    assert "t" not in resident
    assert {"s", "p", "acc", "m", "l", "alpha", "m_prev"} <= resident
    after = run(tensorize, attention_split_in_two())["main"]
    intermediates = {str(c["buffer"]) for c in after.attrs["tt.cb_config"] if c["role"] == "intermediate"}
    assert "t" not in intermediates and resident <= intermediates


WIDE = tensorize_attrs(
    {"A_s": ("staging", "float32", (4, 4)), "x": ("compute", "float32", (4, 4)), "y": ("compute", "float32", (4, 4)),
     "C": ("output", "float32", (4, 4))},
    [(0, "A_s", 32), (16, "C", 16)])


@T.prim_func
def wide(block_count: T.int32):
    """y = exp(A) * 2 + exp(A) on 128x128 blocks: 16 tiles of x and of y, DST holds 4."""
    T.func_attr(WIDE)
    A_s = T.alloc_shared((128, 128), "float32")
    x = T.alloc_local((128, 128), "float32")
    y = T.alloc_local((128, 128), "float32")
    for i in range(block_count):
        T.tt.compute_receive(0, "A_s", "A", 0, 0)
        T.tile.exp(x[0:128, 0:128], A_s[0:128, 0:128])
        T.tile.mul(y[0:128, 0:128], x[0:128, 0:128], T.float32(2.0))
        T.tile.add(y[0:128, 0:128], y[0:128, 0:128], x[0:128, 0:128])
        T.tt.compute_send(16, "y", 0, 0, 4, 4, "C", 0, 0)


def test_values_wider_than_dst_are_processed_a_group_of_positions_at_a_time():
    items, resident = plan_of(wide)
    (window,) = [i for i in items if isinstance(i, Window)]
    assert not window.flat and window.grid == (4, 4) and resident == set()   # 16 tiles of x and y, DST holds 4
    after = run(tensorize, wide)["main"]
    loop = next(s for s in stmts_of(after.body) if isinstance(s, tirx.For))
    groups = [s for s in stmts_of(loop.body) if isinstance(s, tirx.For) and str(s.loop_var.name) == "g"]
    # two positions per group: x and y each, no scratch slot (`y = y + x` reads both from DST: tensorize/plan.py)
    assert len(groups) == 1 and int(groups[0].extent) == 8


def test_a_copy_of_a_computed_value_moves_up_to_the_op_that_computes_it():
    """`T.tile.cast(p, s)` after the row sum of s and l's update: moved to just after `exp(s)` (nothing between
    touches p or writes s), where its window packs s's DST slots to p's CB as well (no copy, no slot of its own)."""
    kloop = next(s for s in block_of(attention) if isinstance(s, tirx.For))
    body = stmts_of(kloop.body)
    names = lambda stmts: [op_name(s) for s in stmts if isinstance(s, tirx.TilePrimitiveCall)]   # noqa: E731
    moved, ids = hoist_copies(body)
    assert len(ids) == 1 and sorted(map(id, moved)) == sorted(map(id, body))
    old, new = names(body), names(moved)
    assert old[old.index("cast") - 3:old.index("cast") + 1] == ["exp", "mul", "sum", "cast"]
    assert new[new.index("cast") - 1:new.index("cast") + 3] == ["exp", "cast", "mul", "sum"]
    items, _ = plan_of(attention)
    loop = next(i for i in items if isinstance(i, LoopItem))
    (window,) = [w for w in loop.body if isinstance(w, Window) and w.aliases]
    assert window.aliases == {"p": "s"} and "p" in window.written and "p" not in window.dst_buffers()


READ_THEN_REPLACED = tensorize_attrs(
    {"x": ("staging", "float32", (1, 1)), "y": ("compute", "float32", (1, 1)), "t": ("compute", "float32", (1, 1)),
     "r": ("compute", "float32", (1, 1)), "Y": ("output", "float32", (2, 2))},
    [(0, "x", 2), (16, "Y", 2)])


@T.prim_func
def read_then_replaced(block_count: T.int32):
    """y = exp(x); t = y - rowsum(y) / 4; y = t, per tile of a column of blocks."""
    T.func_attr(READ_THEN_REPLACED)
    x = T.alloc_shared((32, 32), "float32")
    y = T.alloc_local((32, 32), "float32")
    t = T.alloc_local((32, 32), "float32")
    r = T.alloc_local((32, 1), "float32")
    for bx in range(block_count):
        for j in range(2):
            T.tt.compute_receive(0, "x", "X", j, bx)
            T.tile.exp(y[0:32, 0:32], x[0:32, 0:32])
            T.tile.sum(r[0:32, 0], y[0:32, 0:32], [-1], False)
            T.tile.mul(t[0:32, 0:32], r[0:32, 0], T.float32(0.25))
            T.tile.sub(t[0:32, 0:32], y[0:32, 0:32], t[0:32, 0:32])
            T.tile.copy(y[0:32, 0:32], t[0:32, 0:32])
            T.tt.compute_send(16, "y", 0, 0, 1, 1, "Y", j, bx)


def test_a_copy_into_a_value_the_window_has_read_gets_its_own_slots():
    """`t = y - t; y = t` after a row sum packed y: y was read in the window, so y cannot share t's DST slots (its
    read would see t); packing t's slots to y's CB too is only for a destination the window has not touched."""
    items, _ = plan_of(read_then_replaced)
    loop = next(i for i in items if isinstance(i, LoopItem))
    windows = [w for w in loop.body if isinstance(w, Window)]
    assert any("t" in w.written and "y" in w.written for w in windows) and not [w for w in windows if w.aliases]


def dst_modes_planned(monkeypatch, func) -> tuple[list, bool]:
    """The DST modes (full sync or not) TTTensorize planned `func` in, in order, and whether it chose full sync."""
    planned, plan_in = [], tensorize_module._resident_count

    def counted(f, full_sync):
        planned.append(full_sync)
        return plan_in(f, full_sync)
    monkeypatch.setattr(tensorize_module, "_resident_count", counted)
    after = run(tensorize, func)["main"]
    return planned, bool(after.attrs["tt.compute_config"]["dst_full_sync_en"])


def test_a_kernel_that_fits_the_half_sync_dst_is_planned_once(monkeypatch):
    """Attention's 7 CB-resident values: nothing it plans overflows DST's 4 half-sync slots, so a full-sync DST (8)
    would plan the same windows and is not planned (it was, every kernel with a CB-resident value)."""
    assert dst_modes_planned(monkeypatch, attention) == ([False], False)


WIDE_GEMM = tensorize_attrs(
    {"A_s": ("staging", "float16", (2, 1)), "B_s": ("staging", "float16", (1, 2)),
     "bias_s": ("staging", "float32", (2, 2)), "C_l": ("compute", "float32", (2, 2)),
     "C": ("output", "float32", (2, 2))},
    [(0, "A_s", 4), (1, "B_s", 4), (2, "bias_s", 8), (16, "C", 8)])


@T.prim_func
def wide_gemm(block_count: T.int32):
    """C = A @ B + bias on 64x64 blocks: the accumulator's 4 tiles fill the half-sync DST, the bias needs a 5th."""
    T.func_attr(WIDE_GEMM)
    A_s = T.alloc_shared((64, 32), "float16")
    B_s = T.alloc_shared((32, 64), "float16")
    bias_s = T.alloc_shared((64, 64), "float32")
    C_l = T.alloc_local((64, 64), "float32")
    for i in range(block_count):
        T.tile.zero(C_l[0:64, 0:64])
        for k in range(2):
            T.tt.compute_receive(0, "A_s", "A", 0, k)
            T.tt.compute_receive(1, "B_s", "B", k, 0)
            T.tile.gemm(C_l[0:64, 0:64], A_s[0:64, 0:32], B_s[0:32, 0:64], C_l[0:64, 0:64], False, False,
                        T.float32(1.0), T.float32(1.0))
        T.tt.compute_receive(2, "bias_s", "bias", 0, 0)
        T.tile.add(C_l[0:64, 0:64], C_l[0:64, 0:64], bias_s[0:64, 0:64])
        T.tt.compute_send(16, "C_l", 0, 0, 2, 2, "C", 0, 0)


def test_a_kernel_that_overflows_the_half_sync_dst_is_planned_again_with_full_sync(monkeypatch):
    """The bias add does not fit beside the accumulator in 4 slots (C_l would go through a CB); in 8 it does: both
    modes planned, full sync chosen."""
    assert dst_modes_planned(monkeypatch, wide_gemm) == ([False, True], True)


def test_op_info_is_a_new_object_every_call_while_its_facts_are_remembered():
    """The planner's windows set an operand's `fpu` and the emitter keys ops by id(): op_info hands out a new OpInfo
    with new operands each call, the call's facts read once while TTTensorize runs, and forgotten when it ends."""
    loop = next(s for s in block_of(attention) if isinstance(s, tirx.For))
    call = next(s for s in stmts_of(loop.body) if isinstance(s, tirx.TilePrimitiveCall))   # s = q @ k^T
    with plan_module.op_facts_remembered():
        first, second = op_info(call), op_info(call)
        assert first is not second and first.operands[0] is not second.operands[0]
        assert (first.name, first.dst, first.grid, first.whole) == (second.name, second.dst, second.grid, second.whole)
        assert [o.region for o in first.operands] == [o.region for o in second.operands]
        first.operands[0].fpu = not second.operands[0].fpu
        assert op_info(call).operands[0].fpu == second.operands[0].fpu
        assert len(plan_module._FACTS) == 1
    run(tensorize, attention)
    assert plan_module._FACTS is None
