"""TTTensorize: where each computed value lives and which calls compute it, on small kernels.

One planner for every kernel shape: an accumulator that fits DST stays there across its K loop and its epilogue;
a value the FPU reads (a reduction source, a matmul operand, a broadcast) is packed to its own CB first; values
wider than DST are processed a group of tile positions at a time."""
from __future__ import annotations

import struct
import textwrap

import pytest
from tvm import tirx

from compiler import ops
from compiler.errors import CompileError
from compiler import attrs
from compiler.ir import seq, stmts_of
from compiler.passes.split_kernels import Splitter
from compiler.passes.tensorize.plan import LoopItem, Planner, Window, cb_resident

from .helpers import HEADER, apply, assert_equal, block_body, kernel, run_until

GEMM_EPILOGUE = kernel('''
@T.prim_func
def main(A: T.Buffer((64, 64), "float16"), B: T.Buffer((64, 64), "float16"), bias: T.Buffer((64, 64), "float32"),
         C: T.Buffer((64, 64), "float32")):
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((32, 32), "float16")
    B_s = T.alloc_shared((32, 32), "float16")
    bias_s = T.alloc_shared((32, 32), "float32")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.zero(C_l)
    for k in range(2):
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(bias_s, bias[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])
    T.tile.add(C_l, C_l, bias_s)
    T.tile.maximum(C_l, C_l, T.float32(0))
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
''')


def compute_part(func):
    """The compute kernel's side of a lowered block body, as TTSplitKernels will cut it."""
    return Splitter(attrs.CB_CONFIG.get(func)).filter(block_body(func), ops.COMPUTE)


def bits(value: float) -> tirx.IntImm:
    return tirx.IntImm("uint32", struct.unpack("<I", struct.pack("<f", value))[0])


def test_gemm_and_its_epilogue_share_one_dst_window():
    before, after = apply(GEMM_EPILOGUE, "TTTensorize")
    loop = next(s for s in block_body(before["main"]) if isinstance(s, tirx.For))
    k = loop.loop_var
    by, bx = (next(b.var for b in block_body(before["main"]) if isinstance(b, tirx.Bind) and str(b.var.name) == n)
              for n in ("by", "bx"))
    i32 = lambda v: tirx.IntImm("int32", v)   # noqa: E731
    expected = seq([
        ops.call("tile_regs_acquire"),
        tirx.For(k, 0, 2, tirx.ForKind.SERIAL, seq([
            ops.call("cb_wait_front", 0, 1), ops.call("page_expect", 0, i32(0), "A", by, k),   # A's tile (by, k)
            ops.call("cb_wait_front", 1, 1), ops.call("page_expect", 1, i32(0), "B", k, bx),
            ops.call("matmul_init", 0, 1, 0), ops.call("matmul_tiles", 0, 1, i32(0), i32(0), i32(0)),
            ops.call("cb_pop_front", 0, 1), ops.call("cb_pop_front", 1, 1)])),
        ops.call("cb_wait_front", 2, 1), ops.call("page_expect", 2, i32(0), "bias", by, bx),
        ops.call("copy_init", 2), ops.call("copy_tile", 2, i32(0), i32(1)),          # bias into the scratch slot
        ops.call("add_binary_tile_init"), ops.call("add_binary_tile", i32(0), i32(1), i32(0)),
        ops.call("unary_max_tile_init"), ops.call("unary_max_tile", i32(0), bits(0.0)),
        ops.call("tile_regs_commit"), ops.call("tile_regs_wait"),
        ops.call("pack_reconfig_data_format", 16), ops.call("cb_reserve_back", 16, 1),
        ops.call("pack_tile", i32(0), 16, i32(0)), ops.call("page_tag", "C", by, bx),   # lands at page 0: C's (by, bx)
        ops.call("cb_push_back", 16, 1),
        ops.call("tile_regs_release"),
        ops.call("cb_pop_front", 2, 1),
    ])
    assert_equal(seq([s for s in compute_part(after["main"]) if not isinstance(s, tirx.Bind)]), expected)
    assert not [c for c in after["main"].attrs["tt.cb_config"] if c["role"] == "intermediate"]


def plan_of(mod):
    """(windows and loops, CB-resident buffers) the planner makes for the module before TTTensorize."""
    before, _ = run_until(mod, "TTTensorize")
    func = before["main"]
    layouts, buffers = func.attrs["tt.layout_desc"], func.attrs["tt.buffers"]
    tiles = {n: tuple(int(t) for t in layouts[n]["tiles"]) for n in buffers if buffers[n]["scope"] != "global"}
    roles = {n: str(b["role"]) for n, b in buffers.items()}
    fp32 = bool(func.attrs["tt.target"]["fp32_accumulation"])
    loop = next(s for s in stmts_of(func.body) if isinstance(s, tirx.For))
    items = Planner(4 if fp32 else 8, tiles, roles).plan([s for s in stmts_of(loop.body) if not isinstance(s, tirx.Bind)])
    return items, cb_resident(items, lambda n: roles.get(n) == "compute", tiles)


