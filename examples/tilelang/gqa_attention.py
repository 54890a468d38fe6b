# Grouped-query attention forward, sequence-major [batch, seq_len, heads, dim] layout: `groups` query heads share
# one key/value head (head_kv = heads // groups), found as h // groups. The regions slice the sequence and the
# feature axes and fix the batch and head indices, so the tensors are tiled over (seq_len, dim).
#   tilefarm verify examples/tilelang/gqa_attention.py --entry gqa_attention --param batch=1 --param heads=4 --param groups=2 --param seq_len=128 --param dim=64 --param causal=true
#   tilefarm verify examples/tilelang/gqa_attention.py --entry gqa_attention --param batch=1 --param heads=4 --param groups=4 --param seq_len=64 --param dim=64 --param causal=false --param block_M=32 --param block_N=32
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[3])
def gqa_attention(batch, heads, groups, seq_len, dim, causal=False, block_M=64, block_N=64, dtype="bfloat16"):
    assert heads % groups == 0, "heads must be a multiple of groups"
    head_kv = heads // groups
    scale = (1.0 / dim) ** 0.5
    accum_dtype = "float32"

    @T.prim_func
    def main(
        Q: T.Tensor((batch, seq_len, heads, dim), dtype),
        K: T.Tensor((batch, seq_len, head_kv, dim), dtype),
        V: T.Tensor((batch, seq_len, head_kv, dim), dtype),
        Output: T.Tensor((batch, seq_len, heads, dim), dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            scores = T.alloc_fragment((block_M, block_N), accum_dtype)
            probs = T.alloc_fragment((block_M, block_N), dtype)
            out = T.alloc_fragment((block_M, dim), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            row_max_prev = T.alloc_fragment((block_M,), accum_dtype)
            rescale = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)
            denom = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.clear(out)
            T.clear(denom)
            T.fill(row_max, -T.infinity(accum_dtype))
            steps = T.min(T.ceildiv(seq_len, block_N), T.ceildiv((bx + 1) * block_M, block_N)) if causal \
                else T.ceildiv(seq_len, block_N)
            for step in T.Pipelined(steps, num_stages=2):
                T.copy(K[bz, step * block_N:(step + 1) * block_N, by // groups, :], K_shared)
                T.clear(scores)
                T.gemm(Q_shared, K_shared, scores, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    scores[i, j] = scores[i, j] * scale
                if causal:
                    for i, j in T.Parallel(block_M, block_N):
                        scores[i, j] = T.if_then_else(bx * block_M + i >= step * block_N + j, scores[i, j],
                                                      -T.infinity(accum_dtype))
                T.copy(row_max, row_max_prev)
                T.reduce_max(scores, row_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    rescale[i] = T.exp(row_max_prev[i] - row_max[i])
                for i, j in T.Parallel(block_M, block_N):
                    scores[i, j] = T.exp(scores[i, j] - row_max[i])
                T.reduce_sum(scores, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    denom[i] = denom[i] * rescale[i] + row_sum[i]
                for i, j in T.Parallel(block_M, dim):
                    out[i, j] = out[i, j] * rescale[i]
                T.copy(scores, probs)
                T.copy(V[bz, step * block_N:(step + 1) * block_N, by // groups, :], V_shared)
                T.gemm(probs, V_shared, out)
            for i, j in T.Parallel(block_M, dim):
                out[i, j] = out[i, j] / denom[i]
            T.copy(out, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return main
