"""TTRecomputeVectorOps: `c = op(a, v)` (c a float32 compute block, a a staged bfloat16 block, v a whole vector) is
recomputed by each op that reads c instead of being stored. Reads tt.buffers (roles, dtypes, shapes). Each `before` is
the compute side of a block loop (tile ops after the reader's `compute_receive` marker); layer norm runs end to end
in tests/tilelang/test_stream_variance.py and test_fp32_on_fpu.py."""
from __future__ import annotations

import tvm
from tvm.script import tirx as T

from compiler import attrs
from compiler.passes.recompute_vector_ops import recompute_vector_ops

from .helpers import assert_ir_equal, run, with_attrs


def buffers(staged="bfloat16") -> dict:
    """tt.buffers: x_s staged from X, the float32 blocks c / q / t and the column vectors mu / inv / s."""
    table = {"x_s": {"role": "staging", "scope": "shared", "shape": [32, 128], "dtype": staged},
             "Y": {"role": "output", "scope": "global", "shape": [64, 128], "dtype": "bfloat16"}}
    table.update({n: {"role": "compute", "scope": "local", "shape": [32, 128], "dtype": "float32"}
                  for n in ("c", "q", "t")})
    table.update({n: {"role": "compute", "scope": "local", "shape": [32, 1], "dtype": "float32"}
                  for n in ("mu", "inv", "s")})
    return table


NORM = buffers()
WIDE = buffers(staged="float32")


def test_each_reader_recomputes_the_value_and_the_store_goes():
    """c = x_s - mu is read by q = c * c and, after the variance, by t = c * inv: each reader starts with its own
    x_s - mu in its destination, and c is computed nowhere."""
    @T.prim_func
    def before(block_count: T.int32):
        T.func_attr({"tt.buffers": NORM})
        x_s = T.alloc_shared((32, 128), "bfloat16")
        c = T.alloc_local((32, 128), "float32")
        q = T.alloc_local((32, 128), "float32")
        t = T.alloc_local((32, 128), "float32")
        mu = T.alloc_local((32, 1), "float32")
        inv = T.alloc_local((32, 1), "float32")
        s = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "x_s", "X", bx, 0)
            T.tile.sum(mu[0:32, 0], x_s[0:32, 0:128], [-1], False)
            T.tile.sub(c[0:32, 0:128], x_s[0:32, 0:128], mu[0:32, 0])
            T.tile.mul(s[0:32, 0], mu[0:32, 0], mu[0:32, 0])
            T.tile.mul(q[0:32, 0:128], c[0:32, 0:128], c[0:32, 0:128])
            T.tile.sum(inv[0:32, 0], q[0:32, 0:128], [-1], False)
            T.tile.mul(t[0:32, 0:128], c[0:32, 0:128], inv[0:32, 0])

    @T.prim_func
    def expected(block_count: T.int32):
        T.func_attr({"tt.buffers": NORM})
        x_s = T.alloc_shared((32, 128), "bfloat16")
        c = T.alloc_local((32, 128), "float32")  # noqa: F841 -- allocated, no longer computed
        q = T.alloc_local((32, 128), "float32")
        t = T.alloc_local((32, 128), "float32")
        mu = T.alloc_local((32, 1), "float32")
        inv = T.alloc_local((32, 1), "float32")
        s = T.alloc_local((32, 1), "float32")
        for bx in range(block_count):
            T.tt.compute_receive(0, "x_s", "X", bx, 0)
            T.tile.sum(mu[0:32, 0], x_s[0:32, 0:128], [-1], False)
            T.tile.mul(s[0:32, 0], mu[0:32, 0], mu[0:32, 0])
            T.tile.sub(q[0:32, 0:128], x_s[0:32, 0:128], mu[0:32, 0])
            T.tile.mul(q[0:32, 0:128], q[0:32, 0:128], q[0:32, 0:128])
            T.tile.sum(inv[0:32, 0], q[0:32, 0:128], [-1], False)
            T.tile.sub(t[0:32, 0:128], x_s[0:32, 0:128], mu[0:32, 0])
            T.tile.mul(t[0:32, 0:128], t[0:32, 0:128], inv[0:32, 0])

    assert_ir_equal(run(recompute_vector_ops, before)["main"], expected)


def _unchanged(between: str, reader: str, table=NORM):
    """A kernel whose producer c = x_s - mu is followed by `between` and read by `reader`."""
    text = f"""
@T.prim_func
def before(block_count: T.int32):
    x_s = T.alloc_shared((32, 128), "{table['x_s']['dtype']}")
    c = T.alloc_local((32, 128), "float32")
    q = T.alloc_local((32, 128), "float32")
    mu = T.alloc_local((32, 1), "float32")
    s = T.alloc_local((32, 1), "float32")
    for bx in range(block_count):
        T.tt.compute_receive(0, "x_s", "X", bx, 0)
        T.tile.sub(c[0:32, 0:128], x_s[0:32, 0:128], mu[0:32, 0])
        {between}
        {reader}
"""
    before = with_attrs(tvm.script.from_source(text), {attrs.BUFFERS: table})
    assert_ir_equal(run(recompute_vector_ops, before)["main"], before)


def test_a_reader_right_after_the_producer_shares_its_pass_and_nothing_changes():
    _unchanged("T.tile.mul(q[0:32, 0:128], c[0:32, 0:128], c[0:32, 0:128])",
               "T.tile.mul(q[0:32, 0:128], c[0:32, 0:128], mu[0:32, 0])")


def test_a_reader_that_also_reads_its_own_destination_keeps_the_store():
    """q = q + c: recomputing x_s - mu into q would overwrite the q it reads."""
    _unchanged("T.tile.mul(s[0:32, 0], mu[0:32, 0], mu[0:32, 0])",
               "T.tile.add(q[0:32, 0:128], q[0:32, 0:128], c[0:32, 0:128])")


def test_a_vector_written_before_the_reader_keeps_the_store():
    """mu changes between the producer and its reader: a recomputation would read the new mu."""
    _unchanged("T.tile.mul(mu[0:32, 0], mu[0:32, 0], mu[0:32, 0])",
               "T.tile.mul(q[0:32, 0:128], c[0:32, 0:128], c[0:32, 0:128])")


def test_a_float32_staged_block_is_not_recomputed():
    """Only a narrow (bfloat16 / float16) staged block is cheaper to unpack again than the float32 value."""
    _unchanged("T.tile.mul(s[0:32, 0], mu[0:32, 0], mu[0:32, 0])",
               "T.tile.mul(q[0:32, 0:128], c[0:32, 0:128], c[0:32, 0:128])", table=WIDE)


def test_a_reader_other_than_add_sub_mul_keeps_the_store():
    """An exp of c is not an op the rule may put after a recomputation (its reader must be add / sub / mul)."""
    _unchanged("T.tile.mul(s[0:32, 0], mu[0:32, 0], mu[0:32, 0])",
               "T.tile.exp(q[0:32, 0:128], c[0:32, 0:128])")
