# W8A16: int8 weights (N, K) with per-output-channel fp16 scales
#   --entry w8a16 --param M=32 --param N=64 --param K=128
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def w8a16(M, N, K, block_M=32, block_N=32, block_K=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), W: T.Tensor((N, K), "int8"), Scale: T.Tensor((N,), "float16"),
               C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a = T.alloc_shared((block_M, block_K), "float16")
            w = T.alloc_shared((block_N, block_K), "int8")
            w_f = T.alloc_shared((block_N, block_K), "float16")
            c = T.alloc_fragment((block_M, block_N), "float")
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], a)
                T.copy(W[bx * block_N, k * block_K], w)
                for i, j in T.Parallel(block_N, block_K):
                    w_f[i, j] = T.cast(w[i, j], "float16")
                T.gemm(a, w_f, c, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                c[i, j] = c[i, j] * Scale[bx * block_N + j]
            T.copy(c, C[by * block_M, bx * block_N])
    return kernel
