# per-sequence scale of packed rows: cu_seqlens gives each sequence's rows
#   --entry varlen_scale --param batch=3 --param total=192 --param D=64
import tilelang
import tilelang.language as T


@tilelang.jit
def varlen_scale(batch, total, D, block_M=32):
    @T.prim_func
    def kernel(X: T.Tensor((total, D), "float32"), cu_seqlens: T.Tensor((batch + 1,), "int32"),
               Gain: T.Tensor((batch,), "float32"), Y: T.Tensor((total, D), "float32")):
        with T.Kernel(T.ceildiv(total, block_M), batch, threads=128) as (bx, bb):
            start = cu_seqlens[bb]
            end = cu_seqlens[bb + 1]
            x = T.alloc_fragment((block_M, D), "float32")
            if start + bx * block_M < end:
                T.copy(X[start + bx * block_M, 0], x)
                for i, j in T.Parallel(block_M, D):
                    x[i, j] = x[i, j] * Gain[bb]
                for i, j in T.Parallel(block_M, D):
                    if start + bx * block_M + i < end:
                        Y[start + bx * block_M + i, j] = x[i, j]
    return kernel
