# out = in^T, via shared-memory transposed reads
#   --entry transpose --param M=64 --param N=96
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def transpose(M, N, blk=32, dtype="float16"):
    @T.prim_func
    def kernel(A: T.Tensor((M, N), dtype), B: T.Tensor((N, M), dtype)):
        with T.Kernel(T.ceildiv(N, blk), T.ceildiv(M, blk), threads=128) as (bx, by):
            a_s = T.alloc_shared((blk, blk), dtype)
            b_l = T.alloc_fragment((blk, blk), dtype)
            T.copy(A[by * blk, bx * blk], a_s)
            for i, j in T.Parallel(blk, blk):
                b_l[i, j] = a_s[j, i] * 2.0
            T.copy(b_l, B[bx * blk, by * blk])
    return kernel
