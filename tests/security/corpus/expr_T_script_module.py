from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    T.evaluate(T.tvm)
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((32, 32), "float32")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.copy(A_s, A[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])
    T.tile.exp(C_l, A_s)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
