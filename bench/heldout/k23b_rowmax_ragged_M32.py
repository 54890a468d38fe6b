# row max of a [B, M, D] tensor, M = 80 not a multiple of 32, written into rows of a [B, M] output
#   --entry rowmax --param B=3 --param M=80 --param D=64
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def rowmax(B, M, D, block_M=32):
    @T.prim_func
    def kernel(X: T.Tensor((B, M, D), "bfloat16"), R: T.Tensor((B, M), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), B, threads=128) as (bx, by):
            x = T.alloc_fragment((block_M, D), "float32")
            r = T.alloc_fragment((block_M,), "float32")
            T.copy(X[by, bx * block_M, 0], x)
            T.reduce_max(x, r, dim=1)
            T.copy(r, R[by, bx * block_M])
    return kernel
