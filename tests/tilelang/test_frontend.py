"""The TileLang frontend: what it accepts, what it evaluates, and where its diagnostics point."""
from __future__ import annotations

import sys
import textwrap

import numpy as np
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


def run_kernel(source: str, entry: str | None = None, params: dict | None = None, seed: int = 0,
               target: TargetConfig | None = None):
    """Compile `source` and run it on the emulator: (CompileResult, Outcome)."""
    from compiler.api import emulate
    result = compile_source(source, filename="k.py", entry=entry, params=params, target=target)
    outcome = emulate(result.artifacts, target=target, source=source, filename="k.py", entry=entry, params=params,
                      seed=seed)
    return result, outcome


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
    ("T.get_thread_binding", "T.get_thread_binding()"),
    ("T.reduce_max", "T.reduce_max(C_l, C_l, dim=1)"),
    ("reduces along dim=1 (each row) or dim=0 (each column)", "T.reduce_sum(A_s, C_l, dim=2)"),
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


def test_diagonal_parallel_indexing_is_rejected_at_the_store():
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1) as bx:
                A_s = T.alloc_shared((32, 32), "float32")
                C_l = T.alloc_fragment((32, 32), "float32")
                T.copy(A, A_s)
                for i, j in T.Parallel(32, 32):
                    C_l[i, j] = A_s[i, i]
                T.copy(C_l, C)
    ''')
    err = error_of(source)
    assert err.location.line == line_of(source, "C_l[i, j] = A_s[i, i]")
    assert "`A_s[i, i]`" in err.message and "diagonal" in err.message


def test_python_while_on_a_block_index_is_rejected():
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((64, 32), "float32"), C: T.Tensor((64, 32), "float32")):
            with T.Kernel(1, 2) as (bx, by):
                C_l = T.alloc_fragment((32, 32), "float32")
                while by > 0:
                    T.clear(C_l)
    ''')
    err = error_of(source)
    assert "Python control flow" in err.message and err.location.line == line_of(source, "while by > 0")


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


# ---- eager JIT --------------------------------------------------------------------------------------------------
EAGER = src('''
    @tilelang.jit
    def scale_rows(X, block_M=32, dtype=T.float32):
        M, N = T.const("M, N")
        half = N // 2                         # uses a size before the annotation binds it
        X: T.Tensor((M, N), dtype)
        Y = T.empty((M, N), dtype)
        with T.Kernel(T.ceildiv(M, block_M)) as bm:
            x = T.alloc_fragment((block_M, N), dtype)
            T.copy(X[bm * block_M, 0], x)
            for i, j in T.Parallel(block_M, N):
                x[i, j] = x[i, j] * 2 + half
            T.copy(x, Y[bm * block_M, 0])
        return Y
''')


def test_eager_jit_binds_sizes_from_a_tensor_argument_and_names_its_output():
    result = compile_source(EAGER, filename="k.py", entry="scale_rows", params={"X": "float32[64,96]"})
    assert [(b["name"], b["role"], b["shape"]) for b in result.plan["buffers"]] == \
        [("X", "input", [64, 96]), ("Y", "output", [64, 96])]
    from compiler.api import emulate
    outcome = emulate(result.artifacts, source=EAGER, filename="k.py", entry="scale_rows",
                      params={"X": "float32[64,96]"}, seed=2)
    assert outcome.passed, outcome.verification.render()
    np = __import__("numpy")
    assert np.allclose(outcome.outputs["Y"], outcome.inputs["X"] * 2 + 48)


def test_eager_jit_sizes_may_be_given_as_parameters():
    a = compile_source(EAGER, filename="k.py", entry="scale_rows", params={"M": 64, "N": 96})
    b = compile_source(EAGER, filename="k.py", entry="scale_rows", params={"X": "float32[64,96]"})
    assert a.artifacts["compute.cpp"] == b.artifacts["compute.cpp"]


@pytest.mark.parametrize("params,message", [
    ({"X": "float16[64,96]"}, "`X` is float16[64,96] but the kernel declares it float32"),
    ({"X": "float32[64]"}, "rank-2"),
    ({"X": "floaty[64,96]"}, "known dtype"),
    ({"X": "float32[64,96]", "block_M": "wide"}, "parameter `block_M` of `scale_rows` takes an integer"),
])
def test_eager_jit_argument_errors_are_located_and_name_the_argument(params, message):
    err = error_of(EAGER, entry="scale_rows", params=params)
    assert message in err.message and err.location.file == "k.py" and err.location.line


