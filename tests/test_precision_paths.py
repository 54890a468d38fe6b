"""compiler/precision.py's PathWalk: which fp32 values go through the FPU's TF32 source registers (an add / sub / mul
of fp32 tiles outside the kernel's loops may run on the FPU; inside a loop it stays on the SFPU), read off the input
kernel. The walk must name the same values however the kernel's calls sit in memory: it once kept the in-loop calls
by id() of the Python wrappers a walk hands out, which are freed and reused at once, so an op outside every loop
could read as in one (tests/tilelang/test_deferred_row_sum.py's tolerance failed after some other test files)."""
from __future__ import annotations

from tvm.script import tirx as T

from compiler.precision import PathWalk


@T.prim_func
def outside_and_inside(A: T.Buffer((32, 32), "float32"), B: T.Buffer((32, 32), "float32"),
                       C: T.Buffer((32, 32), "float32"), D: T.Buffer((32, 32), "float32"),
                       Y: T.Buffer((32, 32), "float32"), Z: T.Buffer((32, 32), "float32")):
    T.tile.add(Y[0:32, 0:32], A[0:32, 0:32], B[0:32, 0:32])
    for k in range(4):
        T.tile.mul(Z[0:32, 0:32], C[0:32, 0:32], D[0:32, 0:32])


def test_an_op_outside_every_loop_reads_through_the_fpu_and_one_in_a_loop_does_not():
    for _ in range(20):     # the freed wrappers' addresses come back in any order: ask many times
        walk = PathWalk(outside_and_inside, fp32_dest=True, fpu_rounds=True)
        assert walk.fpu_read == {"A", "B"}


def test_without_fpu_rounding_no_elementwise_operand_is_read_through_the_fpu():
    assert PathWalk(outside_and_inside, fp32_dest=True, fpu_rounds=False).fpu_read == set()
