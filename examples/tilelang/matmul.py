# GEMM in TileLang's current eager-JIT style: M, N, K bound by the tensors' shapes, the output created with T.empty
# in the input dtype while the fragment accumulates in float32 (what a GPU kernel author writes today).
#   tilefarm verify examples/tilelang/matmul.py --entry matmul --param A=bfloat16[256,128] --param B=bfloat16[128,256] --param dtype=bfloat16
import tilelang
import tilelang.language as T


@tilelang.jit
def matmul(A, B, block_M=128, block_N=128, block_K=32, dtype=T.float16, accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")

    A: T.Tensor((M, K), dtype)
    B: T.Tensor((K, N), dtype)
    C = T.empty((M, N), dtype)

    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
        A_shared = T.alloc_shared((block_M, block_K), dtype)
        B_shared = T.alloc_shared((block_K, block_N), dtype)
        C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

        T.clear(C_local)
        for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
            T.copy(A[by * block_M, k * block_K], A_shared)
            T.copy(B[k * block_K, bx * block_N], B_shared)
            T.gemm(A_shared, B_shared, C_local)

        T.copy(C_local, C[by * block_M, bx * block_N])

    return C
