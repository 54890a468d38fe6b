# per-column running max over row blocks with a max reducer, result as fp16
#   --entry colmax_red --param M=128 --param N=96
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def colmax_red(M, N, block_M=32):
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float16"), O: T.Tensor((N,), "float16")):
        with T.Kernel(1, threads=128):
            x = T.alloc_fragment((block_M, N), "float")
            r = T.alloc_reducer((N,), "float", op="max", replication="all")
            T.fill(r, -T.infinity("float"))
            for kb in T.serial(M // block_M):
                T.copy(X[kb * block_M, 0], x)
                for i, j in T.Parallel(block_M, N):
                    r[j] = T.max(r[j], x[i, j])
            T.finalize_reducer(r)
            T.copy(r, O)
    return kernel
