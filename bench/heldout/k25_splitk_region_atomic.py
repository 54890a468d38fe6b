# split-K with a tile-wide T.atomic_add of the fragment and bias folded in by split 0
#   --entry splitk2 --param M=64 --param N=64 --param K=128
import tilelang
import tilelang.language as T


@tilelang.jit
def splitk2(M, N, K, split=2, block_M=32, block_N=32, block_K=32):
    chunk = K // split
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "bfloat16"), B: T.Tensor((N, K), "bfloat16"), Bias: T.Tensor((N,), "float32"),
               C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), split, threads=128) as (bx, by, bk):
            a = T.alloc_shared((block_M, block_K), "bfloat16")
            b = T.alloc_shared((block_N, block_K), "bfloat16")
            c = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(c)
            for ko in T.serial(chunk // block_K):
                T.copy(A[by * block_M, bk * chunk + ko * block_K], a)
                T.copy(B[bx * block_N, bk * chunk + ko * block_K], b)
                T.gemm(a, b, c, transpose_B=True)
            if bk == 0:
                for i, j in T.Parallel(block_M, block_N):
                    c[i, j] += Bias[bx * block_N + j]
            T.atomic_add(C[by * block_M, bx * block_N], c)
    return kernel
