# Element-wise add as TileLang's examples write it: tiles staged through shared memory, a T.Parallel body
# computing C = A + B per element, the result going through a shared tile on its way out.
#   tilefarm verify examples/tilelang/elementwise_add.py --entry elementwise_add --param M=128 --param N=256
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def elementwise_add(M, N, block_M=32, block_N=64, in_dtype="bfloat16", out_dtype="bfloat16", threads=128):

    @T.prim_func
    def elem_add(
        A: T.Tensor((M, N), in_dtype),
        B: T.Tensor((M, N), in_dtype),
        C: T.Tensor((M, N), out_dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_N), in_dtype)
            B_shared = T.alloc_shared((block_M, block_N), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), out_dtype)
            C_shared = T.alloc_shared((block_M, block_N), out_dtype)

            T.copy(A[by * block_M, bx * block_N], A_shared)
            T.copy(B[by * block_M, bx * block_N], B_shared)
            for local_y, local_x in T.Parallel(block_M, block_N):
                C_local[local_y, local_x] = A_shared[local_y, local_x] + B_shared[local_y, local_x]
            T.copy(C_local, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return elem_add
