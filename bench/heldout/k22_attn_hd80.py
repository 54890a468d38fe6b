# non-causal attention forward with head dim 80 on [B, H, S, D] tensors
#   --entry attn80 --param B=1 --param H=2 --param S=64 --param D=80
import math
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-1])
def attn80(B, H, S, D, block_M=32, block_N=32):
    scale = 1.0 / math.sqrt(D)
    @T.prim_func
    def kernel(Q: T.Tensor((B, H, S, D), "float16"), K: T.Tensor((B, H, S, D), "float16"),
               V: T.Tensor((B, H, S, D), "float16"), O: T.Tensor((B, H, S, D), "float16")):
        with T.Kernel(T.ceildiv(S, block_M), H, B, threads=128) as (bx, by, bz):
            q = T.alloc_shared((block_M, D), "float16")
            k = T.alloc_shared((block_N, D), "float16")
            v = T.alloc_shared((block_N, D), "float16")
            s = T.alloc_fragment((block_M, block_N), "float")
            p = T.alloc_fragment((block_M, block_N), "float16")
            o = T.alloc_fragment((block_M, D), "float")
            m = T.alloc_fragment((block_M,), "float")
            mo = T.alloc_fragment((block_M,), "float")
            l = T.alloc_fragment((block_M,), "float")
            ls = T.alloc_fragment((block_M,), "float")
            T.copy(Q[bz, by, bx * block_M, 0], q)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float"))
            for kb in T.Pipelined(T.ceildiv(S, block_N), num_stages=2):
                T.copy(K[bz, by, kb * block_N, 0], k)
                T.copy(V[bz, by, kb * block_N, 0], v)
                T.clear(s)
                T.gemm(q, k, s, transpose_B=True)
                T.copy(m, mo)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, j in T.Parallel(block_M, block_N):
                    s[i, j] = T.exp((s[i, j] - m[i]) * scale)
                T.reduce_sum(s, ls, dim=1)
                for i in T.Parallel(block_M):
                    l[i] = l[i] * T.exp((mo[i] - m[i]) * scale) + ls[i]
                for i, j in T.Parallel(block_M, D):
                    o[i, j] = o[i, j] * T.exp((mo[i] - m[i]) * scale)
                T.copy(s, p)
                T.gemm(p, v, o)
            for i, j in T.Parallel(block_M, D):
                o[i, j] = o[i, j] / l[i]
            T.copy(o, O[bz, by, bx * block_M, 0])
    return kernel
