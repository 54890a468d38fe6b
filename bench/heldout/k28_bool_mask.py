# bool key mask used directly as the condition
#   --entry boolmask --param B=2 --param N=64
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def boolmask(B, N, rows=32):
    @T.prim_func
    def kernel(S: T.Tensor((B, rows, N), "float32"), Mask: T.Tensor((B, N), "bool"), O: T.Tensor((B, rows, N), "float32")):
        with T.Kernel(B, threads=128) as b:
            s = T.alloc_fragment((rows, N), "float32")
            T.copy(S[b, 0, 0], s)
            for i, j in T.Parallel(rows, N):
                s[i, j] = T.if_then_else(Mask[b, j], s[i, j], 0.0)
            T.copy(s, O[b, 0, 0])
    return kernel
