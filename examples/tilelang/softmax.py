# Row softmax as TileLang users write it: a block of rows staged in shared memory, T.reduce_max over each row,
# exp(x - max) in a T.Parallel body, T.reduce_sum, then the division by the row sum.
#   tilefarm verify examples/tilelang/softmax.py --entry softmax --param M=256 --param N=128 --param block_M=32
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def softmax(M, N, block_M=32, dtype="bfloat16", accum_dtype="float"):

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            x_shared = T.alloc_shared((block_M, N), dtype)
            x = T.alloc_fragment((block_M, N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(X[bx * block_M, 0], x_shared)
            T.copy(x_shared, x)
            T.reduce_max(x, row_max, dim=1, clear=True)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = T.exp(x[i, j] - row_max[i])
            T.reduce_sum(x, row_sum, dim=1)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] / row_sum[i]
            T.copy(x, Y[bx * block_M, 0])

    return main
