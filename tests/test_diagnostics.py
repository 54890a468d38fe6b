"""Bad input gets a clear, located error: file:line:col, a message naming the construct, exit code 2."""
from __future__ import annotations

import pytest

from compiler.api import compile_source
from compiler.errors import CompileError
from compiler.pipeline import tt_passes
from schemas.target import TargetConfig

from .conftest import ROOT, TEST_DATA


def tilefarm(*args: str):
    """`tilefarm ARGS` run in this process (typer's CliRunner): its exit code, stdout and stderr, without a new
    process importing tvm for each command (~2 CPU s each); tests/test_emulated_examples.py runs `python -m
    tilefarm` itself."""
    from typer.testing import CliRunner

    from tilefarm.cli import app

    return CliRunner().invoke(app, [str(a) for a in args])

HEADER = 'from tvm.script import tirx as T\n\n\n@T.prim_func\n'
GEMM = HEADER + '''def main(A: T.Buffer((128, 128), "float16"), B: T.Buffer((128, 128), "float16"), C: T.Buffer((128, 128), "float32")):
    T.device_entry()
    by, bx = T.cta_id([4, 4])
    A_s = T.alloc_shared((32, 32), "float16")
    B_s = T.alloc_shared((32, 32), "float16")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.zero(C_l)
    for k in range(4):
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
'''
GEMM_LINE = {line.strip(): i + 1 for i, line in enumerate(GEMM.splitlines())}


def error_of(text: str, **target) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_source(text, filename="k.py", target=TargetConfig(**target))
    return info.value


def line_of(text: str, needle: str) -> int:
    return next(i + 1 for i, line in enumerate(text.splitlines()) if needle in line)


def test_the_template_itself_compiles():
    assert compile_source(GEMM, filename="k.py").entry == "main"


@pytest.mark.parametrize("path,line", [(ROOT / "examples" / "bad_syntax.py", 15), (TEST_DATA / "bad_syntax.py", 14)])
def test_syntax_error_has_its_real_line(path, line):
    err = error_of(path.read_text())
    assert err.location.line == line and err.location.col is not None
    assert err.render().startswith(f"k.py:{line}:{err.location.col}: error: invalid syntax")


CASES = {
    "undefined name": ("T.tile.zero(C_l)", "T.tile.zero(C_x)", "Undefined variable: C_x"),
    "element store": ("T.tile.zero(C_l)", "C_l[0, 0] = T.float32(1)", "element stores"),
    "parallel loop": ("for k in range(4):", "for k in T.parallel(4):", "unsupported loop kind `parallel`"),
    "unknown tile op": ("T.tile.zero(C_l)", "T.tile.silu(C_l, C_l)", "T.tile.silu is not supported"),
    "copy shape": ("T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])",
                   "T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 64])", "region shape"),
    "copy dtype": ('A_s = T.alloc_shared((32, 32), "float16")', 'A_s = T.alloc_shared((32, 32), "float32")',
                   "cannot convert", "T.tile.copy(A_s"),
    "gemm shape": ("T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])",
                   "T.tile.copy(B_s, B[k * 32:k * 32 + 64, bx * 32:bx * 32 + 32])", "T.tile.gemm shape mismatch",
                   "T.tile.gemm"),
    "gemm alpha": ("T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)", "T.tile.gemm(C_l, A_s, B_s, C_l, alpha=2.0, beta=1.0)",
                   "alpha=2.0 is not supported"),
    "gemm beta": ("T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)", "T.tile.gemm(C_l, A_s, B_s, C_l, beta=0.5)",
                  "beta=0.5 is not supported"),
    "gemm transpose_A": ("T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)",
                         "T.tile.gemm(C_l, A_s, B_s, C_l, transpose_A=True, beta=1.0)", "transpose_A is not supported"),
    # reads from such a column are built element by element (read_window); writes to one are not lowered
    "unaligned region": ("T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)",
                         "T.tile.copy(C[by * 32:by * 32 + 32, bx * 32 + 16:bx * 32 + 48], C_l)", "not a multiple of 32"),
    "grid too small": ("by, bx = T.cta_id([4, 4])", "by, bx = T.cta_id([2, 4])", "does not cover output `C`"),
    "compute into staging tile": ("T.tile.zero(C_l)", "T.tile.fill(A_s, T.float32(0))", "also filled from DRAM",
                                  "T.tile.copy(A_s"),
    "global compute": ("T.tile.zero(C_l)", "T.tile.zero(C[0:32, 0:32])", "writes the global buffer `C` directly"),
    "one-dim param": ('C: T.Buffer((128, 128), "float32")', 'C: T.Buffer((128, 128), "float32"), D: T.Buffer((64,), "float32")',
                      "rank 1"),
    "bad dtype": ('C_l = T.alloc_local((32, 32), "float32")', 'C_l = T.alloc_local((32, 32), "int8")', "dtype int8"),
}


