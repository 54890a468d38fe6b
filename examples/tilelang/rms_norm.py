# RMSNorm in TileLang's eager-JIT style: the factory body is the kernel. The sizes are T.const names bound by the
# tensor argument's shape (`--param X=float32[256,512]`), the output is created with T.empty and returned, and the
# per-column weight w[j] is broadcast down the rows.
#   tilefarm verify examples/tilelang/rms_norm.py --entry rms_norm --param X=float32[256,512] --param W=float32[512]
#   tilefarm verify examples/tilelang/rms_norm.py --entry rms_norm --param X=bfloat16[128,256] --param W=bfloat16[256] --param block_M=64 --param dtype=bfloat16
import tilelang
import tilelang.language as T


@tilelang.jit
def rms_norm(X, W, block_M=32, eps=1e-6, dtype=T.float32):
    M, N = T.const("M, N")

    X: T.Tensor((M, N), dtype)
    W: T.Tensor((N,), dtype)
    Y = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(M, block_M), threads=128) as bm:
        x = T.alloc_fragment((block_M, N), T.float32)
        sq = T.alloc_fragment((block_M, N), T.float32)
        w = T.alloc_shared((N,), dtype)
        ss = T.alloc_fragment((block_M,), T.float32)
        x_in = T.alloc_shared((block_M, N), dtype)

        T.copy(X[bm * block_M, 0], x_in)
        T.copy(W, w)
        for i, j in T.Parallel(block_M, N):
            x[i, j] = T.cast(x_in[i, j], T.float32)
            sq[i, j] = x[i, j] * x[i, j]
        T.reduce_sum(sq, ss, dim=1)
        for i in T.Parallel(block_M):
            ss[i] = T.rsqrt(ss[i] / N + eps)
        for i, j in T.Parallel(block_M, N):
            x_in[i, j] = x[i, j] * ss[i] * w[j]
        T.copy(x_in, Y[bm * block_M, 0])

    return Y
