"""TTForwardCopies: ops read a whole copy's source instead of the copy; a copy nothing reads any more is dropped.
Reads tt.buffers (dtypes: only an exact conversion is forwarded; an output's dtype: whether a write-out may pack a
rounding copy's source). Each `before` is the compute side of a block loop (tile ops between the reader's
`compute_receive` and the writer's `compute_send` markers); the softmax head runs end to end in test_pipeline.py."""
from __future__ import annotations

import pytest
from tvm import tirx
from tvm.script import tirx as T

from compiler import attrs
from compiler.ir import op_name, region_of, stmts_of
from compiler.passes.forward_copies import forward_copies

from .helpers import assert_ir_equal, run, with_attrs


def buffers(src_dtype="bfloat16", out_dtype="float32", **computed) -> dict:
    """tt.buffers: A_s staged from A, the computed values (name -> dtype), the output C."""
    table = {"A_s": {"role": "staging", "scope": "shared", "shape": [32, 128], "dtype": src_dtype},
             "C": {"role": "output", "scope": "global", "shape": [64, 128], "dtype": out_dtype}}
    table.update({n: {"role": "compute", "scope": "local", "shape": [32, 128], "dtype": d}
                  for n, d in computed.items()})
    return table


def tile_ops(func) -> list[tuple[str, str, tuple[str, ...]]]:
    """(op, destination, sources) of each tile op in the block loop, in order."""
    loop = next(s for s in stmts_of(func.body) if isinstance(s, tirx.For))
    out = []
    for s in stmts_of(loop.body):
        if isinstance(s, tirx.TilePrimitiveCall):
            regions = [region_of(a) for a in s.args]
            out.append((op_name(s), regions[0].name, tuple(r.name for r in regions[1:] if r is not None)))
    return out


ROW = buffers(x="float32", m="float32")


def test_readers_take_the_source_and_the_overwritten_copy_is_dropped():
    """x = A_s (bfloat16 -> float32, exact); the row max and the subtraction read A_s; the subtraction overwrites
    x, so nothing reads the copy: dropped."""
    @T.prim_func
    def before(block_count: T.int32):
        T.func_attr({"tt.buffers": ROW})
        A_s = T.alloc_shared((32, 128), "bfloat16")
        x = T.alloc_local((32, 128), "float32")
        m = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "A_s", "A", bx, 0)
            T.tile.copy(x[0:32, 0:128], A_s[0:32, 0:128])
            T.tile.max(m[0:32, 0], x[0:32, 0:128], [-1], False)
            T.tile.sub(x[0:32, 0:128], x[0:32, 0:128], m[0:32, 0])
            T.tile.exp(x[0:32, 0:128], x[0:32, 0:128])
            T.tt.compute_send(16, "x", 0, 0, 1, 4, "C", bx, 0)

    @T.prim_func
    def expected(block_count: T.int32):
        T.func_attr({"tt.buffers": ROW})
        A_s = T.alloc_shared((32, 128), "bfloat16")
        x = T.alloc_local((32, 128), "float32")
        m = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "A_s", "A", bx, 0)
            T.tile.max(m[0:32, 0], A_s[0:32, 0:128], [-1], False)
            T.tile.sub(x[0:32, 0:128], A_s[0:32, 0:128], m[0:32, 0])
            T.tile.exp(x[0:32, 0:128], x[0:32, 0:128])
            T.tt.compute_send(16, "x", 0, 0, 1, 4, "C", bx, 0)

    assert_ir_equal(run(forward_copies, before)["main"], expected)


CHANGED_SOURCE = buffers(y="float32", x="float32", m="float32")


