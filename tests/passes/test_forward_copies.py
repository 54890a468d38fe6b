"""TTForwardCopies: ops read a whole copy's source instead of the copy; a copy nothing reads any more is dropped."""
from __future__ import annotations

import numpy as np
import pytest
from tvm import tirx

from compiler import ops
from compiler.api import compile_source, emulate
from compiler.ir import op_name, region_of
from schemas.target import TargetConfig

from .helpers import apply, block_body, kernel


def tile_ops(func) -> list[tuple[str, str, tuple[str, ...]]]:
    """(op, destination, sources) of each tile op in the block body, in order."""
    out = []
    for s in block_body(func):
        if isinstance(s, tirx.TilePrimitiveCall):
            regions = [region_of(a) for a in s.args]
            out.append((op_name(s), regions[0].name, tuple(r.name for r in regions[1:] if r is not None)))
    return out


def row_kernel(after_copy: str, src_dtype: str = "bfloat16", x_dtype: str = "float32"):
    return kernel(f'''
    @T.prim_func
    def main(A: T.Buffer((64, 128), "{src_dtype}"), C: T.Buffer((64, 128), "float32")):
        T.device_entry()
        bx = T.cta_id([2])
        A_s = T.alloc_shared((32, 128), "{src_dtype}")
        x = T.alloc_local((32, 128), "{x_dtype}")
        m = T.alloc_local((32, 1), "{x_dtype}")
        T.tile.copy(A_s, A[bx * 32:bx * 32 + 32, 0:128])
        T.tile.copy(x, A_s)
{after_copy}
        T.tile.copy(C[bx * 32:bx * 32 + 32, 0:128], x)
    ''')


SOFTMAX_HEAD = '''        T.tile.max(m, x, [-1], False)
        T.tile.sub(x, x, m)
        T.tile.exp(x, x)'''


def test_readers_take_the_source_and_the_overwritten_copy_is_dropped():
    _, after = apply(row_kernel(SOFTMAX_HEAD), "TTForwardCopies")
    assert tile_ops(after["main"]) == [("max", "m", ("A_s",)), ("sub", "x", ("A_s", "m")), ("exp", "x", ("x",))]


def test_a_copy_read_after_its_source_changes_is_kept():
    mod = kernel('''
    @T.prim_func
    def main(A: T.Buffer((64, 128), "bfloat16"), C: T.Buffer((64, 128), "float32")):
        T.device_entry()
        bx = T.cta_id([2])
        A_s = T.alloc_shared((32, 128), "bfloat16")
        y = T.alloc_local((32, 128), "float32")
        x = T.alloc_local((32, 128), "float32")
        m = T.alloc_local((32, 1), "float32")
        T.tile.copy(A_s, A[bx * 32:bx * 32 + 32, 0:128])
        T.tile.exp(y, A_s)
        T.tile.copy(x, y)
        T.tile.max(m, x, [-1], False)
        T.tile.mul(y, y, T.float32(2.0))
        T.tile.sub(x, x, m)
        T.tile.add(x, x, y)
        T.tile.copy(C[bx * 32:bx * 32 + 32, 0:128], x)
    ''')
    _, after = apply(mod, "TTForwardCopies")
    # the max before the source changes reads it; the sub after it needs the copy
    assert tile_ops(after["main"]) == [("exp", "y", ("A_s",)), ("copy", "x", ("y",)), ("max", "m", ("y",)),
                                       ("mul", "y", ("y",)), ("sub", "x", ("x", "m")), ("add", "x", ("x", "y"))]


def test_a_copy_written_out_is_kept_and_its_readers_before_take_the_source():
    _, after = apply(row_kernel("        T.tile.max(m, x, [-1], False)"), "TTForwardCopies")
    assert tile_ops(after["main"]) == [("copy", "x", ("A_s",)), ("max", "m", ("A_s",))]   # then x's write-out


def test_a_write_out_of_a_rounding_copy_packs_its_source():
    """y = acc (float32 -> bfloat16) then y written to a bfloat16 output: the write-out packs acc (the packer rounds
    to bfloat16 as the copy did); to a float32 output the copy's rounding matters and it stays."""
    def normalize(out_dtype):
        return kernel(f'''
    @T.prim_func
    def main(A: T.Buffer((64, 128), "bfloat16"), C: T.Buffer((64, 128), "{out_dtype}")):
        T.device_entry()
        bx = T.cta_id([2])
        A_s = T.alloc_shared((32, 128), "bfloat16")
        acc = T.alloc_local((32, 128), "float32")
        y = T.alloc_local((32, 128), "bfloat16")
        T.tile.copy(A_s, A[bx * 32:bx * 32 + 32, 0:128])
        T.tile.exp(acc, A_s)
        T.tile.copy(y, acc)
        T.tile.copy(C[bx * 32:bx * 32 + 32, 0:128], y)
    ''')

    def sends(func):
        return [str(ops.intrinsic_of(s)[1][1].value) for s in block_body(func)
                if ops.intrinsic_of(s) is not None and ops.intrinsic_of(s)[0].name == "compute_send"]

    _, after = apply(normalize("bfloat16"), "TTForwardCopies")
    assert tile_ops(after["main"]) == [("exp", "acc", ("A_s",))] and sends(after["main"]) == ["acc"]
    _, after = apply(normalize("float32"), "TTForwardCopies")
    assert ("copy", "y", ("acc",)) in tile_ops(after["main"]) and sends(after["main"]) == ["y"]


@pytest.mark.parametrize("src_dtype, x_dtype", [("float16", "float32"), ("float32", "bfloat16")])
def test_only_exact_conversions_are_forwarded(src_dtype, x_dtype):
    _, after = apply(row_kernel(SOFTMAX_HEAD, src_dtype, x_dtype), "TTForwardCopies")
    forwarded = ("copy", "x", ("A_s",)) not in tile_ops(after["main"])
    assert forwarded == (x_dtype == "float32")   # float16 -> float32 is exact, float32 -> bfloat16 rounds


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_forwarded_row_kernel_matches_numpy(arch):
    """The softmax head with its copy forwarded (the FPU's broadcast subtract reading the bf16 staging tiles) runs
    on the emulator and matches NumPy."""
    source = row_kernel(SOFTMAX_HEAD)["main"].script()
    result = compile_source(source, filename="row.py", target=TargetConfig(arch=arch))
    compute = result.artifacts["compute.cpp"].decode()
    assert "copy_tile(cb_A_s" not in compute and "sub_tiles_bcast_cols(cb_A_s" in compute
    rng = np.random.default_rng(5)
    a = rng.standard_normal((64, 128)).astype(np.float32)
    a_bf16 = (a.view(np.uint32) + 0x8000 & 0xFFFF0000).view(np.float32)   # what the bf16 input holds
    outcome = emulate(result.artifacts, target=TargetConfig(arch=arch), source=source, filename="row.py",
                      inputs={"A": a_bf16})
    assert outcome.verification.ok, outcome.verification.render()
    expected = np.exp(a_bf16 - a_bf16.max(axis=1, keepdims=True))
    np.testing.assert_allclose(outcome.outputs["C"], expected, rtol=2e-3, atol=1e-6)
