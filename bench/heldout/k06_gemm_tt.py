# C = A^T @ B^T with A stored (K, M), B stored (N, K)
#   --entry gemm_tt --param M=64 --param N=96 --param K=128
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def gemm_tt(M, N, K, block_M=32, block_N=32, block_K=32):
    @T.prim_func
    def kernel(A: T.Tensor((K, M), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a = T.alloc_shared((block_K, block_M), "float16")
            b = T.alloc_shared((block_N, block_K), "float16")
            c = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[k * block_K, by * block_M], a)
                T.copy(B[bx * block_N, k * block_K], b)
                T.gemm(a, b, c, transpose_A=True, transpose_B=True)
            T.copy(c, C[by * block_M, bx * block_N])
    return kernel
