# Flash attention forward over [batch, heads, seq_len, dim] tensors, one block of queries per (seq block, head,
# batch) of a 3-D grid. Scores are kept in log2 units (exp2), the running row maximum and row sum are rescaled as
# each block of keys arrives (online softmax), and with causal=True the mask is built from the block indices and
# the keys loop stops at the diagonal -- so blocks further down the sequence do more work.
#   tilefarm verify examples/tilelang/flash_attention.py --entry flash_attention --param batch=1 --param heads=2 --param seq_len=128 --param dim=64 --param causal=true
#   tilefarm verify examples/tilelang/flash_attention.py --entry flash_attention --param batch=2 --param heads=1 --param seq_len=128 --param dim=32 --param causal=false --param block_N=32
import math

import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[3])
def flash_attention(batch, heads, seq_len, dim, causal=False, block_M=64, block_N=64, num_stages=2,
                    dtype=T.float16, accum_dtype=T.float32):
    shape = (batch, heads, seq_len, dim)
    sm_scale_log2 = 1.0 / math.sqrt(dim) * math.log2(math.e)

    @T.prim_func
    def attention(
        Q: T.Tensor(shape, dtype),
        K: T.Tensor(shape, dtype),
        V: T.Tensor(shape, dtype),
        O: T.Tensor(shape, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch, threads=128) as (bq, h, b):
            q = T.alloc_shared((block_M, dim), dtype)
            k = T.alloc_shared((block_N, dim), dtype)
            v = T.alloc_shared((block_N, dim), dtype)
            s = T.alloc_fragment((block_M, block_N), accum_dtype)
            p = T.alloc_fragment((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, dim), accum_dtype)
            m = T.alloc_fragment((block_M,), accum_dtype)
            m_prev = T.alloc_fragment((block_M,), accum_dtype)
            alpha = T.alloc_fragment((block_M,), accum_dtype)
            l_part = T.alloc_fragment((block_M,), accum_dtype)
            l = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(Q[b, h, bq * block_M:(bq + 1) * block_M, :], q)
            T.fill(acc, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum_dtype))

            n_blocks = T.ceildiv((bq + 1) * block_M, block_N) if causal else T.ceildiv(seq_len, block_N)
            for kb in T.Pipelined(n_blocks, num_stages=num_stages):
                T.copy(K[b, h, kb * block_N:(kb + 1) * block_N, :], k)
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        s[i, j] = T.if_then_else(bq * block_M + i >= kb * block_N + j, 0, -T.infinity(accum_dtype))
                else:
                    T.clear(s)
                T.gemm(q, k, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)

                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * sm_scale_log2)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp2(s[i, j] * sm_scale_log2 - m[i] * sm_scale_log2)
                T.reduce_sum(s, l_part, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * alpha[i] + l_part[i]
                T.copy(s, p)
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] *= alpha[i]

                T.copy(V[b, h, kb * block_N:(kb + 1) * block_N, :], v)
                T.gemm(p, v, acc, policy=T.GemmWarpPolicy.FullRow)

            for i, j in T.Parallel(block_M, dim):
                acc[i, j] /= l[i]
            T.copy(acc, O[b, h, bq * block_M:(bq + 1) * block_M, :])

    return attention
