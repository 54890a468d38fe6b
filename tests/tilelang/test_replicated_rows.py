"""Row vectors read only as a broadcast down the rows (layer norm's gamma and beta, RMS norm's weight) are stored with
their values in every row of their tiles (compiler/passes/infer_layout.py: `replicated_rows`), and compute applies each
tile to the value in DST on the FPU (`mul_reuse_dest_tiles` / `add_reuse_dest_tiles`, strategies.py), a whole DST
acquire of tiles at a time (no scratch slot: plan.reuses_dest, Window.fpu_from_cbs). A vector read any other way keeps
its zero-padded tiles. The programs verify on the emulator on both archs."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from schemas.target import TargetConfig

ARCHS = ("wormhole_b0", "blackhole")
TILELANG = Path(__file__).resolve().parents[2] / "examples" / "tilelang"
LAYER_NORM = (TILELANG / "layer_norm.py").read_text()
RMS_NORM = (TILELANG / "rms_norm.py").read_text()

# gamma broadcast down the rows and also written out as it is: its tiles must keep their zero rows
GAMMA_ALSO_COPIED = '''
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2, 3])
def scale_rows(rows, cols, dtype="bfloat16"):
    @T.prim_func
    def main(X: T.Tensor((rows, cols), dtype), gamma: T.Tensor((cols,), dtype), Y: T.Tensor((rows, cols), dtype),
             G: T.Tensor((cols,), dtype)):
        with T.Kernel(T.ceildiv(rows, 32)) as bx:
            x_s = T.alloc_shared((32, cols), dtype)
            g_s = T.alloc_shared((cols,), dtype)
            y = T.alloc_fragment((32, cols), "float32")
            T.copy(X[bx * 32, 0], x_s)
            T.copy(gamma, g_s)
            for i, j in T.Parallel(32, cols):
                y[i, j] = x_s[i, j] * 2.0
            for i, j in T.Parallel(32, cols):
                y[i, j] = y[i, j] * g_s[j]
            T.copy(y, Y[bx * 32, 0])
            if bx == 0:
                T.copy(g_s, G)

    return main
'''


def artifact(result, name: str) -> str:
    return result.artifacts[name].decode()


def replicated(result) -> set[str]:
    return {b["name"] for b in result.plan["buffers"] if b.get("replicated_rows")}


@pytest.mark.parametrize("arch", ARCHS)
def test_layer_norm_applies_gamma_and_beta_on_the_fpu_and_verifies(arch):
    target = TargetConfig(arch=arch, core_grid=[2, 2])
    params = {"rows": 128, "cols": 512}
    result = compile_source(LAYER_NORM, filename="layer_norm.py", entry="layer_norm", params=params, target=target)
    assert replicated(result) == {"gamma", "beta"}
    compute = artifact(result, "compute.cpp")
    # gamma and beta as whole tiles onto the value in DST, four tiles an acquire (the fp32 DST's half), no broadcast
    # of them into a scratch slot and no SFPU op with them
    assert re.search(r"for \(uint32_t (q_\d+) = 0; \1 < 4; \+\+\1\) \{\s*mul_reuse_dest_tiles<EltwiseBinaryReuseDestType"
                     r"::DEST_TO_SRCA>\(cb_g_s, ", compute), compute
    assert "add_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(cb_b_s, " in compute, compute
    assert "unary_bcast<BroadcastType::ROW>" not in compute, compute
    # the host repeats the vectors' row 0 down their tiles
    assert re.search(r"t_gamma_view, Format::Float16_b, true\);", artifact(result, "main.cpp"))
    outcome = emulate(result.artifacts, target=target, source=LAYER_NORM, filename="layer_norm.py",
                      entry="layer_norm", params=params, seed=5)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_rms_norm_weight_replicated_and_verifies(arch):
    target = TargetConfig(arch=arch)
    params = {"X": "bfloat16[256,512]", "W": "bfloat16[512]", "dtype": "bfloat16"}
    result = compile_source(RMS_NORM, filename="rms_norm.py", entry="rms_norm", params=params, target=target)
    assert replicated(result) == {"W"}
    assert "mul_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(cb_w, " in artifact(result, "compute.cpp")
    outcome = emulate(result.artifacts, target=target, source=RMS_NORM, filename="rms_norm.py", entry="rms_norm",
                      params=params, seed=7)
    assert outcome.passed, outcome.verification.render()


def test_a_vector_also_read_as_itself_keeps_zero_padded_tiles():
    """gamma is broadcast down the rows and written out whole: its tiles stay zero padded (G would otherwise be read
    from replicated tiles: still right for G, but a reduction over them would not be), the broadcast keeps the SFPU."""
    params = {"rows": 64, "cols": 128}
    result = compile_source(GAMMA_ALSO_COPIED, filename="scale_rows.py", entry="scale_rows", params=params)
    assert replicated(result) == set()
    assert "reuse_dest" not in artifact(result, "compute.cpp")
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 128)).astype(np.float32)
    gamma = rng.standard_normal(128).astype(np.float32)
    outcome = emulate(result.artifacts, source=GAMMA_ALSO_COPIED, filename="scale_rows.py", entry="scale_rows",
                      params=params, inputs={"X": x, "gamma": gamma})
    assert outcome.passed, outcome.verification.render()
