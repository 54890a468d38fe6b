"""The TileLang frontend: what it accepts, what it evaluates, and where its diagnostics point."""
from __future__ import annotations

import sys
import textwrap

import pytest

from compiler.api import cache_key, compile_source
from compiler.errors import CompileError
from compiler.frontend import load_kernel
from schemas.target import TargetConfig

HEADER = "import tilelang\nimport tilelang.language as T\n"


def src(body: str) -> str:
    return HEADER + textwrap.dedent(body)


def error_of(source: str, **kwargs) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_source(source, filename="k.py", **kwargs)
    return info.value


def line_of(source: str, needle: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if needle in line)


MODULE_LEVEL = src('''
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 32), "float32")
            B_l = T.alloc_fragment((32, 32), "float32")
            T.copy(A[by * 32:(by + 1) * 32, bx * 32:(bx + 1) * 32], A_s)
            for i, j in T.Parallel(32, 32):
                B_l[i, j] = T.exp2(A_s[i, j] * 0.5) - A_s[i, j] / 4
            T.copy(B_l, B[by * 32, bx * 32])
''')


def test_module_level_prim_func_traces_to_tile_ops():
    loaded = load_kernel(MODULE_LEVEL, "k.py")
    script = loaded.func.script()
    assert loaded.entry == "main"
    assert "T.cta_id([2, 2])" in script
    for op in ("T.tile.exp", "T.tile.mul", "T.tile.sub"):
        assert op in script
    # the generated lines map back to the user's T.Parallel store line
    store_line = line_of(MODULE_LEVEL, "B_l[i, j] =")
    assert store_line in {loc.line for loc in loaded.line_map.values()}


def test_module_level_prim_func_verifies():
    from compiler.api import emulate

    result = compile_source(MODULE_LEVEL, filename="k.py")
    outcome = emulate(result.artifacts, source=MODULE_LEVEL, filename="k.py")
    assert outcome.passed, outcome.verification.render()


def test_unrelated_module_code_is_not_evaluated():
    source = src('''
        import torch
        import numpy as np
        from tilelang.autotuner import autotune

        DEVICE = torch.device("cuda")            # would fail: torch is only a stub here
        raise_at_import = 1 / 0 if False else 0

        @tilelang.jit(out_idx=[-1])
        def add(M, N, dtype="float32"):
            @T.prim_func
            def kernel(A: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
                with T.Kernel(N // 32, M // 32) as (bx, by):
                    A_s = T.alloc_shared((32, 32), dtype)
                    C_l = T.alloc_fragment((32, 32), dtype)
                    T.copy(A[by * 32, bx * 32], A_s)
                    for i, j in T.Parallel(32, 32):
                        C_l[i, j] = T.max(A_s[i, j], 0)
                    T.copy(C_l, C[by * 32, bx * 32])
            return kernel

        def main():
            a = torch.randn(64, 64, device=DEVICE)
            add(64, 64)(a)

        main()
    ''')
    result = compile_source(source, filename="k.py", entry="add", params={"M": 64, "N": 96})
    assert result.plan["grid"]["extents"] in ([2, 3], [3, 2])


def test_factory_using_torch_fails_at_the_use():
    source = src('''
        import torch

        def add(M):
            dtype = torch.float16
            @T.prim_func
            def kernel(A: T.Tensor((M, M), dtype)):
                with T.Kernel(1):
                    pass
            return kernel
    ''')
    err = error_of(source, entry="add", params={"M": 32})
    assert err.location.line == line_of(source, "T.Tensor((M, M), dtype)")   # where the stub is used
    assert "`torch.float16` is used while building the kernel" in err.message


@pytest.mark.parametrize("construct,call", [
    ("T.atomic_add", "T.atomic_add(C_l[0, 0], 1)"),
    ("T.annotate_layout", "T.annotate_layout({A_s: None})"),
    ("T.reduce_max", "T.reduce_max(C_l, C_l, dim=1)"),
    ("column reductions are not supported", "T.reduce_sum(A_s, C_l, dim=0)"),
])
def test_constructs_outside_the_subset_are_located_and_named(construct, call):
    source = src(f'''
        @T.prim_func
        def main(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((32, 32), "float32")
                C_l = T.alloc_fragment((32, 32), "float32")
                T.copy(A, A_s)
                {call}
                T.copy(C_l, C)
    ''')
    err = error_of(source)
    assert construct in err.message
    assert (err.location.file, err.location.line) == ("k.py", line_of(source, call))
    assert err.location.col == 9


