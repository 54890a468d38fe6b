# Row softmax: B = exp(A - rowmax(A)) / rowsum(exp(A - rowmax(A))), 256x128 in blocks of 64 rows, fp32.
# Row reductions (T.tile.max / T.tile.sum over the last axis) fill (64, 1) columns that the next ops broadcast.
from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((256, 128), "float32"), B: T.Buffer((256, 128), "float32")):
    T.device_entry()
    bx = T.cta_id([4])
    A_s = T.alloc_shared((64, 128), "float32")
    x = T.alloc_local((64, 128), "float32")
    m = T.alloc_local((64, 1), "float32")
    s = T.alloc_local((64, 1), "float32")
    T.tile.copy(A_s, A[bx * 64:bx * 64 + 64, 0:128])
    T.tile.max(m, A_s, axes=-1)
    T.tile.sub(x, A_s, m)
    T.tile.exp(x, x)
    T.tile.sum(s, x, axes=-1)
    T.tile.reciprocal(s, s)
    T.tile.mul(x, x, s)
    T.tile.copy(B[bx * 64:bx * 64 + 64, 0:128], x)