def test_a_copy_read_after_its_source_changes_is_kept():
    """x = y, then y changes: the max before the change reads y; the sub after it needs the copy."""
    @T.prim_func
    def before(block_count: T.int32):
        T.func_attr({"tt.buffers": CHANGED_SOURCE})
        A_s = T.alloc_shared((32, 128), "bfloat16")
        y = T.alloc_local((32, 128), "float32")
        x = T.alloc_local((32, 128), "float32")
        m = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "A_s", "A", bx, 0)
            T.tile.exp(y[0:32, 0:128], A_s[0:32, 0:128])
            T.tile.copy(x[0:32, 0:128], y[0:32, 0:128])
            T.tile.max(m[0:32, 0], x[0:32, 0:128], [-1], False)
            T.tile.mul(y[0:32, 0:128], y[0:32, 0:128], T.float32(2.0))
            T.tile.sub(x[0:32, 0:128], x[0:32, 0:128], m[0:32, 0])
            T.tile.add(x[0:32, 0:128], x[0:32, 0:128], y[0:32, 0:128])
            T.tt.compute_send(16, "x", 0, 0, 1, 4, "C", bx, 0)

    @T.prim_func
    def expected(block_count: T.int32):
        T.func_attr({"tt.buffers": CHANGED_SOURCE})
        A_s = T.alloc_shared((32, 128), "bfloat16")
        y = T.alloc_local((32, 128), "float32")
        x = T.alloc_local((32, 128), "float32")
        m = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "A_s", "A", bx, 0)
            T.tile.exp(y[0:32, 0:128], A_s[0:32, 0:128])
            T.tile.copy(x[0:32, 0:128], y[0:32, 0:128])
            T.tile.max(m[0:32, 0], y[0:32, 0:128], [-1], False)
            T.tile.mul(y[0:32, 0:128], y[0:32, 0:128], T.float32(2.0))
            T.tile.sub(x[0:32, 0:128], x[0:32, 0:128], m[0:32, 0])
            T.tile.add(x[0:32, 0:128], x[0:32, 0:128], y[0:32, 0:128])
            T.tt.compute_send(16, "x", 0, 0, 1, 4, "C", bx, 0)

    assert_ir_equal(run(forward_copies, before)["main"], expected)


def test_a_copy_written_out_is_kept_and_its_readers_before_take_the_source():
    @T.prim_func
    def before(block_count: T.int32):
        T.func_attr({"tt.buffers": ROW})
        A_s = T.alloc_shared((32, 128), "bfloat16")
        x = T.alloc_local((32, 128), "float32")
        m = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "A_s", "A", bx, 0)
            T.tile.copy(x[0:32, 0:128], A_s[0:32, 0:128])
            T.tile.max(m[0:32, 0], x[0:32, 0:128], [-1], False)
            T.tt.compute_send(16, "x", 0, 0, 1, 4, "C", bx, 0)

    @T.prim_func
    def expected(block_count: T.int32):
        T.func_attr({"tt.buffers": ROW})
        A_s = T.alloc_shared((32, 128), "bfloat16")
        x = T.alloc_local((32, 128), "float32")
        m = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "A_s", "A", bx, 0)
            T.tile.copy(x[0:32, 0:128], A_s[0:32, 0:128])
            T.tile.max(m[0:32, 0], A_s[0:32, 0:128], [-1], False)
            T.tt.compute_send(16, "x", 0, 0, 1, 4, "C", bx, 0)

    assert_ir_equal(run(forward_copies, before)["main"], expected)


@T.prim_func
def rounding_copy(block_count: T.int32):
    """y = acc (float32 -> bfloat16), y written to C (tt.buffers, added per test, says C's dtype)."""
    A_s = T.alloc_shared((32, 128), "bfloat16")
    acc = T.alloc_local((32, 128), "float32")
    y = T.alloc_local((32, 128), "bfloat16")
    for bx in range(block_count):
        T.tt.compute_receive(0, "A_s", "A", bx, 0)
        T.tile.exp(acc[0:32, 0:128], A_s[0:32, 0:128])
        T.tile.copy(y[0:32, 0:128], acc[0:32, 0:128])
        T.tt.compute_send(16, "y", 0, 0, 1, 4, "C", bx, 0)


