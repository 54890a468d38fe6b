# per-block column max via reduce_max(dim=0) on a 4-D tensor with ragged last dim
#   --entry colmax --param B=2 --param H=2 --param S=64 --param D=48
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def colmax(B, H, S, D):
    @T.prim_func
    def kernel(X: T.Tensor((B, H, S, D), "float32"), O: T.Tensor((B, H, D), "float32")):
        with T.Kernel(H, B, threads=128) as (bh, bb):
            x = T.alloc_fragment((S, D), "float32")
            o = T.alloc_fragment((D,), "float32")
            T.copy(X[bb, bh, 0, 0], x)
            T.reduce_max(x, o, dim=0)
            T.copy(o, O[bb, bh, 0])
    return kernel
