# column sums of a tall matrix with an alloc_reducer and cross-block atomics
#   --entry colsum --param M=256 --param N=64
import tilelang
import tilelang.language as T


@tilelang.jit
def colsum(M, N, block_M=64):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float32"), S: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            acc = T.alloc_reducer((N,), "float32", op="sum", replication="all")
            T.copy(X[bx * block_M, 0], x)
            T.fill(acc, 0)
            for i, j in T.Parallel(block_M, N):
                acc[j] += x[i, j]
            T.finalize_reducer(acc)
            for j in T.Parallel(N):
                T.atomic_add(S[j], acc[j])
    return kernel
