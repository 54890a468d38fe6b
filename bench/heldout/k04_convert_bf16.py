# fp16 global -> fp32 fragment, scale+residual, bf16 store
#   --entry scale_residual --param M=128 --param N=96
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def scale_residual(M, N, block_M=32, alpha=0.5):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float16"), R: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            r = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.copy(R[bx * block_M, 0], r)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * alpha + r[i, j]
            T.copy(x, Y[bx * block_M, 0])
    return kernel