def test_a_write_out_of_a_rounding_copy_packs_its_source():
    """To a bfloat16 output the write-out packs acc (the packer rounds to bfloat16 as the copy did) and the copy is
    dropped; to a float32 output the copy's rounding matters and nothing changes."""
    to_bf16 = with_attrs(rounding_copy, {attrs.BUFFERS: buffers(out_dtype="bfloat16", acc="float32", y="bfloat16")})

    @T.prim_func
    def expected(block_count: T.int32):
        A_s = T.alloc_shared((32, 128), "bfloat16")
        acc = T.alloc_local((32, 128), "float32")
        y = T.alloc_local((32, 128), "bfloat16")   # noqa: F841 -- the pass leaves the copy's allocation
        for bx in range(block_count):
            T.tt.compute_receive(0, "A_s", "A", bx, 0)
            T.tile.exp(acc[0:32, 0:128], A_s[0:32, 0:128])
            T.tt.compute_send(16, "acc", 0, 0, 1, 4, "C", bx, 0)

    expected = with_attrs(expected, {attrs.BUFFERS: attrs.BUFFERS.get(to_bf16)})
    assert_ir_equal(run(forward_copies, to_bf16)["main"], expected)
    to_fp32 = with_attrs(rounding_copy, {attrs.BUFFERS: buffers(out_dtype="float32", acc="float32", y="bfloat16")})
    assert_ir_equal(run(forward_copies, to_fp32)["main"], to_fp32)


@pytest.mark.parametrize("src_dtype, x_dtype", [("float16", "float32"), ("float32", "bfloat16")])
def test_only_exact_conversions_are_forwarded(src_dtype, x_dtype):
    @T.prim_func
    def before(block_count: T.int32):
        A_s = T.alloc_shared((32, 128), src_dtype)
        x = T.alloc_local((32, 128), x_dtype)
        m = T.alloc_local((32, 1), x_dtype)
        for bx in range(block_count):
            T.tt.compute_receive(0, "A_s", "A", bx, 0)
            T.tile.copy(x[0:32, 0:128], A_s[0:32, 0:128])
            T.tile.max(m[0:32, 0], x[0:32, 0:128], [-1], False)
            T.tile.sub(x[0:32, 0:128], x[0:32, 0:128], m[0:32, 0])
            T.tile.exp(x[0:32, 0:128], x[0:32, 0:128])
            T.tt.compute_send(16, "x", 0, 0, 1, 4, "C", bx, 0)

    func = with_attrs(before, {attrs.BUFFERS: buffers(src_dtype, x=x_dtype, m=x_dtype)})
    forwarded = ("copy", "x", ("A_s",)) not in tile_ops(run(forward_copies, func)["main"])
    assert forwarded == (x_dtype == "float32")   # float16 -> float32 is exact, float32 -> bfloat16 rounds


KEY_LOOP = {"q_s": {"role": "staging", "scope": "shared", "shape": [32, 128], "dtype": "bfloat16"},
            "mask_s": {"role": "staging", "scope": "shared", "shape": [32, 128], "dtype": "bfloat16"},
            "C": {"role": "output", "scope": "global", "shape": [64, 128], "dtype": "float32"},
            "s": {"role": "compute", "scope": "local", "shape": [32, 128], "dtype": "float32"},
            "t": {"role": "compute", "scope": "local", "shape": [32, 128], "dtype": "float32"}}


