# FP8 GEMM: e4m3 activations, e5m2 weights, fp32 accumulation, per-tensor scale
#   --entry fp8_gemm --param M=64 --param N=64 --param K=64
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def fp8_gemm(M, N, K, block_M=32, block_N=32, block_K=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), T.float8_e4m3fn), B: T.Tensor((N, K), T.float8_e5m2),
               C: T.Tensor((M, N), T.bfloat16)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            a = T.alloc_shared((block_M, block_K), T.float8_e4m3fn)
            b = T.alloc_shared((block_N, block_K), T.float8_e5m2)
            c = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(c)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], a)
                T.copy(B[bx * block_N, k * block_K], b)
                T.gemm(a, b, c, transpose_B=True)
            T.copy(c, C[by * block_M, bx * block_N])
    return kernel
