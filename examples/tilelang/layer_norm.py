# LayerNorm with affine vectors: y = (x - mean) * rstd * gamma + beta over the last axis, gamma and beta being
# per-column vectors broadcast down the rows. The per-row statistics are written out too (1-D outputs).
#   tilefarm verify examples/tilelang/layer_norm.py --entry layer_norm --param rows=128 --param cols=256
#   tilefarm verify examples/tilelang/layer_norm.py --entry layer_norm --param rows=96 --param cols=128 --param dtype=float32 --param block_rows=32
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[3, 4, 5])
def layer_norm(rows, cols, eps=1e-5, block_rows=32, dtype="bfloat16"):
    acc = "float32"

    @T.prim_func
    def main(
        X: T.Tensor((rows, cols), dtype),
        gamma: T.Tensor((cols,), dtype),
        beta: T.Tensor((cols,), dtype),
        Y: T.Tensor((rows, cols), dtype),
        mean: T.Tensor((rows,), acc),
        rstd: T.Tensor((rows,), acc),
    ):
        with T.Kernel(T.ceildiv(rows, block_rows)) as bx:
            x_s = T.alloc_shared((block_rows, cols), dtype)
            g_s = T.alloc_shared((cols,), dtype)
            b_s = T.alloc_shared((cols,), dtype)
            x = T.alloc_fragment((block_rows, cols), acc)
            centered = T.alloc_fragment((block_rows, cols), acc)
            y = T.alloc_fragment((block_rows, cols), dtype)
            row_sum = T.alloc_fragment((block_rows,), acc)
            var_sum = T.alloc_fragment((block_rows,), acc)
            mu = T.alloc_fragment((block_rows,), acc)
            inv = T.alloc_fragment((block_rows,), acc)

            T.copy(X[bx * block_rows, 0], x_s)
            T.copy(gamma, g_s)
            T.copy(beta, b_s)
            T.copy(x_s, x)
            T.reduce_sum(x, row_sum, dim=1)
            for i in T.Parallel(block_rows):
                mu[i] = row_sum[i] / cols
            for i, j in T.Parallel(block_rows, cols):
                centered[i, j] = x[i, j] - mu[i]
                x[i, j] = centered[i, j] * centered[i, j]
            T.reduce_sum(x, var_sum, dim=1)
            for i in T.Parallel(block_rows):
                inv[i] = T.rsqrt(var_sum[i] / cols + eps)
                mean[bx * block_rows + i] = mu[i]
                rstd[bx * block_rows + i] = inv[i]
            for i, j in T.Parallel(block_rows, cols):
                y[i, j] = centered[i, j] * inv[i] * g_s[j] + b_s[j]
            T.copy(y, Y[bx * block_rows, 0])

    return main
