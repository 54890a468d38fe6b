# B given as (N, K); transposed in shared memory by element reads, then a plain gemm
#   --entry gemm_mt --param M=64 --param N=64 --param K=64
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def gemm_mt(M, N, K, bm=32, bn=32, bk=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // bn, M // bm, threads=128) as (bx, by):
            a = T.alloc_shared((bm, bk), "float16")
            b = T.alloc_shared((bn, bk), "float16")
            bt = T.alloc_shared((bk, bn), "float16")
            c = T.alloc_fragment((bm, bn), "float32")
            T.clear(c)
            for k in T.serial(K // bk):
                T.copy(A[by * bm, k * bk], a)
                T.copy(B[bx * bn, k * bk], b)
                for i, j in T.Parallel(bk, bn):
                    bt[i, j] = b[j, i]
                T.gemm(a, bt, c)
            T.copy(c, C[by * bm, bx * bn])
    return kernel
