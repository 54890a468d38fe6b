# reverse cumulative sum along rows (dim=0) of a fragment, then bf16 store
#   --entry revscan --param M=64 --param N=64
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def revscan(M, N, block_N=32):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "bfloat16")):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            x = T.alloc_fragment((M, block_N), "float32")
            T.copy(X[0, bx * block_N], x)
            T.cumsum(x, dim=0, reverse=True)
            T.copy(x, Y[0, bx * block_N])
    return kernel
