# rms norm over a long row, sum of squares accumulated with reduce_sum(clear=False) across column blocks
#   --entry rms --param M=64 --param N=256
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def rms(M, N, block_M=32, block_N=64, eps=1e-5):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "bfloat16"), W: T.Tensor((N,), "bfloat16"), Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, block_N), "float32")
            sq = T.alloc_fragment((block_M, block_N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.clear(ss)
            for k in T.serial(N // block_N):
                T.copy(X[bx * block_M, k * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    sq[i, j] = x[i, j] * x[i, j]
                T.reduce_sum(sq, ss, dim=1, clear=False)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for k in T.serial(N // block_N):
                T.copy(X[bx * block_M, k * block_N], x)
                for i, j in T.Parallel(block_M, block_N):
                    x[i, j] = x[i, j] * ss[i] * W[k * block_N + j]
                T.copy(x, Y[bx * block_M, k * block_N])
    return kernel
