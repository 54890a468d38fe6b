# C = A @ B with one 32x32 output tile per block: 64x96 @ 96x128, fp16 in, fp32 accumulate/out.
from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((64, 96), "float16"), B: T.Buffer((96, 128), "float16"), C: T.Buffer((64, 128), "float32")):
    T.device_entry()
    by, bx = T.cta_id([2, 4])
    A_s = T.alloc_shared((32, 32), "float16")
    B_s = T.alloc_shared((32, 32), "float16")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.zero(C_l)
    for k in range(3):
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
