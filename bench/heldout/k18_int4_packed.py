# W4A16: two int4 weights packed per uint8 along K, per-channel scale
#   --entry w4a16 --param M=32 --param N=32 --param K=64
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def w4a16(M, N, K, block_K=32):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), Wp: T.Tensor((N, K // 2), "uint8"), Scale: T.Tensor((N,), "float16"),
               C: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((M, block_K), "float16")
            wp = T.alloc_shared((N, block_K // 2), "uint8")
            w = T.alloc_fragment((N, block_K), "float16")
            c = T.alloc_fragment((M, N), "float")
            T.clear(c)
            for k in T.serial(K // block_K):
                T.copy(A[0, k * block_K], a)
                T.copy(Wp[0, k * block_K // 2], wp)
                for i, j in T.Parallel(N, block_K):
                    w[i, j] = T.cast((wp[i, j // 2] >> ((j % 2) * 4)) & 15, "float16") - 8.0
                T.gemm(a, w, c, transpose_B=True)
            for i, j in T.Parallel(M, N):
                c[i, j] = c[i, j] * Scale[j]
            T.copy(c, C)
    return kernel
