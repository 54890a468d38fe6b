# flash-attention backward, one head: per key block dK, dV, and dQ accumulated with T.atomic_add
#   --entry bwd --param seq=64 --param dim=32
import tilelang
import tilelang.language as T


@tilelang.jit
def bwd(seq, dim, blk=32, scale=0.125):
    @T.prim_func
    def kernel(Q: T.Tensor((seq, dim), "float16"), K: T.Tensor((seq, dim), "float16"),
               V: T.Tensor((seq, dim), "float16"), dO: T.Tensor((seq, dim), "float16"),
               lse: T.Tensor((seq,), "float32"), Delta: T.Tensor((seq,), "float32"),
               dQ: T.Tensor((seq, dim), "float32"), dK: T.Tensor((seq, dim), "float32"),
               dV: T.Tensor((seq, dim), "float32")):
        with T.Kernel(seq // blk, threads=128) as bx:
            k = T.alloc_shared((blk, dim), "float16")
            v = T.alloc_shared((blk, dim), "float16")
            q = T.alloc_shared((blk, dim), "float16")
            do = T.alloc_shared((blk, dim), "float16")
            s = T.alloc_fragment((blk, blk), "float")      # [keys, queries]
            dp = T.alloc_fragment((blk, blk), "float")
            p16 = T.alloc_shared((blk, blk), "float16")
            ds16 = T.alloc_shared((blk, blk), "float16")
            lse_s = T.alloc_shared((blk,), "float")
            dl_s = T.alloc_shared((blk,), "float")
            dk = T.alloc_fragment((blk, dim), "float")
            dv = T.alloc_fragment((blk, dim), "float")
            dq = T.alloc_fragment((blk, dim), "float")
            T.copy(K[bx * blk, 0], k)
            T.copy(V[bx * blk, 0], v)
            T.clear(dk)
            T.clear(dv)
            for nb in T.serial(seq // blk):
                T.copy(Q[nb * blk, 0], q)
                T.copy(dO[nb * blk, 0], do)
                T.copy(lse[nb * blk], lse_s)
                T.copy(Delta[nb * blk], dl_s)
                T.clear(s)
                T.gemm(k, q, s, transpose_B=True)
                for i, j in T.Parallel(blk, blk):
                    s[i, j] = T.exp(s[i, j] * scale - lse_s[j])
                T.clear(dp)
                T.gemm(v, do, dp, transpose_B=True)
                T.copy(s, p16)
                T.gemm(p16, do, dv)
                for i, j in T.Parallel(blk, blk):
                    dp[i, j] = s[i, j] * (dp[i, j] - dl_s[j]) * scale
                T.copy(dp, ds16)
                T.gemm(ds16, q, dk)
                T.clear(dq)
                T.gemm(ds16, k, dq, transpose_A=True)
                T.atomic_add(dQ[nb * blk, 0], dq)
            T.copy(dk, dK[bx * blk, 0])
            T.copy(dv, dV[bx * blk, 0])
    return kernel