ATTENTION = kernel('''
@T.prim_func
def main(Q: T.Buffer((64, 32), "float16"), K: T.Buffer((128, 32), "float16"), V: T.Buffer((128, 32), "float16"),
         O: T.Buffer((64, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([2])
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
    T.tile.copy(q, Q[bx * 32:bx * 32 + 32, 0:32])
    T.tile.zero(acc)
    T.tile.zero(l)
    T.tile.fill(m, T.float32("-inf"))
    for j in range(4):
        T.tile.copy(k, K[j * 32:j * 32 + 32, 0:32])
        T.tile.gemm(s, q, k, s, transpose_B=True, beta=0.0)
        T.tile.copy(m_prev, m)
        T.tile.max(m, s, axes=-1, accum=True)
        T.tile.sub(alpha, m_prev, m)
        T.tile.exp(alpha, alpha)
        T.tile.sub(s, s, m)
        T.tile.exp(s, s)
        T.tile.mul(l, l, alpha)
        T.tile.sum(l, s, axes=-1, accum=True)
        T.tile.cast(p, s)
        T.tile.mul(acc, acc, alpha)
        T.tile.copy(v, V[j * 32:j * 32 + 32, 0:32])
        T.tile.gemm(acc, p, v, acc, beta=1.0)
    T.tile.mul(acc, acc, T.float32(1.0))
    T.tile.copy(O[bx * 32:bx * 32 + 32, 0:32], acc)
''')


def test_attention_values_the_fpu_reads_and_loop_carried_values_live_in_cbs():
    items, resident = plan_of(ATTENTION)
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


def test_attention_verifies_on_the_emulator():
    from compiler.api import compile_source, emulate
    from tests.passes.helpers import HEADER
    import textwrap
    text = HEADER + textwrap.dedent(ATTENTION_TEXT)
    result = compile_source(text, filename="k.py")
    outcome = emulate(result.artifacts, source=text, filename="k.py", seed=4)
    assert outcome.passed, outcome.verification.render()


ATTENTION_TEXT = ATTENTION["main"].script()   # the same kernel, re-parsed from its printed form


def test_values_wider_than_dst_are_processed_a_group_of_positions_at_a_time():
    mod = kernel('''
    @T.prim_func
    def main(A: T.Buffer((128, 128), "float32"), C: T.Buffer((128, 128), "float32")):
        T.device_entry()
        bx = T.cta_id([1])
        A_s = T.alloc_shared((128, 128), "float32")
        x = T.alloc_local((128, 128), "float32")
        y = T.alloc_local((128, 128), "float32")
        T.tile.copy(A_s, A[0:128, 0:128])
        T.tile.exp(x, A_s)
        T.tile.mul(y, x, T.float32(2.0))
        T.tile.add(y, y, x)
        T.tile.copy(C[0:128, 0:128], y)
    ''')
    items, resident = plan_of(mod)
    (window,) = [i for i in items if isinstance(i, Window)]
    assert not window.flat and window.grid == (4, 4) and resident == set()   # 16 tiles of x and y, DST holds 4
    _, after = apply(mod, "TTTensorize")
    groups = [s for s in block_body(after["main"]) if isinstance(s, tirx.For) and str(s.loop_var.name) == "g"]
    # two positions per group: x and y each, no scratch slot (`y = y + x` reads both from DST: tensorize/plan.py)
    assert len(groups) == 1 and int(groups[0].extent) == 8


def test_reading_an_uninitialized_tile_is_located_at_the_reader():
    text = GEMM_EPILOGUE["main"].script().replace("    T.tile.zero(C_l[0:32, 0:32])\n", "")
    with pytest.raises(CompileError) as info:
        apply(kernel(text.split("\n", 3)[3] if text.startswith("#") else text), "TTTensorize")
    assert "`C_l` is read before it is initialized" in info.value.message


