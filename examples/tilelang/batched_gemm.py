# Batched GEMM over 3-D tensors, C[b] = A[b] @ B[b]: the batch index is the third grid axis and fixes the leading
# index of every region, so each matrix of the batch is tiled on its own.
#   tilefarm verify examples/tilelang/batched_gemm.py --entry bmm --param batch=3 --param M=128 --param N=96 --param K=64
#   tilefarm verify examples/tilelang/batched_gemm.py --entry bmm --param batch=2 --param M=64 --param N=128 --param K=128 --param block_M=64 --param block_N=64 --param dtype=bfloat16
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def bmm(batch, M, N, K, block_M=32, block_N=32, block_K=32, dtype="float16", accum_dtype="float32"):

    @T.prim_func
    def main(
        A: T.Tensor((batch, M, K), dtype),
        B: T.Tensor((batch, K, N), dtype),
        C: T.Tensor((batch, M, N), accum_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), batch, threads=128) as (bx, by, bz):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.use_swizzle(panel_size=8)
            T.clear(C_local)
            for ko in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[bz, by * block_M, ko * block_K], A_shared)
                T.copy(B[bz, ko * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[bz, by * block_M, bx * block_N])

    return main
