# C^T stored from a gemm fragment, non-square tiles
#   --entry gemm_store_t --param M=64 --param N=32 --param K=64
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def gemm_store_t(M, N, K, block_M=64, block_N=32, block_K=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((K, N), "bfloat16"), CT: T.Tensor((N, M), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a = T.alloc_shared((block_M, block_K), "bfloat16")
            b = T.alloc_shared((block_K, block_N), "bfloat16")
            c = T.alloc_fragment((block_M, block_N), "float32")
            ct = T.alloc_fragment((block_N, block_M), "float32")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], a)
                T.copy(B[k * block_K, bx * block_N], b)
                T.gemm(a, b, c)
            for i, j in T.Parallel(block_N, block_M):
                ct[i, j] = c[j, i]
            T.copy(ct, CT[bx * block_N, by * block_M])
    return kernel