def test_a_copy_of_a_computed_value_moves_up_to_the_op_that_computes_it():
    """`T.tile.cast(p, s)` after the row sum of s and l's update: moved to just after `exp(s)` (nothing between
    touches p or writes s), where its window packs s's DST slots to p's CB as well (no copy, no slot of its own)."""
    from compiler.passes.tensorize.plan import hoist_copies
    from compiler.ir import op_name
    before, _ = run_until(ATTENTION, "TTTensorize")
    block = next(s for s in stmts_of(before["main"].body) if isinstance(s, tirx.For))
    kloop = next(s for s in stmts_of(block.body) if isinstance(s, tirx.For))
    body = stmts_of(kloop.body)
    names = lambda stmts: [op_name(s) for s in stmts if isinstance(s, tirx.TilePrimitiveCall)]   # noqa: E731
    moved, ids = hoist_copies(body)
    assert len(ids) == 1 and sorted(map(id, moved)) == sorted(map(id, body))
    old, new = names(body), names(moved)
    assert old[old.index("cast") - 3:old.index("cast") + 1] == ["exp", "mul", "sum", "cast"]
    assert new[new.index("cast") - 1:new.index("cast") + 3] == ["exp", "cast", "mul", "sum"]
    items, _ = plan_of(ATTENTION)
    loop = next(i for i in items if isinstance(i, LoopItem))
    (window,) = [w for w in loop.body if isinstance(w, Window) and w.aliases]
    assert window.aliases == {"p": "s"} and "p" in window.written and "p" not in window.dst_buffers()


READ_THEN_REPLACED = kernel('''
@T.prim_func
def main(X: T.Buffer((64, 64), "float32"), Y: T.Buffer((64, 64), "float32")):
    T.device_entry()
    bx = T.cta_id([2])
    x = T.alloc_shared((32, 32), "float32")
    y = T.alloc_local((32, 32), "float32")
    t = T.alloc_local((32, 32), "float32")
    r = T.alloc_local((32, 1), "float32")
    for j in range(2):
        T.tile.copy(x, X[j * 32:j * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.exp(y, x)
        T.tile.sum(r, y, axes=-1)
        T.tile.mul(t, r, T.float32(0.25))
        T.tile.sub(t, y, t)
        T.tile.copy(y, t)
        T.tile.copy(Y[j * 32:j * 32 + 32, bx * 32:bx * 32 + 32], y)
''')


def test_a_copy_into_a_value_the_window_has_read_gets_its_own_slots():
    """`t = y - t; y = t` after a row sum packed y: y was read in the window, so y cannot share t's DST slots (its read would see t);
    packing t's slots to y's CB too is only for a destination the window has not touched."""
    items, _ = plan_of(READ_THEN_REPLACED)
    loop = next(i for i in items if isinstance(i, LoopItem))
    windows = [w for w in loop.body if isinstance(w, Window)]
    assert any("t" in w.written and "y" in w.written for w in windows) and not [w for w in windows if w.aliases]
    from compiler.api import compile_source, emulate
    from tests.passes.helpers import HEADER
    import textwrap
    text = HEADER + textwrap.dedent(READ_THEN_REPLACED["main"].script())
    outcome = emulate(compile_source(text, filename="k.py").artifacts, source=text, filename="k.py", seed=5)
    assert outcome.passed, outcome.verification.render()


def _exp_of_scaled(scale: float) -> str:
    return HEADER + textwrap.dedent(f'''
    @T.prim_func
    def main(A: T.Buffer((32, 64), "float32"), C: T.Buffer((32, 64), "float32")):
        T.device_entry()
        bx = T.cta_id([1])
        A_s = T.alloc_shared((32, 64), "float32")
        t = T.alloc_local((32, 64), "float32")
        T.tile.copy(A_s, A[0:32, 0:64])
        T.tile.sub(t, A_s, T.float32(1.0))
        T.tile.mul(t, t, T.float32({scale!r}))
        T.tile.exp(t, t)
        T.tile.copy(C[0:32, 0:64], t)
    ''')


@pytest.mark.parametrize("scale, folded", [(0.25, True), (-0.25, False)])
def test_approx_exp_takes_a_positive_scale_into_its_init(scale, folded):
    """With the target's approx_exp, `t = t * c; t = exp(t)` is one approximate exp whose init carries c (the LLK
    computes exp(x * c) in the same instructions): no multiply. A negative c is not folded (the LLK's clamp raises x
    to -88.5 / c, which only bounds x * c from below when c > 0): the multiply stays, the exp's scale is 1. Both
    verify on the emulator, which computes the LLK's algorithm, within the tolerance precision.py derives for it."""
    from compiler.api import compile_source, emulate
    from schemas.target import TargetConfig
    text = _exp_of_scaled(scale)
    target = TargetConfig(approx_exp=True)
    compute = compile_source(text, filename="k.py", target=target).artifacts["compute.cpp"].decode()
    c_bits = f"{struct.unpack('<I', struct.pack('<f', scale))[0]:#010x}u"
    assert ("mul_unary_tile(" not in compute) == folded
    assert f"exp_tile_init<true, {c_bits if folded else '0x3f800000u'}>()" in compute
    assert "exp_tile<true>(" in compute and "exp_tile_init()" not in compute
    result = compile_source(text, filename="k.py", target=target)
    outcome = emulate(result.artifacts, target=target, source=text, filename="k.py", seed=2)
    assert outcome.passed, outcome.verification.render()

