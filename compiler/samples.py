"""The tile GEMM in TVMScript, for any size: the kernel the zygote warms up on, the benchmarks time and the tests
take as their plain case (one definition instead of a copy in each)."""
from __future__ import annotations


def tile_gemm(m: int, n: int, k: int, *, block: int = 32, in_dtype: str = "float16", out_dtype: str = "float32") -> str:
    """C[m, n] = A[m, k] @ B[k, n], one `block` x `block` output block per CTA, K in `block` steps (m, n and k
    multiples of `block`)."""
    b = block
    return f'''from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer(({m}, {k}), "{in_dtype}"), B: T.Buffer(({k}, {n}), "{in_dtype}"), C: T.Buffer(({m}, {n}), "{out_dtype}")):
    T.device_entry()
    by, bx = T.cta_id([{m // b}, {n // b}])
    A_s = T.alloc_shared(({b}, {b}), "{in_dtype}")
    B_s = T.alloc_shared(({b}, {b}), "{in_dtype}")
    C_l = T.alloc_local(({b}, {b}), "{out_dtype}")
    T.tile.zero(C_l)
    for k in range({k // b}):
        T.tile.copy(A_s, A[by * {b}:by * {b} + {b}, k * {b}:k * {b} + {b}])
        T.tile.copy(B_s, B[k * {b}:k * {b} + {b}, bx * {b}:bx * {b} + {b}])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * {b}:by * {b} + {b}, bx * {b}:bx * {b} + {b}], C_l)
'''
