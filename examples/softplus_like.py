# y = sqrt(exp(x) + 1) - x, then 1/y: unary SFPU ops and scalar operands on fp32, 96x64, one 32x64 row block each.
from tvm.script import tirx as T


@T.prim_func
def main(X: T.Buffer((96, 64), "float32"), Y: T.Buffer((96, 64), "float32")):
    T.device_entry()
    bx = T.cta_id([3])
    X_s = T.alloc_shared((32, 64), "float32")
    Y_l = T.alloc_local((32, 64), "float32")
    T.tile.copy(X_s, X[bx * 32:bx * 32 + 32, 0:64])
    T.tile.exp(Y_l, X_s)
    T.tile.add(Y_l, Y_l, T.float32(1))
    T.tile.sqrt(Y_l, Y_l)
    T.tile.sub(Y_l, Y_l, X_s)
    T.tile.reciprocal(Y_l, Y_l)
    T.tile.copy(Y[bx * 32:bx * 32 + 32, 0:64], Y_l)
