# transposed store written element-wise straight into global memory, plus bias per output row
#   --entry tstore --param M=64 --param N=96
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def tstore(M, N, blk=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), "float32"), bias: T.Tensor((N,), "float32"), B: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(N, blk), T.ceildiv(M, blk), threads=128) as (bx, by):
            a = T.alloc_fragment((blk, blk), "float32")
            T.copy(A[by * blk, bx * blk], a)
            for i, j in T.Parallel(blk, blk):
                B[bx * blk + j, by * blk + i] = a[i, j] + bias[bx * blk + j]
    return kernel