@pytest.mark.parametrize("name", CASES)
def test_diagnostic_is_located(name):
    old, new, message, *where = CASES[name]
    assert old in GEMM
    if name == "gemm shape":
        old, new = old + "\n", new + "\n"
        text = GEMM.replace('B_s = T.alloc_shared((32, 32), "float16")', 'B_s = T.alloc_shared((64, 32), "float16")')
        text = text.replace(old, new)
    else:
        text = GEMM.replace(old, new)
    err = error_of(text)
    assert message in err.message, err.render()
    assert err.location is not None and err.location.file == "k.py" and err.location.line is not None
    if name == "grid too small":
        assert err.location.line == line_of(text, "T.cta_id")
    elif name != "one-dim param":
        assert err.location.line == line_of(text, (where[0] if where else new).strip()), err.render()


def test_read_before_initialized_points_at_the_reader():
    text = GEMM.replace("    T.tile.zero(C_l)\n", "")
    err = error_of(text)
    assert "`C_l` is read before it is initialized" in err.message
    assert err.location.line == line_of(text, "T.tile.gemm") and "T.tile.zero(C_l)" in err.hint


def test_accumulator_larger_than_dst_in_a_nested_k_loop_lives_in_l1_and_verifies():
    """Big accumulators go to an intermediate CB between windows, however deep the K loops are nested."""
    from compiler.api import emulate

    text = HEADER + '''def main(A: T.Buffer((128, 128), "float16"), B: T.Buffer((128, 128), "float16"), C: T.Buffer((128, 128), "float32")):
    T.device_entry()
    bx = T.cta_id([1])
    A_s = T.alloc_shared((128, 32), "float16")
    B_s = T.alloc_shared((32, 128), "float16")
    C_l = T.alloc_local((128, 128), "float32")
    T.tile.zero(C_l)
    for k in range(2):
        for kk in range(2):
            T.tile.copy(A_s, A[0:128, (k * 2 + kk) * 32:(k * 2 + kk) * 32 + 32])
            T.tile.copy(B_s, B[(k * 2 + kk) * 32:(k * 2 + kk) * 32 + 32, 0:128])
            T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[0:128, 0:128], C_l)
'''
    result = compile_source(text, filename="k.py")
    cbs = {cb["buffer"]: cb for cb in result.plan["circular_buffers"]}
    assert cbs["C_l"]["role"] == "intermediate" and cbs["C_l"]["num_pages"] == 16   # updated in place
    outcome = emulate(result.artifacts, source=text, filename="k.py", seed=5)
    assert outcome.passed, outcome.verification.render()


def test_large_accumulator_spills_to_an_intermediate_cb(compiled):
    result = compiled(ROOT / "examples" / "gemm_large_blocks.py", blocking="as_written")   # its 128 x 128 blocks
    cbs = {cb["name"]: cb for cb in result.plan["circular_buffers"]}
    spill = cbs["cb_Y_l"]        # one version of the accumulator, rewritten in place a group of tiles at a time
    assert spill["role"] == "intermediate" and spill["index"] == 24 and spill["num_pages"] == 16
    assert spill["producer"] == spill["consumer"] == "compute" and spill["data_format"] == "Float32"
    assert 24 in result.plan["compute_config"]["unpack_to_dest_fp32_cbs"]  # reloads are exact fp32


def test_entry_selection():
    two = GEMM + "\n\n@T.prim_func\n" + GEMM.split("@T.prim_func\n", 1)[1].replace("def main", "def other")
    assert compile_source(two, filename="k.py").entry == "main"
    assert compile_source(two, filename="k.py", entry="other").entry == "other"
    err = error_of(two.replace("def main", "def first"))
    assert "none is named `main`" in err.message
    with pytest.raises(CompileError, match="entry `nope` not found; kernels in this file: main, other"):
        compile_source(two, filename="k.py", entry="nope")


