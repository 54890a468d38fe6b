"""An output whose matrix is at most 16 columns wide (a per-row vector: layer norm's mean and rstd) or at most 16 rows
high (a per-column vector) holds values in only two of each page's four 16x16 faces: the writer writes those faces
and leaves the padding out (layout.py MatrixView.data_faces, codegen/kernels.py write_data_faces), half the bytes.
The host reads back only the values, so the programs verify on the emulator on both archs; the emulator counts the
bytes each DRAM buffer received."""
from __future__ import annotations

from pathlib import Path

import pytest

from compiler.api import compile_source, emulate
from compiler.layout import UNIT, MatrixView
from schemas.target import TargetConfig

ARCHS = ("wormhole_b0", "blackhole")
TILELANG = Path(__file__).resolve().parents[2] / "examples" / "tilelang"
LAYER_NORM = (TILELANG / "layer_norm.py").read_text()

# a bfloat16 per-row sum and a bfloat16 vector input, doubled, written out (1-D: both stored a column of values a page)
SUMS = '''
import tilelang
import tilelang.language as T


@tilelang.jit(out_idx=[2, 3])
def sums(rows, cols, dtype="bfloat16"):
    @T.prim_func
    def main(X: T.Tensor((rows, cols), dtype), V: T.Tensor((cols,), dtype), R: T.Tensor((rows,), dtype),
             W: T.Tensor((cols,), dtype)):
        with T.Kernel(T.ceildiv(rows, 32)) as bx:
            x_s = T.alloc_shared((32, cols), dtype)
            v_s = T.alloc_shared((cols,), dtype)
            x = T.alloc_fragment((32, cols), "float32")
            r = T.alloc_fragment((32,), "float32")
            r_out = T.alloc_fragment((32,), dtype)
            w = T.alloc_fragment((cols,), dtype)
            T.copy(X[bx * 32, 0], x_s)
            T.copy(x_s, x)
            T.reduce_sum(x, r, dim=1)
            for i in T.Parallel(32):
                r_out[i] = r[i]
            T.copy(r_out, R[bx * 32])
            if bx == 0:
                T.copy(V, v_s)
                for j in T.Parallel(cols):
                    w[j] = v_s[j] * 2.0
                T.copy(w, W)

    return main
'''


def test_data_faces_of_vectors_and_narrow_matrices():
    assert MatrixView((2048,), (0, UNIT)).data_faces() == (0, 2)          # a per-row vector: the left faces
    assert MatrixView((1024,), (UNIT, 0)).data_faces() == (0, 1)          # a per-column vector: the top faces
    assert MatrixView((2, 8, 256), (2, UNIT)).data_faces() == (0, 2)      # a (B, H, S) log-sum-exp
    assert MatrixView((64, 16), (0, 1)).data_faces() == (0, 2)
    assert MatrixView((64, 17), (0, 1)).data_faces() == (0, 1, 2, 3)      # column 16 is in the right faces
    assert MatrixView((8, 8), (0, 1)).data_faces() == (0,)
    assert MatrixView((2048, 1024), (0, 1)).data_faces() == (0, 1, 2, 3)


def written(outcome, result) -> dict[str, tuple[int, int, int]]:
    """buffer name -> (bytes written, its size, distinct pages written) from the emulator's report."""
    names = [b["name"] for b in result.plan["buffers"]]
    return {names[b["id"]]: (b["bytes_written"], b["size"], b["distinct_pages_written"])
            for b in outcome.report["buffers"]}


@pytest.mark.parametrize("arch", ARCHS)
def test_layer_norm_writes_only_the_faces_of_mean_and_rstd_that_hold_values(arch):
    target = TargetConfig(arch=arch, core_grid=[2, 2])
    params = {"rows": 128, "cols": 256}
    result = compile_source(LAYER_NORM, filename="layer_norm.py", entry="layer_norm", params=params, target=target)
    writer = result.artifacts["writer.cpp"].decode()
    for name in ("mean", "rstd"):       # float32 pages: faces of 1024 B, the left two at 0 and 2048
        assert f"accessor_{name}, get_read_ptr(cb_{name}) + 0 * get_tile_size(cb_{name}), 1024, 0);" in writer, writer
        assert f"accessor_{name}, get_read_ptr(cb_{name}) + 0 * get_tile_size(cb_{name}) + 2048, 1024, 2048);" \
            in writer, writer
    assert "accessor_Y, get_read_ptr(cb_Y) + q * get_tile_size(cb_Y));" in writer, writer   # Y: whole pages
    outcome = emulate(result.artifacts, target=target, source=LAYER_NORM, filename="layer_norm.py",
                      entry="layer_norm", params=params, seed=3)
    assert outcome.passed, outcome.verification.render()
    bytes_ = written(outcome, result)
    for name in ("mean", "rstd"):
        sent, size, pages = bytes_[name]
        assert (sent, pages) == (size // 2, size // 4096), bytes_
    assert bytes_["Y"][0] == bytes_["Y"][1], bytes_


@pytest.mark.parametrize("arch", ARCHS)
def test_bfloat16_vectors_write_their_faces_and_verify(arch):
    target = TargetConfig(arch=arch, core_grid=[2, 1])
    params = {"rows": 64, "cols": 128}
    result = compile_source(SUMS, filename="sums.py", entry="sums", params=params, target=target)
    writer = result.artifacts["writer.cpp"].decode()
    for name in ("R", "W"):             # 1-D: a column of values a page (tile_axes (0, UNIT)), faces 0 and 2 of 512 B
        assert f"get_tile_size(cb_{name}), 512, 0);" in writer, writer
        assert f"get_tile_size(cb_{name}) + 1024, 512, 1024);" in writer, writer
    outcome = emulate(result.artifacts, target=target, source=SUMS, filename="sums.py", entry="sums",
                      params=params, seed=4)
    assert outcome.passed, outcome.verification.render()
    bytes_ = written(outcome, result)
    assert bytes_["R"][0] == bytes_["R"][1] // 2 and bytes_["W"][0] == bytes_["W"][1] // 2, bytes_
