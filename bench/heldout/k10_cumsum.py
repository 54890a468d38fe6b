# row-wise inclusive prefix sum
#   --entry rowscan --param M=64 --param N=64
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def rowscan(M, N, block_M=32):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_shared((block_M, N), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.cumsum(x, dim=1)
            T.copy(x, Y[bx * block_M, 0])
    return kernel
