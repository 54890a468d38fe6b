"""linemap.json: generated C++ lines point at the user's source lines that produced them (TIRx and TileLang)."""
from __future__ import annotations

import json

import pytest

from compiler.api import compile_source
from tests.conftest import EXAMPLES, TEST_DATA


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def mapping(result, kernel: str, needle: str) -> list[int]:
    text = result.artifacts[kernel].decode()
    files = json.loads(result.artifacts["linemap.json"])["files"]
    return files[kernel][str(line_of(text, needle))]


def test_tirx_gemm_lines_map_to_their_tile_primitives():
    source = (TEST_DATA / "gemm.py").read_text()
    result = compile_source(source, filename="gemm.py")
    assert json.loads(result.artifacts["linemap.json"])["source"] == "gemm.py"
    assert mapping(result, "reader.cpp", "accessor_A, get_write_ptr") == [line_of(source, "T.tile.copy(A_s, A[")]
    # B streams on the writer's RISC (TTSplitKernels balances the two data-movement kernels)
    assert mapping(result, "writer.cpp", "accessor_B, get_write_ptr") == [line_of(source, "T.tile.copy(B_s, B[")]
    assert mapping(result, "compute.cpp", "matmul_tiles(") == [line_of(source, "T.tile.gemm(")]
    assert mapping(result, "compute.cpp", "pack_tile(") == [line_of(source, "T.tile.copy(C[")]
    assert mapping(result, "writer.cpp", "noc_async_write_page(") == [line_of(source, "T.tile.copy(C[")]
    assert mapping(result, "reader.cpp", "for (uint32_t k = 0") == [line_of(source, "for k in range")]
    assert mapping(result, "reader.cpp", "const auto accessor_A") == [line_of(source, "def main(")]
    assert mapping(result, "compute.cpp", "constexpr uint32_t cb_A_s") == [line_of(source, "A_s = T.alloc_shared")]


@pytest.mark.parametrize("example, entry, params", [
    ("tilelang/gemm.py", "matmul", {"M": 128, "N": 128, "K": 64, "block_M": 32, "block_N": 32}),
    ("tilelang/softmax.py", "softmax", {"M": 64, "N": 64}),
    ("softmax_rows.py", None, None),
])
def test_every_mapping_points_into_the_users_file(example, entry, params):
    source = (EXAMPLES / example).read_text()
    result = compile_source(source, filename=example, entry=entry, params=params)
    linemap = json.loads(result.artifacts["linemap.json"])
    assert "error" not in linemap and linemap["source"] == example
    count = len(source.splitlines())
    for kernel, lines in linemap["files"].items():
        cpp = result.artifacts[kernel].decode().splitlines()
        assert lines, kernel
        for cpp_line, source_lines in lines.items():
            assert 1 <= int(cpp_line) <= len(cpp) and cpp[int(cpp_line) - 1].strip()
            assert all(1 <= n <= count for n in source_lines), (kernel, cpp_line, source_lines)


def test_tilelang_lines_are_the_users_not_the_generated_tirx():
    source = (EXAMPLES / "tilelang" / "gemm.py").read_text()
    result = compile_source(source, filename="gemm.py", entry="matmul",
                            params={"M": 128, "N": 128, "K": 64, "block_M": 32, "block_N": 32})
    assert mapping(result, "compute.cpp", "matmul_tiles(") == [line_of(source, "T.gemm(A_shared")]
    assert mapping(result, "reader.cpp", "accessor_A, get_write_ptr") == [line_of(source, "T.copy(A[")]
    assert mapping(result, "writer.cpp", "noc_async_write_page(") == [line_of(source, "T.copy(C_local, C[")]
