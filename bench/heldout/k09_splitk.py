# split-K GEMM with atomic adds into fp32 C
#   --entry splitk --param M=64 --param N=64 --param K=256
import tilelang
import tilelang.language as T


@tilelang.jit
def splitk(M, N, K, split_k=4, block_M=32, block_N=32, block_K=32):
    splitK = K // split_k
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split_k, threads=128) as (bx, by, bz):
            a = T.alloc_shared((block_M, block_K), "float16")
            b = T.alloc_shared((block_K, block_N), "float16")
            c = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(c)
            for ko in T.Pipelined(T.ceildiv(splitK, block_K), num_stages=2):
                T.copy(A[by * block_M, bz * splitK + ko * block_K], a)
                T.copy(B[bz * splitK + ko * block_K, bx * block_N], b)
                T.gemm(a, b, c)
            for i, j in T.Parallel(block_M, block_N):
                T.atomic_add(C[by * block_M + i, bx * block_N + j], c[i, j])
    return kernel
