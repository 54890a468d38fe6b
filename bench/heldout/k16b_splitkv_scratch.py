# split-KV flash decoding: partial outputs + log-sum-exp per split, then a combine kernel
#   --entry splitkv_g --param batch=1 --param heads=32 --param seqlen=128 --param dim=32
import math
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def splitkv_g(batch, heads, seqlen, dim, num_split=2, block_N=32):
    scale = 1.0 / math.sqrt(dim) * 1.44269504
    part = seqlen // num_split

    @T.macro
    def partial(Q, K, V, glse, Opart):
        with T.Kernel(num_split, batch, threads=128) as (bs, bz):
            q = T.alloc_shared((heads, dim), "float16")
            k = T.alloc_shared((block_N, dim), "float16")
            v = T.alloc_shared((block_N, dim), "float16")
            s = T.alloc_fragment((heads, block_N), "float")
            s16 = T.alloc_fragment((heads, block_N), "float16")
            o = T.alloc_fragment((heads, dim), "float")
            m = T.alloc_fragment((heads,), "float")
            mp = T.alloc_fragment((heads,), "float")
            l = T.alloc_fragment((heads,), "float")
            ls = T.alloc_fragment((heads,), "float")
            T.copy(Q[bz, 0, 0], q)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float"))
            for kb in T.Pipelined(part // block_N, num_stages=2):
                T.copy(K[bz, bs * part + kb * block_N, 0], k)
                T.copy(V[bz, bs * part + kb * block_N, 0], v)
                T.clear(s)
                T.gemm(q, k, s, transpose_B=True)
                T.copy(m, mp)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, j in T.Parallel(heads, block_N):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, ls, dim=1)
                for i in T.Parallel(heads):
                    l[i] = l[i] * T.exp2(mp[i] * scale - m[i] * scale) + ls[i]
                for i, j in T.Parallel(heads, dim):
                    o[i, j] = o[i, j] * T.exp2(mp[i] * scale - m[i] * scale)
                T.copy(s, s16)
                T.gemm(s16, v, o)
            for i, j in T.Parallel(heads, dim):
                o[i, j] = o[i, j] / l[i]
            for i in T.Parallel(heads):
                l[i] = T.log2(l[i]) + m[i] * scale
            T.copy(l, glse[bz, bs, 0])
            T.copy(o, Opart[bz, bs, 0, 0])

    @T.macro
    def combine(glse, Opart, Out):
        with T.Kernel(batch, threads=128) as bz:
            lse = T.alloc_fragment((num_split, heads), "float")
            lmax = T.alloc_fragment((heads,), "float")
            w = T.alloc_fragment((num_split, heads), "float")
            wsum = T.alloc_fragment((heads,), "float")
            o = T.alloc_fragment((heads, dim), "float")
            op = T.alloc_fragment((heads, dim), "float")
            T.copy(glse[bz, 0, 0], lse)
            T.reduce_max(lse, lmax, dim=0)
            for s, h in T.Parallel(num_split, heads):
                w[s, h] = T.exp2(lse[s, h] - lmax[h])
            T.reduce_sum(w, wsum, dim=0)
            T.clear(o)
            for sp in T.serial(num_split):
                T.copy(Opart[bz, sp, 0, 0], op)
                for h, d in T.Parallel(heads, dim):
                    o[h, d] += op[h, d] * w[sp, h] / wsum[h]
            T.copy(o, Out[bz, 0, 0])

    @T.prim_func
    def kernel(Q: T.Tensor((batch, heads, dim), "float16"),
               K: T.Tensor((batch, seqlen, dim), "float16"),
               V: T.Tensor((batch, seqlen, dim), "float16"),
               Out: T.Tensor((batch, heads, dim), "float")):
        glse = T.alloc_global((batch, num_split, heads), "float")
        Opart = T.alloc_global((batch, num_split, heads, dim), "float")
        partial(Q, K, V, glse, Opart)
        combine(glse, Opart, Out)
    return kernel