BODY_DECLARED = src('''
    @tilelang.jit
    def gemm_nt(block: int = 32, dtype=T.float32):
        M, N, K = T.const("M, N, K")
        A_shape = (M, K)                     # TileLang binds A and B when the kernel is called: not factory arguments
        A: T.Tensor(A_shape, dtype)
        B: T.Tensor((N, K), dtype)
        C = T.empty((M, N), dtype)
        with T.Kernel(T.ceildiv(N, block), T.ceildiv(M, block)) as (bx, by):
            A_s = T.alloc_shared((block, K), dtype)
            B_s = T.alloc_shared((block, K), dtype)
            C_l = T.alloc_fragment((block, block), dtype)
            T.clear(C_l)
            T.copy(A[by * block, 0], A_s)
            T.copy(B[bx * block, 0], B_s)
            T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * block, bx * block])
        return C
''')


@pytest.mark.parametrize("params", [{"A": "float32[64,32]", "B": "float32[96,32]"}, {"M": 64, "N": 96, "K": 32}])
def test_eager_jit_tensors_the_body_declares_are_given_by_name_or_by_their_sizes(params):
    result, outcome = run_kernel(BODY_DECLARED, "gemm_nt", params, seed=3)
    assert [(b["name"], b["role"], b["shape"]) for b in result.plan["buffers"]] == \
        [("A", "input", [64, 32]), ("B", "input", [96, 32]), ("C", "output", [64, 96])]
    assert outcome.passed, outcome.verification.render()


@pytest.mark.parametrize("params,message", [
    ({"A": "64", "B": "float32[96,32]"}, "`A` is a tensor the kernel declares; give it as A=DTYPE[D0,D1,...]"),
    ({"A": "float32[64,32]", "B": "float32[96,16]"}, "`K` is 16 here but was bound to 32 before"),
])
def test_eager_jit_body_declared_tensor_errors_are_located(params, message):
    err = error_of(BODY_DECLARED, entry="gemm_nt", params=params)
    assert message in err.message and err.location.file == "k.py" and err.location.line


def test_a_dtype_outside_the_subset_is_named_not_shown_as_an_object():
    err = error_of(src('''
        @tilelang.jit
        def cast(M=64, dtype=T.float8_e4m3fn):
            X = T.empty((M, 32), dtype)
            return X
    '''), entry="cast")
    assert "the output `X` is float8_e4m3fn: writing it means rounding to float8_e4m3fn" in err.message
    assert "object at 0x" not in err.message and err.location.line


PERSISTENT = src('''
    from tilelang.carver.arch import driver


    @tilelang.jit
    def gemm_persistent(A, B, block_M=32, block_N=32, block_K=32, dtype=T.float16):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), dtype)
        B: T.Tensor((K, N), dtype)
        C = T.empty((M, N), dtype)
        sm_num = driver.get_num_sms()
        with T.Kernel(sm_num, threads=128) as block_id:
            A_s = T.alloc_shared((block_M, block_K), dtype)
            B_s = T.alloc_shared((block_K, block_N), dtype)
            C_l = T.alloc_fragment((block_M, block_N), T.float32)
            for bx, by in T.Persistent([T.ceildiv(M, block_M), T.ceildiv(N, block_N)], sm_num, block_id):
                T.clear(C_l)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(A[bx * block_M, k * block_K], A_s)
                    T.copy(B[k * block_K, by * block_N], B_s)
                    T.gemm(A_s, B_s, C_l)
                T.copy(C_l, C[bx * block_M, by * block_N])
        return C
''')


@pytest.mark.parametrize("grid, shape", [((4, 2), (96, 64, 160)),   # 15 tiles on 8 blocks: the last wave is partial
                                         ((2, 2), (64, 32, 128))])  # 8 tiles on 4 blocks: two full waves
