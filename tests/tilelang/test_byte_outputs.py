"""int8 and uint8 outputs (a quantization's codes): compute holds the values as floats (packed as float32), the
writer converts each page to its 1024 bytes (truncation toward zero, saturating to the type's range) and writes
1024-byte pages. Both archs, exact against NumPy; the writer passes the real-header check."""
from __future__ import annotations

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from compiler.toolchain.header_check import check_bundle
from schemas.target import TargetConfig

from .test_frontend import src

ARCHS = ("wormhole_b0", "blackhole")

QUANT = src('''
    @tilelang.jit
    def quant(M=64, N=64, block_M=32):
        @T.prim_func
        def main(X: T.Tensor((M, N), "float16"), Q: T.Tensor((M, N), "int8"), S: T.Tensor((M,), "float32")):
            with T.Kernel(T.ceildiv(M, block_M)) as bx:
                x = T.alloc_fragment((block_M, N), "float32")
                amax = T.alloc_fragment((block_M,), "float32")
                q = T.alloc_fragment((block_M, N), "int8")
                T.copy(X[bx * block_M, 0], x)
                T.reduce_absmax(x, amax, dim=1)
                for i in T.Parallel(block_M):
                    amax[i] = amax[i] / 127.0
                for i, j in T.Parallel(block_M, N):
                    q[i, j] = T.cast(T.round(x[i, j] / amax[i]), "int8")
                T.copy(q, Q[bx * block_M, 0])
                T.copy(amax, S[bx * block_M])
        return main
''')

BYTES = src('''
    @T.prim_func
    def main(X: T.Tensor((64, 96), "float32"), U: T.Tensor((64, 96), "uint8"), I: T.Tensor((64, 96), "int8")):
        with T.Kernel(2) as bx:
            x = T.alloc_fragment((32, 96), "float32")
            T.copy(X[bx * 32, 0], x)
            T.copy(x, U[bx * 32, 0])
            T.copy(x, I[bx * 32, 0])
''')


def run(source, inputs, arch, entry=None):
    target = TargetConfig(arch=arch)
    result = compile_source(source, filename="k.py", entry=entry, target=target)
    outcome = emulate(result.artifacts, target=target, source=source, filename="k.py", entry=entry, inputs=inputs)
    return result, outcome


@pytest.mark.parametrize("arch", ARCHS)
def test_int8_codes_of_a_per_row_quantization(arch):
    # each row's largest magnitude is 127 (its scale 1.0: x / scale is x, exact), the rest integers and halves of
    # both signs (T.round takes halves away from zero)
    rng = np.random.default_rng(9)
    x = (rng.integers(-253, 254, (64, 64)) / 2.0).astype(np.float16)
    x[:, 5] = np.where(np.arange(64) % 2 == 0, 127.0, -127.0)
    result, outcome = run(QUANT, {"X": x.astype(np.float32)}, arch, entry="quant")
    assert result.artifacts["tt.plan.json"].decode().count('"Int8"') == 1
    assert outcome.outputs["Q"].dtype == np.int8
    v = x.astype(np.float64)
    np.testing.assert_array_equal(outcome.outputs["Q"], (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8))
    np.testing.assert_array_equal(outcome.outputs["S"], np.ones(64, np.float32))
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("arch", ARCHS)
def test_float_values_written_into_uint8_and_int8_outputs_truncate_and_saturate(arch):
    # 2.999 must not become 3 (a 16-bit page would round it up before the truncation)
    x = np.random.default_rng(10).uniform(-300, 300, (64, 96)).astype(np.float32)
    x[0, :6] = [2.999, -2.999, 127.9, -128.9, 255.5, 0.49]
    result, outcome = run(BYTES, {"X": x}, arch)
    v = np.trunc(x.astype(np.float64))
    np.testing.assert_array_equal(outcome.outputs["U"], np.clip(v, 0, 255).astype(np.uint8))
    np.testing.assert_array_equal(outcome.outputs["I"], np.clip(v, -128, 127).astype(np.int8))
    assert outcome.outputs["I"][0, :4].tolist() == [2, -2, 127, -128]
    assert outcome.passed, outcome.verification.render()
    report = check_bundle(result.artifacts)
    assert report.passed, report.render()
