"""TTChooseBlocks: the kernel is re-tiled to blocks chosen from the problem -- a small GEMM split to fill the grid,
a large one given a block per core and a longer K step within L1 -- and left as written where re-tiling would
change what it computes (a loop whose steps do not merge, a trip count or a mask that uses the block index); an
online softmax's key loop is re-tiled (its steps merge)."""
from __future__ import annotations

from tvm import tirx
from tvm.script import tirx as T

from compiler import attrs
from compiler.ir import stmts_of
from compiler.passes.choose_blocks import choose_blocks

from .helpers import assert_ir_equal, run, target_attr


def pending_target(arch: str = "wormhole_b0", **changes) -> dict:
    """tt.target as TTApplyTargetDefaults leaves it: partition and CB depth for TTChooseBlocks to choose."""
    return target_attr(arch, **{"partition": None, "cb_depth": None, "blocking": "auto", "math_fidelity": "HiFi2",
                                "math_fidelity_reason": "ttnn's matmul default for bfloat16 operands", **changes})


def gemm(n: int, block: int, k_step: int, acc: str = "float32", target: dict | None = None):
    """C = A @ B (n x n, bf16 operands) in block x block blocks and K steps of k_step, with the attributes
    TTChooseBlocks reads: the grid and buffers (TTCheckKernel) and the target (TTApplyTargetDefaults)."""
    grid = n // block
    dram = {"scope": "global", "shape": [n, n], "tile_axes": [0, 1]}
    buffers = {"A": {**dram, "role": "input", "dtype": "bfloat16"}, "B": {**dram, "role": "input", "dtype": "bfloat16"},
               "C": {**dram, "role": "output", "dtype": acc},
               "A_s": {"role": "staging", "scope": "shared", "shape": [block, k_step], "dtype": "bfloat16"},
               "B_s": {"role": "staging", "scope": "shared", "shape": [k_step, block], "dtype": "bfloat16"},
               "C_l": {"role": "compute", "scope": "local", "shape": [block, block], "dtype": acc}}

    @T.prim_func
    def func(A: T.Buffer((n, n), "bfloat16"), B: T.Buffer((n, n), "bfloat16"), C: T.Buffer((n, n), acc)):
        T.func_attr({"tt.grid": {"vars": ["by", "bx"], "extents": [grid, grid]}, "tt.buffers": buffers,
                     "tt.target": target or pending_target()})
        T.device_entry()
        by, bx = T.cta_id([grid, grid])
        A_s = T.alloc_shared((block, k_step), "bfloat16")
        B_s = T.alloc_shared((k_step, block), "bfloat16")
        C_l = T.alloc_local((block, block), acc)
        T.tile.zero(C_l)
        for k in range(n // k_step):
            T.tile.copy(A_s, A[by * block:by * block + block, k * k_step:k * k_step + k_step])
            T.tile.copy(B_s, B[k * k_step:k * k_step + k_step, bx * block:bx * block + block])
            T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
        T.tile.copy(C[by * block:by * block + block, bx * block:bx * block + block], C_l)

    return func


def explain(func) -> str:
    return "\n".join(func.attrs["tt.blocking"]["explain"])


def test_small_gemm_is_split_to_fill_the_grid():
    # 256^3 in 64 x 64 blocks is 16 blocks for 64 cores: 32 x 32 blocks fill the 8 x 8 grid, K in 8 one-tile steps
    func = run(choose_blocks, gemm(256, 64, 64))["main"]
    expected = gemm(256, 32, 32)
    assert_ir_equal(func.body, expected.body)
    assert list(func.attrs["tt.grid"]["extents"]) == [8, 8]
    assert attrs.BUFFERS.get(func) == attrs.BUFFERS.get(expected)     # C_l, A_s, B_s re-shaped to the blocks
    assert str(func.attrs["tt.target"]["partition"]) == "block"          # A shared along rows, B down columns
    assert "math_fidelity_reason" not in func.attrs["tt.target"]        # moved into tt.blocking, with the blocks
    assert func.attrs["tt.blocking"]["math_fidelity"] == "HiFi2: ttnn's matmul default for bfloat16 operands"
    assert "256 elements in blocks of 64 -> 32 (8 blocks)" in explain(func)


def test_large_gemm_gets_a_block_per_core_and_the_k_step_l1_allows():
    # 4096^3 with a bf16 accumulator: 512 x 512 per core (256 tiles, 512 KiB) and 4-tile K steps (ttnn's
    # in0_block_w for this shape); an fp32 accumulator (1 MiB at 512 x 512) would leave room for one-tile K steps
    # only, so the rows are halved instead: two 256 x 512 blocks per core with 4-tile steps (modelled 4096^3:
    # 9.27 ms with one-tile steps, 2.96 ms so, BENCHMARKS.md)
    func = run(choose_blocks, gemm(4096, 64, 32, acc="bfloat16"))["main"]
    assert_ir_equal(func.body, gemm(4096, 512, 128, acc="bfloat16").body)
    assert int(func.attrs["tt.target"]["cb_depth"]) == 2
    lines = explain(run(choose_blocks, gemm(4096, 64, 32))["main"])
    assert "4096 elements in blocks of 64 -> 256 (16 blocks)" in lines and "-> 512 (8 blocks)" in lines
    assert "4096 elements in steps of 32 -> 128 (32 steps" in lines


def test_as_written_keeps_the_kernels_blocks():
    before = gemm(256, 64, 64, target=pending_target(blocking="as_written"))
    func = run(choose_blocks, before)["main"]
    assert_ir_equal(func.body, before.body)
    assert not func.attrs["tt.blocking"]["changed"]
    assert str(func.attrs["tt.target"]["partition"]) == "block"


def test_target_choices_win():
    target = pending_target(partition="strided", cb_depth=3, math_fidelity="LoFi", core_grid=[4, 2], num_cores=8)
    func = run(choose_blocks, gemm(256, 64, 64, target=target))["main"]
    assert str(func.attrs["tt.target"]["partition"]) == "strided" and int(func.attrs["tt.target"]["cb_depth"]) == 3
    assert str(func.attrs["tt.target"]["math_fidelity"]) == "LoFi"
    # the user's 4 x 2 grid bounds the blocks: 2 rows x 4 columns of blocks
    assert list(func.attrs["tt.grid"]["extents"]) == [2, 4]


def test_k_steps_merge_only_where_the_loop_just_accumulates():
    # an online-softmax loop carries a running maximum: its steps stay as written, the query rows are re-tiled
    def tile(shape, dtype="float32", role="compute", scope="local"):
        return {"role": role, "scope": scope, "shape": shape, "dtype": dtype}
    buffers = {"Q": {**tile([1024, 64], "float16", "input", "global"), "tile_axes": [0, 1]},
               "K": {**tile([1024, 64], "float16", "input", "global"), "tile_axes": [0, 1]},
               "O": {**tile([1024, 1], "float32", "output", "global"), "tile_axes": [0, 1]},
               "q": tile([64, 64], "float16", "staging", "shared"), "k": tile([64, 64], "float16", "staging", "shared"),
               "s": tile([64, 64]), "m": tile([64, 1]), "m_prev": tile([64, 1])}

    @T.prim_func
    def before(Q: T.Buffer((1024, 64), "float16"), K: T.Buffer((1024, 64), "float16"),
               O: T.Buffer((1024, 1), "float32")):
        T.func_attr({"tt.grid": {"vars": ["bq"], "extents": [16]}, "tt.buffers": buffers,
                     "tt.target": pending_target(math_fidelity="HiFi4")})
        T.device_entry()
        bq = T.cta_id([16])
        q = T.alloc_shared((64, 64), "float16")
        k = T.alloc_shared((64, 64), "float16")
        s = T.alloc_local((64, 64), "float32")
        m = T.alloc_local((64, 1), "float32")
        m_prev = T.alloc_local((64, 1), "float32")
        T.tile.copy(q, Q[bq * 64:bq * 64 + 64, 0:64])
        T.tile.fill(m, T.float32(-1e30))
        for kb in range(16):
            T.tile.copy(k, K[kb * 64:kb * 64 + 64, 0:64])
            T.tile.zero(s)
            T.tile.gemm(s, q, k, s, transpose_B=True, beta=1.0)
            T.tile.copy(m_prev, m)
            T.tile.max(m, s, -1, True)
            T.tile.sub(m_prev, m_prev, m)
        T.tile.copy(O[bq * 64:bq * 64 + 64, 0:1], m_prev)

    func = run(choose_blocks, before)["main"]
    loop = next(s for s in stmts_of(func.body.body) if isinstance(s, tirx.For))
    assert int(loop.extent) == 16 and list(func.attrs["tt.buffers"]["k"]["shape"]) == [64, 64]
    assert "loop `kb`: steps as written (loop `kb` carries values other than accumulations" in explain(func)
    # 32 query tiles over 64 cores: one tile row per block
    assert list(func.attrs["tt.grid"]["extents"]) == [32] and list(func.attrs["tt.buffers"]["q"]["shape"]) == [32, 64]


def test_a_block_index_used_elsewhere_keeps_its_blocks():
    # the trip count depends on bx and no index mask hides what a re-tiled block would add: re-tiling bx would
    # change which steps a block takes
    buffers = {"A": {"role": "input", "scope": "global", "shape": [256, 256], "dtype": "float32", "tile_axes": [0, 1]},
               "C": {"role": "output", "scope": "global", "shape": [256, 64], "dtype": "float32", "tile_axes": [0, 1]},
               "A_s": {"role": "staging", "scope": "shared", "shape": [64, 64], "dtype": "float32"},
               "C_l": {"role": "compute", "scope": "local", "shape": [64, 64], "dtype": "float32"}}

    @T.prim_func
    def before(A: T.Buffer((256, 256), "float32"), C: T.Buffer((256, 64), "float32")):
        T.func_attr({"tt.grid": {"vars": ["bx"], "extents": [4]}, "tt.buffers": buffers,
                     "tt.target": pending_target(math_fidelity="HiFi4")})
        T.device_entry()
        bx = T.cta_id([4])
        A_s = T.alloc_shared((64, 64), "float32")
        C_l = T.alloc_local((64, 64), "float32")
        T.tile.zero(C_l)
        for j in range(bx + 1):
            T.tile.copy(A_s, A[bx * 64:bx * 64 + 64, j * 64:j * 64 + 64])
            T.tile.add(C_l, C_l, A_s)
        T.tile.copy(C[bx * 64:bx * 64 + 64, 0:64], C_l)

    func = run(choose_blocks, before)["main"]
    assert_ir_equal(func.body, before.body)
    assert "grid axis `bx`: 4 blocks as written (loop `j`'s trip count uses `bx` and its body has not one index mask)" \
        in explain(func)


def _tile(shape, dtype="float32", role="compute", scope="local"):
    return {"role": role, "scope": scope, "shape": shape, "dtype": dtype}


def online_softmax(rescale: bool, n: int = 2048, d: int = 64, arch: str = "wormhole_b0"):
    """An online softmax over n keys of width d (fp16 Q, K, V, fp32 O) in 64-row query blocks and 64-key steps,
    with the attributes TTChooseBlocks reads; rescale=False: alpha times 0 (each step forgets the earlier ones)."""
    buffers = {"Q": {**_tile([n, d], "float16", "input", "global"), "tile_axes": [0, 1]},
               "K": {**_tile([n, d], "float16", "input", "global"), "tile_axes": [0, 1]},
               "V": {**_tile([n, d], "float16", "input", "global"), "tile_axes": [0, 1]},
               "O": {**_tile([n, d], "float32", "output", "global"), "tile_axes": [0, 1]},
               "q": _tile([64, d], "float16", "staging", "shared"),
               "k": _tile([64, d], "float16", "staging", "shared"),
               "v": _tile([64, d], "float16", "staging", "shared"),
               "s": _tile([64, 64]), "p": _tile([64, 64], "float16"), "acc": _tile([64, d]), "m": _tile([64, 1]),
               "m_prev": _tile([64, 1]), "alpha": _tile([64, 1]), "l": _tile([64, 1]), "l_part": _tile([64, 1])}
    scale = 1.0 if rescale else 0.0

    @T.prim_func
    def before(Q: T.Buffer((n, d), "float16"), K: T.Buffer((n, d), "float16"),
               V: T.Buffer((n, d), "float16"), O: T.Buffer((n, d), "float32")):
        T.func_attr({"tt.grid": {"vars": ["bq"], "extents": [n // 64]}, "tt.buffers": buffers,
                     "tt.target": pending_target(arch, math_fidelity="HiFi2")})
        T.device_entry()
        bq = T.cta_id([n // 64])
        q = T.alloc_shared((64, d), "float16")
        k = T.alloc_shared((64, d), "float16")
        v = T.alloc_shared((64, d), "float16")
        s = T.alloc_local((64, 64), "float32")
        p = T.alloc_local((64, 64), "float16")
        acc = T.alloc_local((64, d), "float32")
        m = T.alloc_local((64, 1), "float32")
        m_prev = T.alloc_local((64, 1), "float32")
        alpha = T.alloc_local((64, 1), "float32")
        l = T.alloc_local((64, 1), "float32")
        l_part = T.alloc_local((64, 1), "float32")
        T.tile.copy(q, Q[bq * 64:bq * 64 + 64, 0:d])
        T.tile.zero(acc)
        T.tile.zero(l)
        T.tile.fill(m, T.float32(-1e30))
        for kb in range(n // 64):
            T.tile.copy(k, K[kb * 64:kb * 64 + 64, 0:d])
            T.tile.zero(s)
            T.tile.gemm(s, q, k, s, transpose_B=True, beta=1.0)
            T.tile.copy(m_prev, m)
            T.tile.max(m, s, -1, True)
            T.tile.sub(alpha, m_prev, m)
            T.tile.mul(alpha, alpha, T.float32(0.125))
            T.tile.exp(alpha, alpha)
            T.tile.mul(alpha, alpha, T.float32(scale))
            T.tile.sub(s, s, m)
            T.tile.mul(s, s, T.float32(0.125))
            T.tile.exp(s, s)
            T.tile.sum(l_part, s, -1, False)
            T.tile.mul(l, l, alpha)
            T.tile.add(l, l, l_part)
            T.tile.copy(p, s)
            T.tile.mul(acc, acc, alpha)
            T.tile.copy(v, V[kb * 64:kb * 64 + 64, 0:d])
            T.tile.gemm(acc, p, v, acc, beta=1.0)
        T.tile.copy(O[bq * 64:bq * 64 + 64, 0:d], acc)
    return before


def test_online_softmax_steps_merge():
    """The whole online softmax (running maximum, the rescale exp(c (m_prev - m)) of the running sum and of the
    output, exp(c (s - m)) @ v): one step over 2n keys leaves m, l and acc as two steps over n do, so the key loop
    is re-tiled like a GEMM's K loop (at least 8 steps: 64 key tiles in steps of 8). Without the rescale of the
    running sum and output (alpha times 0: each step forgets the previous ones) the steps do not merge."""
    merged = run(choose_blocks, online_softmax(rescale=True))["main"]
    # 4 steps, not a GEMM's 8: each step saved saves a rescale of acc (MIN_MERGED_K_STEPS), on 32-row blocks
    # that fill the 64 cores; then 2 (MIN_REFILLED_K_STEPS): k and v, each read by one op of the step, get one
    # buffered block (the reader refills them while the step's other ops run), so the step widens where L1 allows
    assert "loop `kb`: 2048 elements in steps of 64 -> 1024 (2 steps; merged steps leave the same results)" \
        in explain(merged)
    assert "one buffered block of k, v:" in explain(merged)
    assert list(merged.attrs["tt.single_buffered"]) == ["k", "v"]
    assert "grid axis `bq`: 2048 elements in blocks of 64 -> 32 (64 blocks)" in explain(merged)
    assert list(merged.attrs["tt.buffers"]["k"]["shape"]) == [1024, 64]
    assert list(merged.attrs["tt.buffers"]["s"]["shape"])[1] == 1024

    kept = run(choose_blocks, online_softmax(rescale=False))["main"]
    assert "loop `kb`: steps as written (loop `kb` carries values other than accumulations" in explain(kept)
    assert list(kept.attrs["tt.buffers"]["k"]["shape"]) == [64, 64]


def test_online_softmax_blocks_trade_query_rows_for_wider_key_steps():
    """Where the query blocks cannot be one per core (8192 keys, 128 wide, on 4x4 Blackhole cores), the largest query
    blocks L1 allows (256 rows) leave room for 256-key steps only, and every step rescales the whole output block:
    smaller query blocks with wider key steps do the same score tiles with fewer rescales, and on 16 cores their
    extra reads of K and V hide behind the compute. The chooser weighs every halving of the blocks with the widest
    step that fits (the busiest core's compute and reads, then the less compute), not just the first blocks that
    fit. (The emulator agrees: TileLang's flash attention 1x1x8192x128 on 4x4 Blackhole cores, 2659 -> 2547 us
    modelled; 1x10x8192x128 on all 130 cores, 320-row blocks in 256-key steps -> 160 in 512: 3329 -> 2870 us.)"""
    grid = {"core_grid": [4, 4], "num_cores": 16}
    before = online_softmax(rescale=True, n=8192, d=128, arch="blackhole")
    before = before.with_attr("tt.target", {**before.attrs["tt.target"], **grid})
    func = run(choose_blocks, before)["main"]
    buffers = func.attrs["tt.buffers"]
    rows, step = int(buffers["q"]["shape"][0]), int(buffers["k"]["shape"][0])
    assert "key steps of at least 8 tiles (twice the 4 tiles the loop rescales every step) on smaller blocks" \
        in explain(func)
    assert (rows, step) == (32, 1024), explain(func)
    assert "2 buffered blocks per input" in explain(func)