def test_foreign_import_is_rejected_at_its_line():
    err = error_of("import os\n" + GEMM)
    assert err.location.line == 1 and "unsupported import `import os`" in err.message


def test_empty_source():
    assert "empty" in error_of("   \n").message


def test_core_grid_override_must_fit():
    err = error_of(GEMM, core_grid=(9, 1))
    assert "does not fit" in err.message


def test_cli_prints_located_error_and_exits_2(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(GEMM.replace("range(4):", "range(4)"))
    proc = tilefarm("compile", bad, "-o", tmp_path / "o")
    assert proc.exit_code == 2
    assert proc.stderr.startswith(f"{bad}:{line_of(GEMM, 'for k in range(4):')}:")
    assert "error: invalid syntax" in proc.stderr
    assert not (tmp_path / "o").exists()


def test_cli_writes_artifacts_log_and_ir(tmp_path):
    src = tmp_path / "gemm.py"
    src.write_text(GEMM)
    proc = tilefarm("compile", src, "-t", "blackhole", "--partition", "strided", "-o", tmp_path / "o", "--dump-ir")
    assert proc.exit_code == 0, proc.output
    out = tmp_path / "o"
    assert {p.name for p in out.iterdir()} >= {"reader.cpp", "compute.cpp", "writer.cpp", "main.cpp", "tt.plan.json",
                                                "compile.log", "ir"}
    dumps = sorted(p.name for p in (out / "ir").iterdir())
    passes = len(tt_passes(TargetConfig(arch="blackhole")))   # one dump per pass of the pipeline, and the input
    assert dumps[0] == "00_input.py" and dumps[-1].endswith("_TTVerifyProgram.py") and len(dumps) == passes + 1
    log = (out / "compile.log").read_text()
    assert "pass:TTTensorize" in log and "blackhole" in log
    assert '"policy": "strided"' in (out / "tt.plan.json").read_text()


def test_cli_explains_the_blocks_it_chose(tmp_path):
    path = ROOT / "examples" / "tilelang" / "gemm.py"
    args = ["compile", path, "--entry", "matmul", "--param", "M=1024", "--param", "N=1024", "--param", "K=1024",
            "--param", "dtype=bfloat16", "-o", tmp_path / "o", "--explain"]
    proc = tilefarm(*args)
    assert proc.exit_code == 0, proc.output
    lines = proc.stdout.splitlines()
    assert "schedule (auto blocking):" in lines
    assert "  grid axis `by`: 1024 elements in blocks of 64 -> 128 (8 blocks)" in lines
    assert "  loop `k`: 1024 elements in steps of 32 -> 128 (8 steps; merged steps only accumulate)" in lines
    assert any(line.startswith("  grid 8x8 on a 8x8 core grid, `block` partition") for line in lines)
    assert "  math fidelity HiFi2: ttnn's matmul default for bfloat16 operands" in lines
    proc = tilefarm(*args, "--blocking", "as_written", "--math-fidelity", "HiFi4")
    assert proc.exit_code == 0, proc.output
    assert "  grid axis `by`: 1024 elements in blocks of 64 -> 64 (16 blocks)" in proc.stdout.splitlines()
    assert "  math fidelity HiFi4: the target's math_fidelity" in proc.stdout.splitlines()


SOFTMAX = (ROOT / "examples" / "softmax_rows.py").read_text()
REDUCE_CASES = {
    "column reduction": ("T.tile.max(m, A_s, axes=-1)", "T.tile.max(m, A_s, axes=0)", "column reductions are not supported"),
    "reduce dst not a column": ("T.tile.sum(s, x, axes=-1)", "T.tile.sum(x, A_s, axes=-1)", "needs an (64, 1) destination"),
    "reduce into a short column": ('m = T.alloc_local((64, 1), "float32")', 'm = T.alloc_local((32, 1), "float32")',
                                   "needs an (64, 1) destination", "T.tile.max(m, A_s, axes=-1)"),
    "broadcast rows differ": ("T.tile.mul(x, x, s)", "T.tile.mul(x, x, s[0:32, 0:1])", "shape mismatch"),
}


@pytest.mark.parametrize("name", REDUCE_CASES)
def test_reduction_diagnostic_is_located(name):
    old, new, message, *where = REDUCE_CASES[name]
    assert old in SOFTMAX
    text = SOFTMAX.replace(old, new)
    err = error_of(text)
    assert message in err.message, err.render()
    assert err.location.line == line_of(text, (where[0] if where else new).strip()), err.render()
