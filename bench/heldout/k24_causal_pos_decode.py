# decode-step causal mask: each batch's query sits at position pos[b]; keys j <= pos[b] are visible
#   --entry causal_decode --param batch=2 --param heads=32 --param S=96 --param dim=32
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def causal_decode(batch, heads, S, dim):
    @T.prim_func
    def kernel(Q: T.Tensor((batch, heads, dim), "float16"), K: T.Tensor((batch, S, dim), "float16"),
               pos: T.Tensor((batch,), "int32"), P: T.Tensor((batch, heads, S), "float32")):
        with T.Kernel(batch, threads=128) as b:
            q = T.alloc_shared((heads, dim), "float16")
            k = T.alloc_shared((S, dim), "float16")
            s = T.alloc_fragment((heads, S), "float")
            mx = T.alloc_fragment((heads,), "float")
            sm = T.alloc_fragment((heads,), "float")
            T.copy(Q[b, 0, 0], q)
            T.copy(K[b, 0, 0], k)
            T.clear(s)
            T.gemm(q, k, s, transpose_B=True)
            for h, j in T.Parallel(heads, S):
                s[h, j] = T.if_then_else(j <= pos[b], s[h, j] * 0.17677669, -T.infinity("float"))
            T.reduce_max(s, mx, dim=1)
            for h, j in T.Parallel(heads, S):
                s[h, j] = T.exp(s[h, j] - mx[h])
            T.reduce_sum(s, sm, dim=1)
            for h, j in T.Parallel(heads, S):
                s[h, j] = s[h, j] / sm[h]
            T.copy(s, P[b, 0, 0])
    return kernel
