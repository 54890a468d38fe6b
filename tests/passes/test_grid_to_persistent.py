"""TTGridToPersistent: the grid becomes a per-core loop over the core's blocks; a block number decodes row-major
into the grid ids, the last varying fastest."""
from __future__ import annotations

from tvm import tirx

from compiler.ir import stmts_of

from .helpers import apply, assert_equal, block_body, kernel

THREE_D = kernel('''
@T.prim_func
def main(A: T.Buffer((2, 3, 128, 64), "float32"), C: T.Buffer((2, 3, 128, 64), "float32")):
    T.device_entry()
    bz, by, bx = T.cta_id([2, 3, 4])
    A_s = T.alloc_shared((32, 64), "float32")
    C_l = T.alloc_local((32, 64), "float32")
    T.tile.copy(A_s, A[bz, by, bx * 32:bx * 32 + 32, 0:64])
    T.tile.exp(C_l, A_s)
    T.tile.copy(C[bz, by, bx * 32:bx * 32 + 32, 0:64], C_l)
''')


def test_three_d_grid_decodes_row_major():
    before, after = apply(THREE_D, "TTGridToPersistent")
    func = after["main"]
    binds = [s for s in block_body(func) if isinstance(s, tirx.Bind)]
    block = binds[0].var
    names = [str(b.var.name) for b in binds]
    assert names == ["block", "bz", "by", "bx"]
    # expected: bz = block // 12, by = block // 4 % 3, bx = block % 4
    expected = [tirx.floordiv(block, 12), tirx.floormod(tirx.floordiv(block, 4), 3), tirx.floormod(block, 4)]
    for bind, value in zip(binds[1:], expected):
        assert_equal(bind.value, value)
    # the grid ids are the kernel's own variables: the rest of the body is untouched
    ids = list(getattr(next(s for s in stmts_of(before["main"].body.body) if isinstance(s, tirx.ScopeIdDefStmt)),
                       "def").def_ids)
    assert all(b.var.same_as(v) for b, v in zip(binds[1:], ids))
    calls = [s for s in block_body(func) if isinstance(s, tirx.TilePrimitiveCall)]
    assert [str(c.op.name) for c in calls] == ["tirx.tile.copy", "tirx.tile.exp", "tirx.tile.copy"]


def test_one_d_grid_is_the_block_itself():
    mod = kernel('''
    @T.prim_func
    def main(A: T.Buffer((128, 32), "float32"), C: T.Buffer((128, 32), "float32")):
        T.device_entry()
        bx = T.cta_id([4])
        A_s = T.alloc_shared((32, 32), "float32")
        C_l = T.alloc_local((32, 32), "float32")
        T.tile.copy(A_s, A[bx * 32:bx * 32 + 32, 0:32])
        T.tile.exp(C_l, A_s)
        T.tile.copy(C[bx * 32:bx * 32 + 32, 0:32], C_l)
    ''')
    _, after = apply(mod, "TTGridToPersistent")
    binds = [s for s in block_body(after["main"]) if isinstance(s, tirx.Bind)]
    assert [str(b.var.name) for b in binds] == ["block", "bx"]
    assert binds[1].value.same_as(binds[0].var)
