# elementwise gelu-ish over a symbolic, ragged number of rows
#   --entry dyn_act --param N=64 --param rows=100
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def dyn_act(N, block_M=32):
    M = T.symbolic("rows")
    @T.prim_func
    def kernel(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, N), "float")
            T.copy(X[bx * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * T.sigmoid(1.702 * x[i, j])
            T.copy(x, Y[bx * block_M, 0])
    return kernel
