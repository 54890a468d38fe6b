#   --entry onehot_max --param M=64 --param N=64
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def onehot_max(M, N, block_M=32):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), O: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            max_val = T.alloc_fragment((block_M,), "float32")
            o = T.alloc_fragment((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_max(x, max_val, dim=1)
            for i, j in T.Parallel(block_M, N):
                o[i, j] = T.if_then_else(max_val[i] == x[i, j], 1.0, 0.0)
            T.copy(o, O[bx * block_M, 0])
    return kernel
