# flash-attention backward, dK/dV part, one head: P recomputed from lse, dP = dO V^T, dS = P * (dP - Delta)
#   --entry bwd_dkdv --param seq=64 --param dim=32
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[-2, -1])
def bwd_dkdv(seq, dim, block_M=32, block_N=32, scale=0.125):
    @T.prim_func
    def kernel(Q: T.Tensor((seq, dim), "float16"), K: T.Tensor((seq, dim), "float16"),
               V: T.Tensor((seq, dim), "float16"), dO: T.Tensor((seq, dim), "float16"),
               lse: T.Tensor((seq,), "float32"), Delta: T.Tensor((seq,), "float32"),
               dK: T.Tensor((seq, dim), "float32"), dV: T.Tensor((seq, dim), "float32")):
        with T.Kernel(T.ceildiv(seq, block_M), threads=128) as bx:
            k = T.alloc_shared((block_M, dim), "float16")
            v = T.alloc_shared((block_M, dim), "float16")
            q = T.alloc_shared((block_N, dim), "float16")
            do = T.alloc_shared((block_N, dim), "float16")
            qkT = T.alloc_fragment((block_M, block_N), "float")
            dsT = T.alloc_fragment((block_M, block_N), "float")
            qkT16 = T.alloc_shared((block_M, block_N), "float16")
            dsT16 = T.alloc_shared((block_M, block_N), "float16")
            lse_s = T.alloc_shared((block_N,), "float")
            delta_s = T.alloc_shared((block_N,), "float")
            dk = T.alloc_fragment((block_M, dim), "float")
            dv = T.alloc_fragment((block_M, dim), "float")
            T.copy(K[bx * block_M, 0], k)
            T.copy(V[bx * block_M, 0], v)
            T.clear(dk)
            T.clear(dv)
            for nb in T.Pipelined(T.ceildiv(seq, block_N), num_stages=1):
                T.copy(Q[nb * block_N, 0], q)
                T.copy(dO[nb * block_N, 0], do)
                T.copy(lse[nb * block_N], lse_s)
                T.copy(Delta[nb * block_N], delta_s)
                T.clear(qkT)
                T.gemm(k, q, qkT, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    qkT[i, j] = T.exp(qkT[i, j] * scale - lse_s[j])
                T.clear(dsT)
                T.gemm(v, do, dsT, transpose_B=True)
                T.copy(qkT, qkT16)
                T.gemm(qkT16, do, dv)
                for i, j in T.Parallel(block_M, block_N):
                    dsT[i, j] = qkT[i, j] * (dsT[i, j] - delta_s[j]) * scale
                T.copy(dsT, dsT16)
                T.gemm(dsT16, q, dk)
            T.copy(dk, dK[bx * block_M, 0])
            T.copy(dv, dV[bx * block_M, 0])
    return kernel
