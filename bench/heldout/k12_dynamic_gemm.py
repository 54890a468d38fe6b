# GEMM with a symbolic M
#   --entry dyn_gemm --param N=64 --param K=64 --param m=96
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def dyn_gemm(N, K, block_M=32, block_N=32, block_K=32):
    M = T.dynamic("m")
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a = T.alloc_shared((block_M, block_K), "float16")
            b = T.alloc_shared((block_K, block_N), "float16")
            c = T.alloc_fragment((block_M, block_N), "float")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], a)
                T.copy(B[k * block_K, bx * block_N], b)
                T.gemm(a, b, c)
            T.copy(c, C[by * block_M, bx * block_N])
    return kernel
