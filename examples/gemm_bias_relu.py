# Y = relu(X @ W^T + bias): transpose_B GEMM with a fused epilogue, fp16 in, fp32 out, 128x128x64.
from tvm.script import tirx as T


@T.prim_func
def main(X: T.Buffer((128, 64), "float16"), W: T.Buffer((128, 64), "float16"),
         bias: T.Buffer((128, 128), "float32"), Y: T.Buffer((128, 128), "float32")):
    T.device_entry()
    by, bx = T.cta_id([4, 4])
    X_s = T.alloc_shared((32, 32), "float16")
    W_s = T.alloc_shared((32, 32), "float16")
    b_s = T.alloc_shared((32, 32), "float32")
    Y_l = T.alloc_local((32, 32), "float32")
    T.tile.zero(Y_l)
    for k in range(2):
        T.tile.copy(X_s, X[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(W_s, W[bx * 32:bx * 32 + 32, k * 32:k * 32 + 32])
        T.tile.gemm(Y_l, X_s, W_s, Y_l, transpose_B=True, beta=1.0)
    T.tile.copy(b_s, bias[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])
    T.tile.add(Y_l, Y_l, b_s)
    T.tile.maximum(Y_l, Y_l, T.float32(0))
    T.tile.copy(Y[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], Y_l)
