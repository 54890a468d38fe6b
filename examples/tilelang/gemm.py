# Tiled GEMM written as TileLang's README writes it: a @tilelang.jit kernel factory, T.Pipelined over K,
# T.clear + T.gemm accumulating into a fragment. Compile with e.g.
#   tilefarm verify examples/tilelang/gemm.py --entry matmul --param M=256 --param N=256 --param K=128
import tilelang
import tilelang.language as T
import torch  # host-side only: never evaluated when the kernel is built


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M=64, block_N=64, block_K=32, dtype="float16", accum_dtype="float"):

    @T.prim_func
    def gemm(
        A: T.Tensor((M, K), dtype),
        B: T.Tensor((K, N), dtype),
        C: T.Tensor((M, N), accum_dtype),
    ):
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

    return gemm


def main():
    kernel = matmul(1024, 1024, 1024)
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    torch.testing.assert_close(kernel(a, b), a @ b, rtol=1e-2, atol=1e-2)


if __name__ == "__main__":
    main()