def test_data_dependent_parallel_indexing_is_rejected_at_the_store():
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1) as bx:
                A_s = T.alloc_shared((32, 32), "float32")
                C_l = T.alloc_fragment((32, 32), "float32")
                T.copy(A, A_s)
                for i, j in T.Parallel(32, 32):
                    C_l[i, j] = A_s[j, i]
                T.copy(C_l, C)
    ''')
    err = error_of(source)
    assert err.location.line == line_of(source, "C_l[i, j] = A_s[j, i]")
    assert "axis 0" in err.message


def test_python_condition_on_a_block_index_is_rejected():
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((64, 32), "float32"), C: T.Tensor((64, 32), "float32")):
            with T.Kernel(1, 2) as (bx, by):
                C_l = T.alloc_fragment((32, 32), "float32")
                if by > 0:
                    T.clear(C_l)
    ''')
    err = error_of(source)
    assert err.location.line == line_of(source, "if by > 0")


def test_pipeline_diagnostics_point_at_the_tilelang_line():
    """A gemm shape mismatch is found by TTCheckKernel on the generated TIRx, reported at the user's T.gemm."""
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
            with T.Kernel(2, 2) as (bx, by):
                A_s = T.alloc_shared((32, 64), "float16")
                B_s = T.alloc_shared((32, 32), "float16")
                C_l = T.alloc_fragment((32, 32), "float32")
                T.clear(C_l)
                T.copy(A[by * 32, 0], A_s)
                T.copy(B[0, bx * 32], B_s)
                T.gemm(A_s, B_s, C_l)
                T.copy(C_l, C[by * 32, bx * 32])
    ''')
    err = error_of(source)
    assert err.stage == "check" and "gemm shape mismatch" in err.message
    assert (err.location.file, err.location.line, err.location.col) == ("k.py", line_of(source, "T.gemm("), 9)


def test_factory_parameter_errors_name_the_parameters():
    source = (__import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "tilelang" / "gemm.py").read_text()
    err = error_of(source, entry="matmul", params={"M": 64})
    assert "missing a required argument: 'N'" in err.message and "block_M=64" in err.hint
    err = error_of(source, entry="nope")
    assert "entry `nope` not found" in err.message


def test_params_on_a_tirx_file_are_rejected():
    tirx = (__import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "gemm_single_tile.py").read_text()
    with pytest.raises(CompileError, match="apply to TileLang kernel factories"):
        compile_source(tirx, params={"M": 1})


def test_tilelang_is_never_installed_or_imported():
    compile_source(MODULE_LEVEL, filename="k.py")
    assert not any(name == "tilelang" or name.startswith("tilelang.") for name in sys.modules)


def test_cache_key_depends_on_params_only_when_given():
    target = TargetConfig()
    assert cache_key("s", "f", target) == cache_key("s", "f", target, {})
    assert cache_key("s", "f", target, {"M": 64}) != cache_key("s", "f", target, {"M": 128})


def test_cli_param_flags(tmp_path):
    from typer.testing import CliRunner

    from tilefarm.cli import app
    import tilefarm.cmd_compile  # noqa: F401 -- registers the command

    example = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "tilelang" / "gemm.py"
    runner = CliRunner()
    ok = runner.invoke(app, ["compile", str(example), "--entry", "matmul", "--param", "M=64", "--param", "N=64",
                             "--param", "K=64", "--param", "block_M=32", "--param", "dtype=bfloat16",
                             "-o", str(tmp_path)])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "compute.cpp").exists()
    bad = runner.invoke(app, ["compile", str(example), "--entry", "matmul", "--param", "M"])
    assert bad.exit_code == 2 and "NAME=VALUE" in bad.output
