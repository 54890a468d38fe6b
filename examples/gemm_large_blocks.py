# Y = relu(A @ B + bias) with GPU-sized 128x128 blocks: the 16-tile fp32 accumulator does not fit the DST
# registers (4-8 tiles), so partial sums are spilled to an L1 circular buffer between K steps, one group of
# tiles at a time. bf16 inputs, fp32 bias and output; 256x256x256 on a 2x2 grid, K step 64.
from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((256, 256), "bfloat16"), B: T.Buffer((256, 256), "bfloat16"),
         bias: T.Buffer((256, 256), "float32"), Y: T.Buffer((256, 256), "float32")):
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((128, 64), "bfloat16")
    B_s = T.alloc_shared((64, 128), "bfloat16")
    bias_s = T.alloc_shared((128, 128), "float32")
    Y_l = T.alloc_local((128, 128), "float32")
    T.tile.zero(Y_l)
    for k in range(4):
        T.tile.copy(A_s, A[by * 128:by * 128 + 128, k * 64:k * 64 + 64])
        T.tile.copy(B_s, B[k * 64:k * 64 + 64, bx * 128:bx * 128 + 128])
        T.tile.gemm(Y_l, A_s, B_s, Y_l, beta=1.0)
    T.tile.copy(bias_s, bias[by * 128:by * 128 + 128, bx * 128:bx * 128 + 128])
    T.tile.add(Y_l, Y_l, bias_s)
    T.tile.maximum(Y_l, Y_l, T.float32(0))
    T.tile.copy(Y[by * 128:by * 128 + 128, bx * 128:bx * 128 + 128], Y_l)