def test_a_persistent_kernel_launches_one_block_per_core_and_deals_the_tiles(grid, shape):
    m, k, n = shape
    params = {"A": f"float16[{m},{k}]", "B": f"float16[{k},{n}]"}
    result, outcome = run_kernel(PERSISTENT, "gemm_persistent", params, seed=4, target=TargetConfig(core_grid=grid))
    assert result.plan["grid"]["extents"] == [grid[0] * grid[1]]       # driver.get_num_sms(): the target's cores
    assert outcome.passed, outcome.verification.render()


def test_an_expression_in_a_diagnostic_is_shown_in_the_users_notation():
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((64, 32), "float32"), C: T.Tensor((64, 32), "float32")):
            with T.Kernel(2) as bx:
                A_s = T.alloc_shared((32, 32), "float32")
                for _ in T.serial(T.if_then_else(A[bx, 0] > 0, 1, 0)):
                    T.copy(A[bx * 32, 0], A_s)
                T.copy(A_s, C[bx * 32, 0])
    ''')
    err = error_of(source)
    assert "T.serial bound `T.if_then_else((A[bx, 0] > 0), 1, 0)` is not an integer function" in err.message
    assert "Select(" not in err.message and "Var(" not in err.message and "Load(" not in err.message
    assert err.location.line == line_of(source, "T.serial(T.if_then_else")


PER_HEAD = src('''
    @tilelang.jit
    def add_per_head(heads, rows=64, block_M=64, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((heads, rows, 32), dtype), Sinks: T.Tensor((heads,), dtype),
                 Y: T.Tensor((heads, rows, 32), dtype)):
            with T.Kernel(rows // block_M, heads) as (bx, by):
                x = T.alloc_fragment((block_M, 32), dtype)
                s = T.alloc_fragment((block_M,), dtype)
                T.copy(X[by, bx * block_M:(bx + 1) * block_M, :], x)
                for i in T.Parallel(block_M):
                    s[i] = Sinks[by] * 2.0            # one element of a global vector at the block's head
                for i, j in T.Parallel(block_M, 32):
                    x[i, j] = x[i, j] + s[i]
                T.copy(x, Y[by, bx * block_M:(bx + 1) * block_M, :])
        return main
''')


@pytest.mark.parametrize("heads", [4, 64])     # within one 32-element chunk; chunk by // 32, column by % 32
def test_one_element_of_a_global_vector_at_a_block_index(heads):
    _, outcome = run_kernel(PER_HEAD, "add_per_head", {"heads": heads, "rows": 128}, seed=5)
    assert outcome.passed, outcome.verification.render()
    np = __import__("numpy")
    x, sinks = outcome.inputs["X"], outcome.inputs["Sinks"]
    assert np.allclose(outcome.outputs["Y"], x + 2 * sinks[:, None, None], rtol=2e-3, atol=2e-2)


def test_one_element_of_a_vector_of_odd_length_names_the_padding():
    err = error_of(PER_HEAD, entry="add_per_head", params={"heads": 40, "rows": 64})
    assert "one element of `Sinks` (40 elements) is read at a computed index" in err.message
    assert "pad `Sinks` to 64 elements" in err.hint and err.location.line == line_of(PER_HEAD, "Sinks[by] * 2.0")


BRANCHES = src('''
    @tilelang.jit
    def branches(M=128, N=64, block_M=32, dtype=T.float32, double_first=True):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(M // block_M) as bx:
                x = T.alloc_fragment((block_M, N), dtype)
                T.copy(X[bx * block_M, 0], x)
                if bx < 2 and double_first:          # a block-index condition and a factory flag
                    for i, j in T.Parallel(block_M, N):
                        x[i, j] = x[i, j] * 2.0
                elif not bx != 2:
                    for i, j in T.Parallel(block_M, N):
                        x[i, j] = x[i, j] + 1.0
                else:
                    for i, j in T.Parallel(block_M, N):
                        x[i, j] = -x[i, j]
                T.copy(x, Y[bx * block_M, 0])
        return main
''')


@pytest.mark.parametrize("double_first", [True, False])
def test_if_on_block_indices_runs_each_branch_on_its_cores(double_first):
    np = __import__("numpy")
    _, outcome = run_kernel(BRANCHES, "branches", {"double_first": double_first}, seed=6)
    x = outcome.inputs["X"]
    want = -x                                       # independent of the reference: the branches, block by block
    if double_first:
        want[:64] = 2 * x[:64]
    want[64:96] = x[64:96] + 1
    np.testing.assert_allclose(outcome.outputs["Y"], want, rtol=1e-6, atol=1e-6)
    assert outcome.passed


@pytest.mark.parametrize("condition, message, at", [
    # per element, `if X[i, j] > 0:` lowers (tests/tilelang/test_data_selects.py); one element of a 2-D tensor
    # spread over the tile does not: located at the store it guards
    ("if X[0, 0] > 0:", "extent 1 is not a multiple of 32", "x[i, j] = 0.0"),
])
def test_an_if_the_device_cannot_take_is_located(condition, message, at):
    source = src(f'''
        @T.prim_func
        def main(X: T.Tensor((32, 32), "float32"), Y: T.Tensor((32, 32), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((32, 32), "float32")
                T.copy(X, x)
                for i, j in T.Parallel(32, 32):
                    {condition}
                        x[i, j] = 0.0
                T.copy(x, Y)
    ''')
    err = error_of(source)
    assert message in err.message and err.location.line == line_of(source, at)


def test_alloc_var_scalars_take_their_assigned_values():
    np = __import__("numpy")
    source = src('''
        @tilelang.jit
        def decay_rows(M=128, N=64, block_M=32, dtype=T.float32):
            @T.prim_func
            def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
                with T.Kernel(M // block_M) as bx:
                    row0 = T.alloc_var(T.int32)
                    row0 = bx * block_M
                    scale = T.alloc_var(T.float32, init=0.5)
                    x = T.alloc_fragment((block_M, N), dtype)
                    T.copy(X[row0, 0], x)
                    for i, j in T.Parallel(block_M, N):
                        x[i, j] = x[i, j] * scale
                    T.copy(x, Y[row0, 0])
            return main
    ''')
    _, outcome = run_kernel(source, "decay_rows", seed=7)
    np.testing.assert_allclose(outcome.outputs["Y"], outcome.inputs["X"] * 0.5, rtol=1e-6)


def test_match_buffer_binds_a_pointer_argument_and_an_fp32_copy_is_exact():
    np = __import__("numpy")
    source = src('''
        @tilelang.jit
        def copy_2d(A: T.ptr, is_2d=True):
            M, N = T.const("M, N")
            A = T.match_buffer(A, [M, N], T.float32)
            B = T.empty((M, N), T.float32)
            with T.Kernel(1) as _:
                x = T.alloc_fragment((M, N), T.float32)
                T.copy(A, x)
                T.copy(x, B)
            return B
    ''')
    result, outcome = run_kernel(source, "copy_2d", {"A": "float32[64,96]"}, seed=8)
    assert [(b["name"], b["shape"]) for b in result.plan["buffers"] if b["role"] in ("input", "output")] == \
        [("A", [64, 96]), ("B", [64, 96])]
    # fp32 through DST unrounded: the kernel's DST is fp32 whenever a tile is (a 16-bit DST rounded it to bf16)
    np.testing.assert_array_equal(outcome.outputs["B"], outcome.inputs["A"])


SCALAR_ARGS = src('''
    @tilelang.jit
    def shift(M=64, N=64, block_M=32):
        @T.prim_func
        def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32"), bias: T.float32, rows: T.int32):
            with T.Kernel(M // block_M) as bx:
                x = T.alloc_fragment((block_M, N), "float32")
                T.copy(X[bx * block_M, 0], x)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.if_then_else(bx * block_M + i < rows, x[i, j] + bias, x[i, j])
                T.copy(x, Y[bx * block_M, 0])
        return main
''')


def test_scalar_kernel_arguments_specialize_the_kernel():
    np = __import__("numpy")
    _, outcome = run_kernel(SCALAR_ARGS, "shift", {"bias": "1.5", "rows": "40"}, seed=9)
    x = outcome.inputs["X"]
    want = x.copy()
    want[:40] += 1.5
    np.testing.assert_allclose(outcome.outputs["Y"], want, rtol=1e-6, atol=1e-6)
    err = error_of(SCALAR_ARGS, entry="shift", params={"bias": "1.5"})
    assert "`rows` is a scalar kernel argument (int32); give its value as --param rows=VALUE" in err.message
    err = error_of(SCALAR_ARGS, entry="shift", params={"bias": "1.5", "rows": "4.5"})
    assert "scalar kernel argument `rows` (int32) cannot take `4.5`" in err.message


ELEMENT_IFS = src('''
    @tilelang.jit
    def gemm_guarded(M=100, N=96, K=64, block_M=64, block_N=32, block_K=32, dtype=T.float16):
        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M)) as (bx, by):
                A_s = T.alloc_shared((block_M, block_K), dtype)
                B_s = T.alloc_shared((block_K, block_N), dtype)
                C_l = T.alloc_fragment((block_M, block_N), T.float32)
                T.clear(C_l)
                for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                    T.copy(A[by * block_M, k * block_K], A_s)
                    T.copy(B[k * block_K, bx * block_N], B_s)
                    T.gemm(A_s, B_s, C_l)
                for i, j in T.Parallel(block_M, block_N):
                    if j >= 16:                       # each element takes its own branch
                        C_l[i, j] = C_l[i, j] * 2.0
                    else:
                        C_l[i, j] = -C_l[i, j]
                for i, j in T.Parallel(block_M, block_N):
                    if by * block_M + i < M and bx * block_N + j < N:     # the GPU-style bounds check
                        C[by * block_M + i, bx * block_N + j] = C_l[i, j]
        return main
''')


def test_if_inside_a_parallel_loop_is_per_element():
    np = __import__("numpy")
    _, outcome = run_kernel(ELEMENT_IFS, "gemm_guarded", seed=10)
    a, b = outcome.inputs["A"].astype(np.float64), outcome.inputs["B"].astype(np.float64)
    product = a @ b
    want = np.where(np.arange(96) % 32 >= 16, 2 * product, -product)
    np.testing.assert_allclose(outcome.outputs["C"], want, rtol=1e-2, atol=5e-2)


BLOCK_MASK = src('''
    @tilelang.jit
    def block_causal(M=128, N=128, block_M=64, block=32, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(M // block_M) as bx:
                x = T.alloc_fragment((block_M, N), dtype)
                T.copy(X[bx * block_M, 0], x)
                for i, j in T.Parallel(block_M, N):
                    x[i, j] = T.if_then_else((bx * block_M + i) // block >= j // block, x[i, j], 0)
                T.copy(x, Y[bx * block_M, 0])
        return main
''')


@pytest.mark.parametrize("block", [32, 64])
def test_a_mask_constant_in_each_tile_is_lowered(block):
    np = __import__("numpy")
    _, outcome = run_kernel(BLOCK_MASK, "block_causal", {"block": block}, seed=11)
    rows, cols = np.indices((128, 128))
    want = np.where(rows // block >= cols // block, outcome.inputs["X"], 0)
    np.testing.assert_array_equal(outcome.outputs["Y"], want)


def test_a_mask_that_varies_inside_a_tile_but_not_linearly_is_located():
    err = error_of(BLOCK_MASK, entry="block_causal", params={"block": 16})
    assert "is not linear in the element indices inside a 32x32 tile" in err.message
    assert err.location.line == line_of(BLOCK_MASK, "T.if_then_else((bx * block_M + i) // block")


def test_a_mask_whose_offset_picks_by_block_is_read_from_its_table():
    """The table entry the reader computes holds a T.if_then_else of the block index (a ternary in reader.cpp)."""
    np = __import__("numpy")
    source = BLOCK_MASK.replace("(bx * block_M + i) // block >= j // block",
                                "(bx * block_M + i) // block >= j // block + T.if_then_else(bx < 1, 0, 1)")
    result, outcome = run_kernel(source, "block_causal", {"block": 32}, seed=12)
    assert b"bx < 1 ?" in result.artifacts["reader.cpp"]
    rows, cols = np.indices((128, 128))
    shift = (rows >= 64).astype(int)                 # block 0 (rows 0..63): 0; block 1: 1
    want = np.where(rows // 32 >= cols // 32 + shift, outcome.inputs["X"], 0)
    np.testing.assert_array_equal(outcome.outputs["Y"], want)


def test_a_tile_filled_in_a_branch_and_used_after_it_is_located():
    source = src('''
        @T.prim_func
        def main(X: T.Tensor((64, 32), "float32"), Z: T.Tensor((64, 32), "float32"), Y: T.Tensor((64, 32), "float32")):
            with T.Kernel(2) as bx:
                s = T.alloc_shared((32, 32), "float32")
                x = T.alloc_fragment((32, 32), "float32")
                if bx < 1:
                    T.copy(X[bx * 32, 0], s)
                else:
                    T.copy(Z[bx * 32, 0], s)
                T.copy(s, x)
                T.copy(x, Y[bx * 32, 0])
    ''')
    err = error_of(source)
    assert "`s` is read from DRAM inside a loop or an `if` branch" in err.message and "used after it" in err.message
    assert err.location.line == line_of(source, "T.copy(s, x)")


LOOP_CARRIED = src('''
    @tilelang.jit
    def carried(M=128, N=64, block_M=32, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(M // block_M) as bx:
                x = T.alloc_fragment((block_M, N), dtype)
                T.copy(X[bx * block_M, 0], x)
                for k in T.serial(2):
                    if bx >= 1:
                        if k == 1:
                            for i, j in T.Parallel(block_M, N):
                                x[i, j] = x[i, j] + 1.0
                    for i, j in T.Parallel(block_M, N):
                        if j < 32:
                            x[i, j] = x[i, j] * 2.0
                T.copy(x, Y[bx * block_M, 0])
        return main
''')


def test_a_staged_tile_updated_across_loop_iterations_and_branches_carries_its_value():
    """Every iteration reads the previous one's values (before: each re-read the staged data)."""
    np = __import__("numpy")
    _, outcome = run_kernel(LOOP_CARRIED, "carried", seed=13)
    x = outcome.inputs["X"].astype(np.float64)
    want = x.copy()
    for block in range(4):
        rows = slice(block * 32, block * 32 + 32)
        for k in range(2):
            if block >= 1 and k == 1:
                want[rows] += 1
            want[rows, :32] *= 2
    np.testing.assert_allclose(outcome.outputs["Y"], want, rtol=1e-6, atol=1e-6)


# ---- parameters typed from the factory -------------------------------------------------------------------------
def test_parameters_are_typed_from_the_signature():
    from compiler.frontend.tilelang.params import type_params

    def factory(M, causal=False, scale=1.0, blocks=(64, 128), dtype="float16", name="x"):
        pass

    import inspect
    typed = type_params(inspect.signature(factory), {"M": "256", "causal": "False", "scale": "2", "blocks": "32,64",
                                                     "dtype": "bf16", "name": "y"}, "factory", None)
    assert typed == {"M": 256, "causal": False, "scale": 2.0, "blocks": (32, 64), "dtype": "bfloat16", "name": "y"}
    assert type(typed["causal"]) is bool and type(typed["scale"]) is float
    assert type_params(inspect.signature(factory), {"causal": 1}, "factory", None) == {"causal": True}
    with pytest.raises(CompileError, match="parameter `causal` of `factory` takes a bool"):
        type_params(inspect.signature(factory), {"causal": "maybe"}, "factory", None)


def test_scalar_parameters_annotated_with_a_dtype_take_that_type():
    import inspect

    from compiler.frontend.tilelang.expr import DType
    from compiler.frontend.tilelang.params import type_params

    def factory(X, data=1, steps=2, flag=False):
        pass

    factory.__annotations__.update(data=DType("float32"),              # the object T.float32
                                   steps="T.int32", flag="T.bool")     # text, as with `from __future__ import ...`

    typed = type_params(inspect.signature(factory), {"data": "2.5", "steps": "4", "flag": "true"}, "factory", None)
    assert typed == {"data": 2.5, "steps": 4, "flag": True}
    assert type(typed["data"]) is float and type(typed["steps"]) is int
    with pytest.raises(CompileError, match="parameter `steps` of `factory` takes an integer"):
        type_params(inspect.signature(factory), {"steps": "1.5"}, "factory", None)


# ---- module evaluation -------------------------------------------------------------------------------------------
def test_autotune_star_import_and_pass_configs_evaluate_as_python_does():
    source = src('''
        import itertools
        import torch
        import tilelang.testing
        from tilelang.autotuner import *

        def get_configs():
            return [dict(block_M=b) for b in itertools.product([32, 64])]

        @autotune(configs=get_configs(), warmup=10, rep=10)
        @tilelang.jit(out_idx=[1], pass_configs={tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
        def double(M, block_M=32):
            @T.prim_func
            def main(A: T.Tensor((M, 64), "float32"), B: T.Tensor((M, 64), "float32")):
                with T.Kernel(tilelang.cdiv(M, block_M), threads=128) as bx:
                    a = T.alloc_fragment((block_M, 64), "float32")
                    T.copy(A[bx * block_M, 0], a)
                    for k in T.Serial(1):
                        for i, j in T.Parallel(block_M, 64):
                            a[i, j] = a[i, j] + a[i, j]
                    T.copy(a, B[bx * block_M, 0])
            return main

        B = double(128)                   # module code that is not needed: a local of the factory has this name
        X = torch.randn(128, 64, device="cuda")
        if __name__ == "__main__":
            raise SystemExit(double(128)(X))
    ''')
    result = compile_source(source, filename="k.py", entry="double", params={"M": "128"})
    assert result.plan["grid"]["extents"] == [4]


def test_gpu_hints_are_accepted_and_noted_in_the_log():
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
            with T.Kernel(2, 2, threads=256) as (bx, by):
                A_s = T.alloc_shared((32, 64), "float16")
                B_s = T.alloc_shared((64, 32), "float16")
                C_l = T.alloc_fragment((32, 32), "float32")
                T.annotate_layout({A_s: T.Layout((32, 64), lambda i, j: (i, j))})
                T.use_swizzle(panel_size=10)
                T.disable_warp_group_reg_alloc()
                T.clear(C_l)
                T.copy(A[by * 32, 0], A_s)
                T.copy(B[0, bx * 32], B_s)
                T.sync_threads()
                T.gemm(A_s, B_s, C_l, policy=T.GemmWarpPolicy.FullRow)
                T.copy(C_l, C[by * 32, bx * 32])
    ''')
    log = compile_source(source, filename="k.py").log
    for needle in ("threads=256", "T.annotate_layout", "T.use_swizzle", "T.disable_warp_group_reg_alloc",
                   "T.sync_threads", "policy="):
        line = next(l for l in log.splitlines() if needle in l)
        assert line.startswith("k.py:") and ": note: " in line


@pytest.mark.parametrize("body,construct", [
    ("T.atomic_add(C_l[0, 0], 1)", "T.atomic_add"),
    ("T.get_thread_binding()", "T.get_thread_binding"),
    ("x = T.alloc_var(\"float32\") + 1", "a T.alloc_var variable is read before a value is assigned"),
    ("T.no_such_thing(C_l)", "T.no_such_thing"),
    ("T.reduce_sum(A_s, C_l, dim=2)", "reduces along dim=1 (each row) or dim=0"),
    ("y = undefined_name + 1", "not defined here"),
    ("y = [1][5]", "the kernel factory's Python failed"),
])
def test_unsupported_constructs_are_located_errors_in_words(body, construct):
    source = src(f'''
        @T.prim_func
        def main(A: T.Tensor((32, 32), "float32"), C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1) as bx:
                A_s = T.alloc_shared((32, 32), "float32")
                C_l = T.alloc_fragment((32, 32), "float32")
                T.copy(A, A_s)
                {body}
                T.copy(C_l, C)
    ''')
    err = error_of(source)
    assert construct in err.message
    assert (err.location.file, err.location.line) == ("k.py", line_of(source, body))
    assert not __import__("re").match(r"^[A-Z]\w*(Error|Exception)\b", err.message)


def test_a_vector_used_as_a_row_and_a_column_reads_a_transposed_copy():
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((32, 32), "float32"), bias: T.Tensor((32,), "float32"), C: T.Tensor((32, 32), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_fragment((32, 32), "float32")
                v = T.alloc_fragment((32,), "float32")
                T.copy(A, a)
                T.copy(bias, v)
                for i, j in T.Parallel(32, 32):
                    a[i, j] = a[i, j] * v[j]
                for i, j in T.Parallel(32, 32):
                    a[i, j] = a[i, j] + v[i]
                T.copy(a, C)
    ''')
    _, outcome = run_kernel(source, seed=36)
    a, w = outcome.inputs["A"], outcome.inputs["bias"]
    np.testing.assert_allclose(outcome.outputs["C"], a * w[None, :] + w[:, None], rtol=1e-3, atol=1e-3)
    assert outcome.passed, outcome.verification.render()


def test_a_staged_tile_computed_on_becomes_a_computed_copy():
    """`x_s[i, j] *= s` on a tile filled from DRAM (TileLang's RMSNorm does it) verifies; the reader's tile and the
    computed one are separate buffers."""
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
            with T.Kernel(2) as bx:
                x_s = T.alloc_shared((32, 64), "float32")
                T.copy(A[bx * 32, 0], x_s)
                for i, j in T.Parallel(32, 64):
                    x_s[i, j] *= 3
                T.copy(x_s, C[bx * 32, 0])
    ''')
    from compiler.api import emulate
    result = compile_source(source, filename="k.py")
    script = load_kernel(source, "k.py").func.script()
    assert 'x_s_c = T.alloc_local((32, 64))' in script and "T.tile.mul(x_s_c[0:32, 0:64], x_s[0:32, 0:64]" in script
    outcome = emulate(result.artifacts, source=source, filename="k.py", seed=1)
    assert outcome.passed, outcome.verification.render()


def test_dram_to_dram_copies_and_per_row_statistics_of_a_rank3_tensor_verify():
    """A global-to-global T.copy is staged through L1 and written out as it arrived; a (batch, heads, seq) tensor
    written a column at a time (attention's log-sum-exp) is tiled as a column per (batch, head)."""
    source = src('''
        @T.prim_func
        def main(X: T.Tensor((2, 3, 64, 32), "float32"), Y: T.Tensor((2, 3, 64, 32), "float32"),
                 S: T.Tensor((2, 3, 64), "float32")):
            with T.Kernel(2, 3, 2) as (bx, by, bz):
                x = T.alloc_fragment((32, 32), "float32")
                s = T.alloc_fragment((32,), "float32")
                T.copy(X[bz, by, bx * 32:(bx + 1) * 32, :], Y[bz, by, bx * 32:(bx + 1) * 32, :])
                T.copy(X[bz, by, bx * 32:(bx + 1) * 32, :], x)
                T.reduce_sum(x, s, dim=1)
                T.copy(s, S[bz, by, bx * 32:(bx + 1) * 32])
    ''')
    from compiler.api import emulate
    result = compile_source(source, filename="k.py")
    layout = {b["name"]: b["tile_axes"] for b in result.plan["buffers"]}
    assert layout == {"X": [2, 3], "Y": [2, 3], "S": [2, -1]}
    outcome = emulate(result.artifacts, source=source, filename="k.py", seed=3)
    assert outcome.passed, outcome.verification.render()
    np = __import__("numpy")
    assert np.array_equal(outcome.outputs["Y"], outcome.inputs["X"])


SUFFIX_SUMS = src('''
    @tilelang.jit
    def suffix_sums(M=128, N=64, block=32, dtype=T.float32):
        @T.prim_func
        def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
            with T.Kernel(M // block) as bx:
                x = T.alloc_shared((block, N), dtype)
                acc = T.alloc_fragment((block, N), dtype)
                T.clear(acc)
                for k in T.Pipelined(bx, M // block, num_stages=2):   # a first block that depends on bx
                    T.copy(X[k * block, 0], x)
                    for i, j in T.Parallel(block, N):
                        acc[i, j] += x[i, j]
                T.copy(acc, Y[bx * block, 0])
        return main
''')


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_a_loop_start_may_depend_on_the_block_index(arch):
    np = __import__("numpy")
    _, outcome = run_kernel(SUFFIX_SUMS, "suffix_sums", seed=13, target=TargetConfig(arch=arch))
    blocks = outcome.inputs["X"].reshape(4, 32, 64)
    want = np.concatenate([blocks[b:].sum(axis=0) for b in range(4)])    # block b sums blocks b..3
    np.testing.assert_allclose(outcome.outputs["Y"], want, rtol=1e-5, atol=1e-5)
    assert outcome.passed, outcome.verification.render()
