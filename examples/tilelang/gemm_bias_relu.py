# Fused GEMM + bias + ReLU: Y = max(X @ W + bias, 0). The epilogue is a T.Parallel body over the accumulator
# fragment, fused into the same DST registers as the matmul on Tenstorrent.
#   tilefarm verify examples/tilelang/gemm_bias_relu.py --entry gemm_bias_relu --param M=128 --param N=128 --param K=96
import tilelang
import tilelang.language as T
from tilelang.utils.target import TENSTORRENT_TARGET


@tilelang.jit(out_idx=[-1], target=TENSTORRENT_TARGET)
def gemm_bias_relu(M, N, K, block_M=32, block_N=32, block_K=32, dtype=T.float16, accum_dtype=T.float32,
                   num_stages=2):

    @T.prim_func
    def main(
        X: T.Tensor((M, K), dtype),
        W: T.Tensor((K, N), dtype),
        bias: T.Tensor((M, N), accum_dtype),
        Y: T.Tensor((M, N), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            X_shared = T.alloc_shared((block_M, block_K), dtype)
            W_shared = T.alloc_shared((block_K, block_N), dtype)
            bias_shared = T.alloc_shared((block_M, block_N), accum_dtype)
            Y_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            T.clear(Y_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(X[by * block_M, ko * block_K], X_shared)
                T.copy(W[ko * block_K, bx * block_N], W_shared)
                T.gemm(X_shared, W_shared, Y_local)

            T.copy(bias[by * block_M, bx * block_N], bias_shared)
            for i, j in T.Parallel(block_M, block_N):
                Y_local[i, j] = T.max(Y_local[i, j] + bias_shared[i, j], 0)
            T.copy(Y_local, Y[by * block_M, bx * block_N])

    return main
