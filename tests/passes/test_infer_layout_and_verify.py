"""TTInferLayout: the page grid of tensors of any rank (stacked matrices, vectors against a unit axis);
TTVerifyProgram: the CB protocol balances per block even when a loop's trip count depends on the block."""
from __future__ import annotations

import pytest

from compiler.errors import CompileError
from compiler.passes.verify_program import verify

from .helpers import apply, kernel

RANK3 = kernel('''
@T.prim_func
def main(X: T.Buffer((2, 3, 80, 40), "bfloat16"), S: T.Buffer((2, 3, 80), "float32")):
    T.device_entry()
    bz, by, bx = T.cta_id([2, 3, 1])
    x_s = T.alloc_shared((80, 40), "bfloat16")
    x = T.alloc_local((80, 40), "float32")
    s = T.alloc_local((80, 1), "float32")
    T.tile.copy(x_s, X[bz, by, 0:80, 0:40])
    T.tile.cast(x, x_s)
    T.tile.sum(s, x, axes=-1)
    T.tile.copy(S[bz, by, 0:80], s)
''')


def test_layout_of_a_batch_of_ragged_matrices_and_of_a_vector_per_batch():
    with pytest.raises(CompileError) as info:   # a batched tensor's tile axes must be whole tiles
        apply(RANK3, "TTInferLayout")
    assert "multiples of 32" in info.value.message
    fixed = kernel(RANK3["main"].script().split("\n", 2)[2].replace("80", "96").replace("40", "64"))
    _, after = apply(fixed, "TTInferLayout")
    layouts = after["main"].attrs["tt.layout_desc"]
    x, s = layouts["X"], layouts["S"]
    assert [int(t) for t in x["tiles"]] == [2 * 3 * 3, 2] and [int(a) for a in x["tile_axes"]] == [2, 3]
    assert [int(d) for d in x["padded_shape"]] == [2, 3, 96, 64] and int(x["pages"]) == 36
    assert [int(t) for t in s["tiles"]] == [2 * 3 * 3, 1] and [int(a) for a in s["tile_axes"]] == [2, -1]


CAUSAL_LOOP = kernel('''
@T.prim_func
def main(A: T.Buffer((128, 128), "float16"), C: T.Buffer((128, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([4])
    A_s = T.alloc_shared((32, 32), "float16")
    acc = T.alloc_local((32, 32), "float32")
    T.tile.zero(acc)
    for k in range(bx + 1):
        T.tile.copy(A_s, A[bx * 32:bx * 32 + 32, k * 32:k * 32 + 32])
        T.tile.add(acc, acc, A_s)
    T.tile.copy(C[bx * 32:bx * 32 + 32, 0:32], acc)
''')


def test_cb_protocol_balances_with_a_block_dependent_trip_count():
    _, after = apply(CAUSAL_LOOP, "TTVerifyProgram")
    balance = after["compute"].attrs["tt.verification"]["cb_pages_per_block"]
    assert all(len({int(pages[k]) for k in ("cb_reserve_back", "cb_push_back", "cb_pop_front")}) == 1
               and int(pages["cb_wait_front"]) >= int(pages["cb_pop_front"]) for pages in balance.values())
    # a reader that skips the last page of its loop no longer balances: the verifier names the CB
    from compiler import ops
    import tvm_ffi
    from tvm import tirx

    def drop_push(stmt):
        found = ops.intrinsic_of(stmt)
        return tirx.Evaluate(0) if found and found[0].name == "cb_push_back" and int(found[1][0]) == 0 else stmt
    reader = after["reader"]
    broken = after.__class__({**{gv.name_hint: f for gv, f in after.functions.items()},
                              "reader": reader.with_body(tvm_ffi.structural_map(reader.body, (tirx.Evaluate, drop_push)))})
    with pytest.raises(CompileError, match=r"CB cb_A_s \(c_0\) is unbalanced per block"):
        verify(broken)


def test_a_consumer_that_pops_pages_it_never_waited_for_is_unbalanced():
    """Waiting again is legal; popping without a wait is not (the pages may not be there yet)."""
    _, after = apply(CAUSAL_LOOP, "TTVerifyProgram")
    from compiler import ops
    import tvm_ffi
    from tvm import tirx

    def drop_wait(stmt):
        found = ops.intrinsic_of(stmt)
        return tirx.Evaluate(0) if found and found[0].name == "cb_wait_front" and int(found[1][0]) == 0 else stmt
    compute = after["compute"]
    broken = after.__class__({**{gv.name_hint: f for gv, f in after.functions.items()},
                              "compute": compute.with_body(tvm_ffi.structural_map(compute.body,
                                                                                  (tirx.Evaluate, drop_wait)))})
    with pytest.raises(CompileError, match=r"CB cb_A_s \(c_0\) is unbalanced per block: .*cb_wait_front 0"):
        verify(broken)
