"""Errors a new user meets first, in their own names at their own lines: kernels too big for L1, names TIRx does
not have."""
from __future__ import annotations

import re

import pytest

from compiler.api import compile_source
from schemas.target import TargetConfig
from compiler.errors import CompileError
from tests.conftest import EXAMPLES

BIG_GEMM = '''from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((1024, 1024), "float32"), B: T.Buffer((1024, 1024), "float32"),
         C: T.Buffer((1024, 1024), "float32")):
    T.device_entry()
    by, bx = T.cta_id([4, 4])
    weights = T.alloc_shared((256, 256), "float32")
    B_s = T.alloc_shared((256, 256), "float32")
    C_l = T.alloc_local((256, 256), "float32")
    T.tile.zero(C_l)
    for k in range(4):
        T.tile.copy(weights, A[by * 256:by * 256 + 256, k * 256:k * 256 + 256])
        T.tile.copy(B_s, B[k * 256:k * 256 + 256, bx * 256:bx * 256 + 256])
        T.tile.gemm(C_l, weights, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 256:by * 256 + 256, bx * 256:bx * 256 + 256], C_l)
'''


def error_of(source: str, **options) -> CompileError:
    with pytest.raises(CompileError) as caught:
        compile_source(source, filename="big.py", **options)
    return caught.value


AS_WRITTEN = TargetConfig(blocking="as_written")


def test_l1_overflow_names_the_users_buffers_at_their_line():
    # the kernel's own blocks, double buffered as the target demands: too big (by default the depth would drop)
    error = error_of(BIG_GEMM, target=TargetConfig(blocking="as_written", cb_depth=2))
    assert error.location is not None and error.location.file == "big.py"
    assert error.location.line == BIG_GEMM.splitlines().index('    weights = T.alloc_shared((256, 256), "float32")') + 1
    assert "`weights` 512 KiB (2 x 256 KiB)" in error.message and "`C_l` " in error.message and "`B_s` " in error.message
    assert not re.search(r"\bcb_(?!depth)", error.render())  # no internal circular-buffer names (cb_weights...)
    assert "wormhole_b0 leaves 1.24 MiB" in error.message
    assert error.render().count("hint:") == 1 and "`weights` is the largest" in error.hint
    # one buffered copy each fits: the hint was right, and the default depth takes it
    single = compile_source(BIG_GEMM, filename="big.py", target=AS_WRITTEN).plan
    assert single["target"]["cb_depth"] == 1 and not single["schedule"]["changed"]
    # and the default blocking picks blocks that fit by itself
    chosen = compile_source(BIG_GEMM, filename="big.py").plan
    assert chosen["schedule"]["changed"] and chosen["l1_bytes_per_core"] <= chosen["target"]["l1_available_for_cbs"]


def test_l1_overflow_in_tilelang_is_at_the_users_line():
    source = (EXAMPLES / "tilelang" / "gemm.py").read_text()
    error = error_of(source, entry="matmul", params={"M": 1024, "N": 1024, "K": 1024, "block_M": 256, "block_N": 256,
                                                     "block_K": 256, "dtype": "float32"},
                     target=TargetConfig(blocking="as_written", cb_depth=3))
    assert error.location.file == "big.py"
    assert "A_shared = T.alloc_shared" in source.splitlines()[error.location.line - 1]
    assert "`A_shared` 768 KiB (3 x 256 KiB)" in error.message and "num_stages" in error.hint


@pytest.mark.parametrize("written, expected", [
    ("T.tile.logarithm(x, A_s)", "`T.tile.logarithm` is not a tile primitive"),
    ("T.tile.exp(x, A_s, mode=T.tile.fast_mode)", "`T.tile.fast_mode` is not a tile primitive"),
    ("T.no_such_thing(x)", "`T.no_such_thing` does not exist in TVMScript TIRx"),
])
def test_names_tirx_lacks_are_said_plainly(written, expected):
    source = f'''from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    T.device_entry()
    bx = T.cta_id([2])
    A_s = T.alloc_shared((32, 64), "float32")
    x = T.alloc_local((32, 64), "float32")
    T.tile.copy(A_s, A[bx * 32:bx * 32 + 32, 0:64])
    {written}
    T.tile.copy(B[bx * 32:bx * 32 + 32, 0:64], x)
'''
    error = error_of(source)
    assert error.message == expected and error.location.line == 11
    assert "tvm." not in error.render() and "module" not in error.render()
    if "tile primitive" in expected:
        assert "T.tile.gemm" in error.hint and "T.tile.exp" in error.hint


def test_inputs_the_emulator_cannot_take_are_located_at_the_parameter():
    """What only the emulate stage can know (shapes computed when the kernel is built) fails located, in words."""
    import numpy as np

    from compiler.api import emulate

    source = (EXAMPLES / "tilelang" / "gemm.py").read_text()
    params = {"M": 64, "N": 64, "K": 64, "block_M": 32, "block_N": 32}
    result = compile_source(source, filename="gemm.py", entry="matmul", params=params)
    with pytest.raises(CompileError) as caught:
        emulate(result.artifacts, source=source, filename="gemm.py", entry="matmul", params=params,
                inputs={"A": np.zeros((32, 64), np.float32), "B": np.zeros((64, 64), np.float32)})
    error = caught.value
    assert error.message == "input `A` has shape [32, 64], the kernel expects [64, 64]"
    assert (error.location.file, error.location.line) == ("gemm.py", line_of(source, "A: T.Tensor((M, K), dtype)"))


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


NO_OUTPUT = '''import tilelang
import tilelang.language as T


@T.prim_func
def main(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
    with T.Kernel(2, threads=128) as bx:
        a = T.alloc_shared((32, 64), "float32")
        T.copy(X[bx * 32:(bx + 1) * 32, 0:64], a)
'''


def test_a_kernel_writing_nothing_is_located_at_its_last_tensor():
    error = error_of(NO_OUTPUT)
    assert (error.location.line, error.location.col) == (6, 44), error.render()
    assert "`Y`" in error.message and "T.copy(tile, Y[...])" in error.hint
