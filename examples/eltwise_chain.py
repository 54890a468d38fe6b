# D = max(A * B + C, 0): a fused multiply-add-ReLU chain computed in DST, bf16, 128x256 in 32x64 blocks.
from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((128, 256), "bfloat16"), B: T.Buffer((128, 256), "bfloat16"),
         C: T.Buffer((128, 256), "bfloat16"), D: T.Buffer((128, 256), "bfloat16")):
    T.device_entry()
    by, bx = T.cta_id([4, 4])
    A_s = T.alloc_shared((32, 64), "bfloat16")
    B_s = T.alloc_shared((32, 64), "bfloat16")
    C_s = T.alloc_shared((32, 64), "bfloat16")
    D_l = T.alloc_local((32, 64), "bfloat16")
    T.tile.copy(A_s, A[by * 32:by * 32 + 32, bx * 64:bx * 64 + 64])
    T.tile.copy(B_s, B[by * 32:by * 32 + 32, bx * 64:bx * 64 + 64])
    T.tile.copy(C_s, C[by * 32:by * 32 + 32, bx * 64:bx * 64 + 64])
    T.tile.mul(D_l, A_s, B_s)
    T.tile.add(D_l, D_l, C_s)
    T.tile.maximum(D_l, D_l, T.bfloat16(0))
    T.tile.copy(D[by * 32:by * 32 + 32, bx * 64:bx * 64 + 64], D_l)
