# C = A @ B with shapes that are not multiples of 32: 100x70 @ 70x90, fp32. Blocks are 32x32 on a 4x3 grid
# covering the padded 128x96 output: reads past the edges see zeros, writes past the edges are dropped.
from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((100, 70), "float32"), B: T.Buffer((70, 90), "float32"), C: T.Buffer((100, 90), "float32")):
    T.device_entry()
    by, bx = T.cta_id([4, 3])
    A_s = T.alloc_shared((32, 32), "float32")
    B_s = T.alloc_shared((32, 32), "float32")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.zero(C_l)
    for k in range(3):
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
