# C = A @ B: 256x192 @ 192x256, bf16 in, fp32 out. Each block is 64x64 (2x2 tiles) with a K step of 64,
# so every matmul step moves and multiplies 2x2 tiles of A and B.
from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((256, 192), "bfloat16"), B: T.Buffer((192, 256), "bfloat16"), C: T.Buffer((256, 256), "float32")):
    T.device_entry()
    by, bx = T.cta_id([4, 4])
    A_s = T.alloc_shared((64, 64), "bfloat16")
    B_s = T.alloc_shared((64, 64), "bfloat16")
    C_l = T.alloc_local((64, 64), "float32")
    T.tile.zero(C_l)
    for k in range(3):
        T.tile.copy(A_s, A[by * 64:by * 64 + 64, k * 64:k * 64 + 64])
        T.tile.copy(B_s, B[k * 64:k * 64 + 64, bx * 64:bx * 64 + 64])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 64:by * 64 + 64, bx * 64:bx * 64 + 64], C_l)
