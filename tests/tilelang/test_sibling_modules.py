"""A kernel file importing a module beside it (`from block_causal_attention import _check_dllm_block, LOG2_E` in
TileLang's block_causal_attention_varlen.py): importable when the kernel is compiled from its file on disk, evaluated
as the kernel's own file is (only what the imported names need; torch and host code beside them never run). Checked
against NumPy on both archs; what is not importable stays a located error at the kernel's own line."""
from __future__ import annotations

import os
import textwrap

import numpy as np
import pytest

from compiler.api import compile_source, emulate
from compiler.errors import CompileError
from schemas.target import TargetConfig

HELPERS = textwrap.dedent('''
    import torch                     # host side: never evaluated for the kernel
    import tilelang.language as T

    SCALE = 0.5
    _TILE = 32


    def check_block(block):
        assert block % _TILE == 0, f"block ({block}) must be a multiple of {_TILE}"


    def on_or_below_diagonal(row, col):
        return row >= col


    def reference(x):
        return torch.tril(x) * SCALE


    if __name__ == "__main__":
        raise SystemExit(reference(torch.ones(4, 4)))
''')

KERNEL = textwrap.dedent('''
    import tilelang
    import tilelang.language as T
    import helpers
    from helpers import check_block, on_or_below_diagonal


    @tilelang.jit
    def lower_scaled(M=128, N=128, block=64, dtype=T.float32):
        check_block(block)

        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
            with T.Kernel(M // block, N // block) as (bx, by):
                a = T.alloc_fragment((block, block), dtype)
                T.copy(A[bx * block, by * block], a)
                for i, j in T.Parallel(block, block):
                    a[i, j] = T.if_then_else(on_or_below_diagonal(bx * block + i, by * block + j),
                                             a[i, j] * helpers.SCALE, 0.0)
                T.copy(a, B[bx * block, by * block])
        return main
''')


def write(directory, kernel: str = KERNEL) -> str:
    (directory / "helpers.py").write_text(HELPERS)
    path = directory / "lower_scaled.py"
    path.write_text(kernel)
    return str(path)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_a_module_beside_the_kernel_file_is_imported(tmp_path, arch):
    filename = write(tmp_path)
    target = TargetConfig(arch=arch)
    result = compile_source(KERNEL, filename=filename, entry="lower_scaled", params={}, target=target)
    outcome = emulate(result.artifacts, target=target, source=KERNEL, filename=filename, entry="lower_scaled",
                      params={}, seed=11)
    a = outcome.inputs["A"].astype(np.float64)
    want = np.where(np.arange(128)[:, None] >= np.arange(128)[None, :], a * 0.5, 0.0)
    np.testing.assert_allclose(outcome.outputs["B"], want, rtol=1e-6, atol=1e-6)
    assert outcome.passed, outcome.verification.render()


def kernel_line(needle: str) -> int:
    return next(i for i, line in enumerate(KERNEL.splitlines(), 1) if needle in line)


def test_a_failing_assertion_of_the_module_is_located_at_the_kernel_line_that_calls_it(tmp_path):
    filename = write(tmp_path)
    with pytest.raises(CompileError) as info:
        compile_source(KERNEL, filename=filename, entry="lower_scaled", params={"block": 48})
    e = info.value
    assert (e.location.file, e.location.line) == (filename, kernel_line("check_block(block)"))
    assert "block (48) must be a multiple of 32" in e.message


def test_only_a_file_holding_the_source_text_makes_its_directory_importable(tmp_path):
    """A request's text (the service's case) names no directory: `filename` pointing at a file with other contents
    does not open the files beside it."""
    filename = write(tmp_path)
    text = KERNEL + "# edited\n"
    with pytest.raises(CompileError) as info:
        compile_source(text, filename=filename, entry="lower_scaled", params={})
    e = info.value
    assert (e.location.file, e.location.line) == (filename, kernel_line("check_block(block)"))
    assert "module `helpers` is not available" in e.message


def test_a_link_to_a_module_elsewhere_is_not_followed(tmp_path):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "kernel").mkdir()
    write(tmp_path / "elsewhere")
    filename = str(tmp_path / "kernel" / "lower_scaled.py")
    (tmp_path / "kernel" / "lower_scaled.py").write_text(KERNEL)
    os.symlink(tmp_path / "elsewhere" / "helpers.py", tmp_path / "kernel" / "helpers.py")
    with pytest.raises(CompileError) as info:
        compile_source(KERNEL, filename=filename, entry="lower_scaled", params={})
    assert "module `helpers` is not available" in info.value.message
