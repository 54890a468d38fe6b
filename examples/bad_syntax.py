# Deliberately broken: the last copy's region is missing its closing bracket (line 15).
from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    T.device_entry()
    bx = T.cta_id([2])
    A_s = T.alloc_shared((32, 64), "float32")
    B_l = T.alloc_local((32, 64), "float32")
    T.tile.copy(A_s, A[bx * 32:bx * 32 + 32, 0:64])
    T.tile.exp(B_l, A_s)
    T.tile.mul(B_l, B_l, T.float32(2))

    T.tile.copy(B[bx * 32:bx * 32 + 32, 0:64, B_l)
