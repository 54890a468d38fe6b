"""TTPadTiles: a page read or write the analyzer cannot prove inside the buffer's tiles gets a guard -- a read
outside zero-fills the CB page, a write outside is dropped; aligned kernels get no branch at all."""
from __future__ import annotations

import tvm_ffi
from tvm import tirx

from compiler import attrs, ops

from .helpers import apply, assert_equal, kernel


def gemm(m: int, k: int, n: int) -> str:
    """64 x 64 blocks of C, 32-wide K steps."""
    gm, gn, gk = -(-m // 64), -(-n // 64), -(-k // 32)
    return f'''
@T.prim_func
def main(A: T.Buffer(({m}, {k}), "float32"), B: T.Buffer(({k}, {n}), "float32"), C: T.Buffer(({m}, {n}), "float32")):
    T.device_entry()
    by, bx = T.cta_id([{gm}, {gn}])
    A_s = T.alloc_shared((64, 32), "float32")
    B_s = T.alloc_shared((32, 64), "float32")
    C_l = T.alloc_local((64, 64), "float32")
    T.tile.zero(C_l)
    for k in range({gk}):
        T.tile.copy(A_s, A[by * 64:by * 64 + 64, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 64:bx * 64 + 64])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 64:by * 64 + 64, bx * 64:bx * 64 + 64], C_l)
'''


def guards(func) -> list:
    """The branches around a single page read or write (the multicast role branches are TTShareReads')."""
    found = []

    def visit(node):
        found_op = ops.intrinsic_of(node.then_case)
        if found_op is not None and found_op[0].name in ("read_tile", "write_tile"):
            found.append(node)
    tvm_ffi.structural_walk(func.body, [(tirx.IfThenElse, visit)], order="pre")
    return found


def test_an_aligned_kernel_gets_no_guard():
    before, after = apply(kernel(gemm(128, 64, 128)), "TTPadTiles")
    assert guards(after["main"]) == []
    assert_equal(after["main"].body, before["main"].body)


def test_ragged_edges_zero_fill_reads_and_drop_writes():
    # 70 x 50 @ 50 x 100 in 64 x 64 blocks: A has 3 x 2 tiles, but two blocks of 2 tile rows reach row 4
    _, after = apply(kernel(gemm(70, 50, 100)), "TTPadTiles")
    layouts = attrs.LAYOUT_DESC.get(after["main"])
    assert layouts["A"]["tiles"] == [3, 2] and layouts["A"]["padded_shape"] == [96, 64]
    assert layouts["C"]["tiles"] == [3, 4] and layouts["C"]["padded_shape"] == [96, 128]
    found = guards(after["main"])
    reads = [g for g in found if ops.intrinsic_of(g.then_case)[0].name == "read_tile"]
    writes = [g for g in found if ops.intrinsic_of(g.then_case)[0].name == "write_tile"]
    assert reads and writes
    for g in reads:  # outside: the page is zero-filled in the CB, at the same CB position
        spec, args = ops.intrinsic_of(g.else_case)
        read_args = ops.intrinsic_of(g.then_case)[1]
        assert spec.name == "zero_tile" and int(args[0]) == int(read_args[0])
        assert tvm_ffi.structural_equal(args[1], read_args[1])
    assert all(g.else_case is None for g in writes)  # outside: nothing is written
    # every guard compares against the buffer's own tile counts
    text = "\n".join(str(g.condition) for g in found)
    assert "< 3" in text
