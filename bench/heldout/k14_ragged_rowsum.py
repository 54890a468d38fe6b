# 3-D tensor with head dim 40 (not a multiple of 32); per-row mean written into a row of a (B, M) output
#   --entry rowmean --param B=2 --param M=96 --param D=40
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def rowmean(B, M, D, block_M=32):
    @T.prim_func
    def kernel(X: T.Tensor((B, M, D), "float32"), R: T.Tensor((B, M), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), B, threads=128) as (bx, by):
            x = T.alloc_fragment((block_M, D), "float32")
            r = T.alloc_fragment((block_M,), "float32")
            T.copy(X[by, bx * block_M, 0], x)
            T.reduce_sum(x, r, dim=1)
            for i in T.Parallel(block_M):
                r[i] = r[i] / D
            T.copy(r, R[by, bx * block_M])
    return kernel
