"""Where fp32 element-wise ops may run on the FPU. The FPU reads fp32 tiles through its 19-bit (TF32) source
registers; that rounding is taken only when every output is 16 bits or narrower (whose own rounding is at least
TF32's). A kernel that writes float32 keeps float32 arithmetic. Against NumPy on both archs."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from schemas.target import TargetConfig

from .test_frontend import run_kernel, src

ARCHS = ("wormhole_b0", "blackhole")


def row_scale(out_dtype: str) -> str:
    return src(f'''
        @T.prim_func
        def main(X: T.Tensor((64, 96), "float32"), s: T.Tensor((96,), "float32"), Y: T.Tensor((64, 96), "{out_dtype}")):
            with T.Kernel(2) as bx:
                x = T.alloc_fragment((32, 96), "float32")
                y = T.alloc_fragment((32, 96), "{out_dtype}")
                T.copy(X[bx * 32, 0], x)
                for i, j in T.Parallel(32, 96):
                    x[i, j] = x[i, j] * s[j]
                T.copy(x, y)
                T.copy(y, Y[bx * 32, 0])
    ''')


def compute_source(result) -> str:
    return next(data.decode() for name, data in result.artifacts.items() if name.endswith("compute.cpp"))


@pytest.mark.parametrize("arch", ARCHS)
def test_a_float32_output_keeps_float32_arithmetic(arch):
    result, outcome = run_kernel(row_scale("float32"), seed=3, target=TargetConfig(arch=arch))
    assert "_tiles_bcast_" not in compute_source(result)       # the multiply stays on the SFPU
    x, s = outcome.inputs["X"], outcome.inputs["s"]
    want = (x * s[None, :]).astype(np.float32)                  # one fp32 rounding, as NumPy's fp32 multiply
    np.testing.assert_array_equal(outcome.outputs["Y"], want)
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_a_bfloat16_output_lets_the_fpu_read_tf32(arch):
    result, outcome = run_kernel(row_scale("bfloat16"), seed=3, target=TargetConfig(arch=arch))
    # the FPU reads x; s, read only as a broadcast down the rows, is stored as its broadcast (TTInferLayout's
    # replicated_rows): a whole-tile multiply
    assert "mul_tiles(cb_x, " in compute_source(result)
    x, s = outcome.inputs["X"].astype(np.float64), outcome.inputs["s"].astype(np.float64)
    got = np.asarray(outcome.outputs["Y"], dtype=np.float64)
    np.testing.assert_allclose(got, x * s[None, :], rtol=2 ** -8 + 2 ** -10, atol=1e-6)  # bf16's rounding dominates
    assert outcome.passed, outcome.verification.render()


MIXED = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 96), "float32"), s: T.Tensor((96,), "float32"), Y: T.Tensor((64, 96), "bfloat16"),
             Z: T.Tensor((64, 96), "float32")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((32, 96), "float32")
            y = T.alloc_fragment((32, 96), "bfloat16")
            z = T.alloc_fragment((32, 96), "float32")
            T.copy(X[bx * 32, 0], x)
            for i, j in T.Parallel(32, 96):
                y[i, j] = x[i, j] * s[j]
            for i, j in T.Parallel(32, 96):
                z[i, j] = x[i, j] * s[j]
            T.copy(y, Y[bx * 32, 0])
            T.copy(z, Z[bx * 32, 0])
''')


@pytest.mark.parametrize("arch", ARCHS)
def test_a_value_reaching_a_float32_output_stays_off_the_fpu(arch):
    """x reaches float32 Z beside bfloat16 Y: the FPU reads no x (a CB the FPU reads is read through TF32 by its
    copies too), and Z is NumPy's float32 multiply bit for bit."""
    result, outcome = run_kernel(MIXED, seed=3, target=TargetConfig(arch=arch))
    assert "_tiles_bcast_rows(cb_x," not in compute_source(result)
    x, s = outcome.inputs["X"], outcome.inputs["s"]
    np.testing.assert_array_equal(outcome.outputs["Z"], (x * s[None, :]).astype(np.float32))
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_layer_norm_scales_on_the_fpu_beside_float32_statistics(arch):
    """Layer norm's centered and inv reach bfloat16 y, and float32 rstd only through the variance's reduction and
    inv's own window (rstd is packed from inv's DST slots, not copied from its CB): y's `centered * inv` runs on
    the FPU (centered = x - mu recomputed in DST from the staged row, TTRecomputeVectorOps, then `* inv` with inv's
    column broadcast made once: mul_reuse_dest_tiles), and rstd is NumPy's 1 / sqrt(var + eps) of the kernel's own
    variance. On two cores, one row block each."""
    source = (Path(__file__).resolve().parents[2] / "examples" / "tilelang" / "layer_norm.py").read_text()
    result, outcome = run_kernel(source, entry="layer_norm", params={"rows": 64, "cols": 256}, seed=3,
                                 target=TargetConfig(arch=arch, core_grid=(2, 1)))
    compute = compute_source(result)
    assert "mul_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(cb_inv_bcast" in compute, compute
    assert "copy_tile(cb_inv" not in compute, compute
    assert not any("cb_centered," in line for line in compute.splitlines() if "pack_tile" in line), compute
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_split_layer_norm_scales_on_the_fpu(arch):
    """The same with each row over two cores (TTSplitRows: 4 row blocks on 8 cores, 8 tiles of 16 a core): part 0
    alone writes mean and rstd, and that guarded write between inv's window and rstd's send is the writer's only --
    rstd is still packed from inv's DST slots, so inv may be read through the FPU and `(x - mu) * inv` is one
    mul_reuse_dest_tiles a tile against inv's column broadcast, made once (it was copy_tile + unary_bcast + an SFPU
    multiply)."""
    source = (Path(__file__).resolve().parents[2] / "examples" / "tilelang" / "layer_norm.py").read_text()
    result, outcome = run_kernel(source, entry="layer_norm", params={"rows": 128, "cols": 512}, seed=3,
                                 target=TargetConfig(arch=arch, core_grid=(4, 2)))
    assert result.plan["grid"]["extents"] == [2, 4]
    compute = compute_source(result)
    assert "mul_reuse_dest_tiles<EltwiseBinaryReuseDestType::DEST_TO_SRCA>(cb_inv_bcast" in compute, compute
    assert "copy_tile(cb_centered" not in compute and "mul_binary_tile(" not in compute.split("cb_inv_bcast, 1);")[-1], \
        compute
    assert outcome.passed, outcome.verification.render()
