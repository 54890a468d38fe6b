# single-query decode over a KV cache with per-batch valid lengths (cache_seqlens)
#   --entry decode --param batch=2 --param heads=32 --param seqlen_kv=128 --param dim=64
import math
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def decode(batch, heads, seqlen_kv, dim, block_N=32):
    scale = 1.0 / math.sqrt(dim)
    @T.prim_func
    def kernel(Q: T.Tensor((batch, heads, dim), "float16"),
               K: T.Tensor((batch, seqlen_kv, dim), "float16"),
               V: T.Tensor((batch, seqlen_kv, dim), "float16"),
               cache_seqlens: T.Tensor((batch,), "int32"),
               Out: T.Tensor((batch, heads, dim), "float16")):
        with T.Kernel(batch, threads=128) as bz:
            q = T.alloc_shared((heads, dim), "float16")
            k = T.alloc_shared((block_N, dim), "float16")
            v = T.alloc_shared((block_N, dim), "float16")
            acc_s = T.alloc_fragment((heads, block_N), "float")
            acc_s_cast = T.alloc_fragment((heads, block_N), "float16")
            acc_o = T.alloc_fragment((heads, dim), "float")
            m = T.alloc_fragment((heads,), "float")
            m_prev = T.alloc_fragment((heads,), "float")
            l = T.alloc_fragment((heads,), "float")
            rs = T.alloc_fragment((heads,), "float")
            T.copy(Q[bz, 0, 0], q)
            T.fill(acc_o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float"))
            for kb in T.Pipelined(T.ceildiv(seqlen_kv, block_N), num_stages=2):
                T.copy(K[bz, kb * block_N, 0], k)
                T.copy(V[bz, kb * block_N, 0], v)
                T.clear(acc_s)
                T.gemm(q, k, acc_s, transpose_B=True)
                for i, j in T.Parallel(heads, block_N):
                    acc_s[i, j] = T.if_then_else(kb * block_N + j < cache_seqlens[bz], acc_s[i, j] * scale, -T.infinity("float"))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(heads):
                    rs[i] = T.exp(m_prev[i] - m[i])
                for i, j in T.Parallel(heads, block_N):
                    acc_s[i, j] = T.exp(acc_s[i, j] - m[i])
                for i in T.Parallel(heads):
                    l[i] = l[i] * rs[i]
                T.reduce_sum(acc_s, rs, dim=1)
                for i in T.Parallel(heads):
                    l[i] = l[i] + rs[i]
                for i, j in T.Parallel(heads, dim):
                    acc_o[i, j] = acc_o[i, j] * T.exp(m_prev[i] - m[i])
                T.copy(acc_s, acc_s_cast)
                T.gemm(acc_s_cast, v, acc_o)
            for i, j in T.Parallel(heads, dim):
                acc_o[i, j] = acc_o[i, j] / l[i]
            T.copy(acc_o, Out[bz, 0, 0])
    return kernel
