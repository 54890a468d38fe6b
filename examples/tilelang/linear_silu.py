# A linear layer with bias and SiLU: Y = silu(X @ W + b), with b a per-output-feature vector broadcast down the
# rows and silu(z) = z * sigmoid(z), all in the accumulator before the result leaves the core.
#   tilefarm verify examples/tilelang/linear_silu.py --entry linear_silu --param M=128 --param N=128 --param K=96
#   tilefarm verify examples/tilelang/linear_silu.py --entry linear_silu --param M=64 --param N=192 --param K=64 --param block_N=64 --param dtype=bfloat16 --param out_dtype=bfloat16
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def linear_silu(M, N, K, block_M=32, block_N=32, block_K=32, dtype="float16", out_dtype="float32"):
    accum = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, K), dtype), W: T.Tensor((K, N), dtype), bias: T.Tensor((N,), accum),
             Y: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
            X_s = T.alloc_shared((block_M, block_K), dtype)
            W_s = T.alloc_shared((block_K, block_N), dtype)
            acc = T.alloc_fragment((block_M, block_N), accum)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(X[by * block_M, k * block_K], X_s)
                T.copy(W[k * block_K, bx * block_N], W_s)
                T.gemm(X_s, W_s, acc)
            for i, j in T.Parallel(block_M, block_N):
                z = acc[i, j] + bias[bx * block_N + j]
                acc[i, j] = z * T.sigmoid(z)
            T.copy(acc, Y[by * block_M, bx * block_N])

    return main
