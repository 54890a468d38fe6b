# Causal (masked) softmax over the rows of a square score matrix: position j of row i is kept for j <= i, the rest
# is -inf before the row maximum and sum -- the attention-probability step with its mask built from the indices.
#   tilefarm verify examples/tilelang/causal_softmax.py --entry causal_softmax --param n=128
#   tilefarm verify examples/tilelang/causal_softmax.py --entry causal_softmax --param n=96 --param block_rows=32 --param dtype=float32
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[1])
def causal_softmax(n, block_rows=32, dtype="bfloat16"):

    @T.prim_func
    def main(S: T.Tensor((n, n), dtype), P: T.Tensor((n, n), dtype)):
        with T.Kernel(T.ceildiv(n, block_rows)) as br:
            s_in = T.alloc_shared((block_rows, n), dtype)
            s = T.alloc_fragment((block_rows, n), "float32")
            row_max = T.alloc_fragment((block_rows,), "float32")
            row_sum = T.alloc_fragment((block_rows,), "float32")
            T.copy(S[br * block_rows, 0], s_in)
            for i, j in T.Parallel(block_rows, n):
                s[i, j] = T.if_then_else(j <= br * block_rows + i, s_in[i, j], -T.infinity("float32"))
            T.reduce_max(s, row_max, dim=1)
            for i, j in T.Parallel(block_rows, n):
                s[i, j] = T.exp(s[i, j] - row_max[i])
            T.reduce_sum(s, row_sum, dim=1)
            for i, j in T.Parallel(block_rows, n):
                s[i, j] = s[i, j] / row_sum[i]
            T.copy(s, P[br * block_rows, 0])

    return main
