# key-padding mask as an int8 tensor
#   --entry padmask_softmax --param B=2 --param N=96
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def padmask_softmax(B, N, block_M=32, dtype="float16"):
    @T.prim_func
    def kernel(X: T.Tensor((B, 64, N), dtype), Mask: T.Tensor((B, N), "int32"), Y: T.Tensor((B, 64, N), dtype)):
        with T.Kernel(64 // block_M, B, threads=128) as (bx, bz):
            s = T.alloc_fragment((block_M, N), "float")
            mrow = T.alloc_fragment((block_M,), "float")
            srow = T.alloc_fragment((block_M,), "float")
            T.copy(X[bz, bx * block_M, 0], s)
            for i, j in T.Parallel(block_M, N):
                s[i, j] = T.if_then_else(Mask[bz, j] != 0, s[i, j], -T.infinity("float"))
            T.reduce_max(s, mrow, dim=1)
            for i, j in T.Parallel(block_M, N):
                s[i, j] = T.exp(s[i, j] - mrow[i])
            T.reduce_sum(s, srow, dim=1)
            for i, j in T.Parallel(block_M, N):
                s[i, j] = s[i, j] / srow[i]
            T.copy(s, Y[bz, bx * block_M, 0])
    return kernel