def test_in_a_key_loop_the_mask_copy_is_forwarded_and_the_zero_mask_add_dropped():
    """Causal attention's `s = T.if_then_else(row >= col, s, -inf)` after TTLowerIndexMasks: below the diagonal the
    mask tile t is zeroed and added to s, on it t is the staged mask tile. The add of zeros goes (s unchanged), the
    add on the diagonal reads the staged tile, and t, read by nothing left, is neither zeroed nor copied."""
    @T.prim_func
    def before(block_count: T.int32, steps: T.int32):
        q_s = T.alloc_shared((32, 128), "bfloat16")
        mask_s = T.alloc_shared((32, 128), "bfloat16")
        s = T.alloc_local((32, 128), "float32")
        t = T.alloc_local((32, 128), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "q_s", "Q", bx, 0)
            for step in range(steps):
                T.tile.exp(s[0:32, 0:128], q_s[0:32, 0:128])
                T.tile.zero(t[0:32, 0:128])
                T.tile.add(s[0:32, 0:128], s[0:32, 0:128], t[0:32, 0:128])
            for step in range(steps, steps + 1):
                T.tt.compute_receive(1, "mask_s", "M", bx, 0)
                T.tile.exp(s[0:32, 0:128], q_s[0:32, 0:128])
                T.tile.copy(t[0:32, 0:128], mask_s[0:32, 0:128])
                T.tile.add(s[0:32, 0:128], s[0:32, 0:128], t[0:32, 0:128])
            T.tt.compute_send(16, "s", 0, 0, 1, 4, "C", bx, 0)

    @T.prim_func
    def expected(block_count: T.int32, steps: T.int32):
        q_s = T.alloc_shared((32, 128), "bfloat16")
        mask_s = T.alloc_shared((32, 128), "bfloat16")
        s = T.alloc_local((32, 128), "float32")
        t = T.alloc_local((32, 128), "float32")   # noqa: F841 -- the pass leaves the allocation
        for bx in range(block_count):
            T.tt.compute_receive(0, "q_s", "Q", bx, 0)
            for step in range(steps):
                T.tile.exp(s[0:32, 0:128], q_s[0:32, 0:128])
            for step in range(steps, steps + 1):
                T.tt.compute_receive(1, "mask_s", "M", bx, 0)
                T.tile.exp(s[0:32, 0:128], q_s[0:32, 0:128])
                T.tile.add(s[0:32, 0:128], s[0:32, 0:128], mask_s[0:32, 0:128])
            T.tt.compute_send(16, "s", 0, 0, 1, 4, "C", bx, 0)

    before, expected = (with_attrs(f, {attrs.BUFFERS: KEY_LOOP}) for f in (before, expected))
    assert_ir_equal(run(forward_copies, before)["main"], expected)


def test_in_a_key_loop_a_copy_the_next_step_reads_is_kept():
    """t = mask at the end of a step, read by the step after it (before the copy): the add after the copy reads
    the staged tile, but the copy stays; so does a zero another op reads (a product, not an in-place add)."""
    @T.prim_func
    def before(block_count: T.int32, steps: T.int32):
        q_s = T.alloc_shared((32, 128), "bfloat16")   # noqa: F841 -- as written in the kernel
        mask_s = T.alloc_shared((32, 128), "bfloat16")
        s = T.alloc_local((32, 128), "float32")
        t = T.alloc_local((32, 128), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "q_s", "Q", bx, 0)
            for step in range(steps):
                T.tile.mul(s[0:32, 0:128], s[0:32, 0:128], t[0:32, 0:128])
                T.tt.compute_receive(1, "mask_s", "M", bx, 0)
                T.tile.copy(t[0:32, 0:128], mask_s[0:32, 0:128])
                T.tile.add(s[0:32, 0:128], s[0:32, 0:128], t[0:32, 0:128])
            for step in range(steps):
                T.tile.zero(t[0:32, 0:128])
                T.tile.add(s[0:32, 0:128], s[0:32, 0:128], t[0:32, 0:128])
                T.tile.mul(s[0:32, 0:128], s[0:32, 0:128], t[0:32, 0:128])
            T.tt.compute_send(16, "s", 0, 0, 1, 4, "C", bx, 0)

    @T.prim_func
    def expected(block_count: T.int32, steps: T.int32):
        q_s = T.alloc_shared((32, 128), "bfloat16")   # noqa: F841 -- as written in the kernel
        mask_s = T.alloc_shared((32, 128), "bfloat16")
        s = T.alloc_local((32, 128), "float32")
        t = T.alloc_local((32, 128), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "q_s", "Q", bx, 0)
            for step in range(steps):
                T.tile.mul(s[0:32, 0:128], s[0:32, 0:128], t[0:32, 0:128])
                T.tt.compute_receive(1, "mask_s", "M", bx, 0)
                T.tile.copy(t[0:32, 0:128], mask_s[0:32, 0:128])
                T.tile.add(s[0:32, 0:128], s[0:32, 0:128], mask_s[0:32, 0:128])
            for step in range(steps):
                T.tile.zero(t[0:32, 0:128])
                T.tile.mul(s[0:32, 0:128], s[0:32, 0:128], t[0:32, 0:128])
            T.tt.compute_send(16, "s", 0, 0, 1, 4, "C", bx, 0)

    before, expected = (with_attrs(f, {attrs.BUFFERS: KEY_LOOP}) for f in (before, expected))
    assert_ir_equal(run(forward_copies, before)["main"], expected)


def test_a_mask_copy_taking_only_its_mixed_tiles_is_forwarded_with_its_selection():
    """A causal mask after TTLowerIndexMasks on the diagonal step: t takes the staged page of a tile only where
    the tile is neither all 0 nor all -inf (mask_select). The add `s + t` reads the staged tiles with the same
    selection (operand 1: per tile the add of the page, nothing for 0, -inf for -inf) and the copy goes; in the
    second loop a row max reads the mask u too, which cannot take a selection: u's copy stays and so does the add."""
    @T.prim_func
    def before(block_count: T.int32, steps: T.int32):
        q_s = T.alloc_shared((32, 128), "bfloat16")
        mask_s = T.alloc_shared((32, 128), "bfloat16")
        s = T.alloc_local((32, 128), "float32")
        t = T.alloc_local((32, 128), "float32")
        u = T.alloc_local((32, 128), "float32")
        m = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "q_s", "Q", bx, 0)
            for step in range(steps):
                T.tt.compute_receive(1, "mask_s", "M", bx, 0)
                T.tile.exp(s[0:32, 0:128], q_s[0:32, 0:128])
                T.tile.copy(t[0:32, 0:128], mask_s[0:32, 0:128],
                            mask_select=[bx * 32 - step * 128, 32, -32, -32, 31, T.float32(0), T.float32("-inf"), 0])
                T.tile.add(s[0:32, 0:128], s[0:32, 0:128], t[0:32, 0:128])
            for step in range(steps):
                T.tt.compute_receive(1, "mask_s", "M", bx, 0)
                T.tile.copy(u[0:32, 0:128], mask_s[0:32, 0:128],
                            mask_select=[bx * 32 - step * 128, 32, -32, -32, 31, T.float32(0), T.float32("-inf"), 0])
                T.tile.add(s[0:32, 0:128], s[0:32, 0:128], u[0:32, 0:128])
                T.tile.max(m[0:32, 0], u[0:32, 0:128], [-1], False)
            T.tt.compute_send(16, "s", 0, 0, 1, 4, "C", bx, 0)

    @T.prim_func
    def expected(block_count: T.int32, steps: T.int32):
        q_s = T.alloc_shared((32, 128), "bfloat16")
        mask_s = T.alloc_shared((32, 128), "bfloat16")
        s = T.alloc_local((32, 128), "float32")
        t = T.alloc_local((32, 128), "float32")   # noqa: F841 -- the pass leaves the allocation
        u = T.alloc_local((32, 128), "float32")
        m = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "q_s", "Q", bx, 0)
            for step in range(steps):
                T.tt.compute_receive(1, "mask_s", "M", bx, 0)
                T.tile.exp(s[0:32, 0:128], q_s[0:32, 0:128])
                T.tile.add(s[0:32, 0:128], s[0:32, 0:128], mask_s[0:32, 0:128],
                           mask_select=[bx * 32 - step * 128, 32, -32, -32, 31, T.float32(0), T.float32("-inf"), 1])
            for step in range(steps):
                T.tt.compute_receive(1, "mask_s", "M", bx, 0)
                T.tile.copy(u[0:32, 0:128], mask_s[0:32, 0:128],
                            mask_select=[bx * 32 - step * 128, 32, -32, -32, 31, T.float32(0), T.float32("-inf"), 0])
                T.tile.add(s[0:32, 0:128], s[0:32, 0:128], u[0:32, 0:128])
                T.tile.max(m[0:32, 0], u[0:32, 0:128], [-1], False)
            T.tt.compute_send(16, "s", 0, 0, 1, 4, "C", bx, 0)

    table = {**KEY_LOOP, "m": {"role": "compute", "scope": "local", "shape": [32, 1], "dtype": "float32"},
             "u": {"role": "compute", "scope": "local", "shape": [32, 128], "dtype": "float32"}}
    before, expected = (with_attrs(f, {attrs.BUFFERS: table}) for f in (before, expected))
    assert_ir_equal(run(forward_copies, before)["main"], expected)
