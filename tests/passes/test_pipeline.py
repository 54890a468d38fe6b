"""The pipeline end to end, phase by phase (compiler/pipeline.py): at each phase boundary the IR has the shape the
next phase expects, and it prints as TVMScript that parses back to the same IR (what --dump-ir writes). The
passes' own tests run one pass alone; these are the few that run them all."""
from __future__ import annotations

import struct
import textwrap

import numpy as np
import pytest
import tvm
import tvm_ffi
from tvm import tirx

from compiler import attrs, ops
from compiler.api import compile_source, emulate
from compiler.frontend import load_kernel
from compiler.pipeline import phase, phases, tt_passes
from schemas.target import TargetConfig
from tests.conftest import ROOT

from .helpers import HEADER, assert_ir_equal, run

KERNELS = [(ROOT / "examples" / "gemm_single_tile.py", None, None),
           (ROOT / "examples" / "softmax_rows.py", None, None),
           (ROOT / "examples" / "tilelang" / "flash_attention.py", "flash_attention",
            {"batch": 1, "heads": 2, "seq_len": 128, "dim": 64, "causal": True})]


def loaded(path, entry, params) -> tvm.IRModule:
    kernel = load_kernel(path.read_text(), str(path), entry, params)
    return tvm.IRModule({kernel.entry: attrs.put(kernel.func, {attrs.SOURCE_FILE: kernel.source_file,
                                                               attrs.ENTRY: kernel.entry})})


def tile_ops(func) -> list[str]:
    found = []
    tvm_ffi.structural_walk(func.body, (tirx.TilePrimitiveCall, lambda c: found.append(str(c.op.name))), order="pre")
    return found


def intrinsics(func) -> set[str]:
    found = set()
    tvm_ffi.structural_walk(func.body, (tirx.Evaluate, lambda s: found.add(ops.intrinsic_of(s)[0].name)
                                        if ops.intrinsic_of(s) else None), order="pre")
    return found


def test_the_pipeline_is_its_phases_in_order():
    config = TargetConfig()
    names = [p.info.name for p in tt_passes(config)]
    assert list(phases(config)) == ["Legalize", "Distribute", "LowerDataMovement", "LowerCompute", "SplitKernels"]
    assert names == [p.info.name for passes in phases(config).values() for p in passes]
    assert names[0] == "TTCheckKernel" and names[-1] == "TTVerifyProgram" and len(set(names)) == len(names)


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
@pytest.mark.parametrize("path,entry,params", KERNELS, ids=[k[0].stem for k in KERNELS])
def test_each_phase_leaves_its_shape_and_the_ir_prints_back(path, entry, params, arch):
    config = TargetConfig(arch=arch)
    mod = loaded(path, entry, params)
    shapes = {
        # one tile-level function, re-tiled, its tiles laid out
        "Legalize": lambda m: len(m.functions) == 1 and attrs.LAYOUT_DESC.get(m[entry or "main"]) is not None,
        # the grid is a persistent per-core loop over the core's blocks
        "Distribute": lambda m: "block_count" in m[entry or "main"].script(),
        # DRAM is reached by page reads and writes only: no tile copy touches a global buffer
        "LowerDataMovement": lambda m: {"read_tile", "write_tile"} <= intrinsics(m[entry or "main"]),
        # no tile op is left: DST windows of FPU / SFPU calls
        "LowerCompute": lambda m: tile_ops(m[entry or "main"]) == [],
        # three kernels, each with its role and what it checked
        "SplitKernels": lambda m: sorted(gv.name_hint for gv in m.functions) == ["compute", "reader", "writer"]
        and all(attrs.VERIFICATION.get(f) for f in m.functions.values()),
    }
    for name in phases(config):
        mod = run(phase(name, config), mod)
        assert shapes[name](mod), f"after {name}:\n{mod}"
        if arch == "wormhole_b0":                # --dump-ir's text is TVMScript that reads back to this IR (the
            for func in mod.functions.values():  # printer does not depend on the arch: one is enough)
                assert_ir_equal(tvm.script.from_source(func.script(), check_well_formed=False), func)


# ---- kernels whose DST planning TTTensorize's tests check, run end to end on the emulator ----------------------------
ATTENTION = '''
@T.prim_func
def main(Q: T.Buffer((64, 32), "float16"), K: T.Buffer((128, 32), "float16"), V: T.Buffer((128, 32), "float16"),
         O: T.Buffer((64, 32), "float32")):
    T.device_entry()
    bx = T.cta_id([2])
    q = T.alloc_shared((32, 32), "float16")
    k = T.alloc_shared((32, 32), "float16")
    v = T.alloc_shared((32, 32), "float16")
    s = T.alloc_local((32, 32), "float32")
    p = T.alloc_local((32, 32), "float16")
    acc = T.alloc_local((32, 32), "float32")
    m = T.alloc_local((32, 1), "float32")
    m_prev = T.alloc_local((32, 1), "float32")
    alpha = T.alloc_local((32, 1), "float32")
    l = T.alloc_local((32, 1), "float32")
    T.tile.copy(q, Q[bx * 32:bx * 32 + 32, 0:32])
    T.tile.zero(acc)
    T.tile.zero(l)
    T.tile.fill(m, T.float32("-inf"))
    for j in range(4):
        T.tile.copy(k, K[j * 32:j * 32 + 32, 0:32])
        T.tile.gemm(s, q, k, s, transpose_B=True, beta=0.0)
        T.tile.copy(m_prev, m)
        T.tile.max(m, s, axes=-1, accum=True)
        T.tile.sub(alpha, m_prev, m)
        T.tile.exp(alpha, alpha)
        T.tile.sub(s, s, m)
        T.tile.exp(s, s)
        T.tile.mul(l, l, alpha)
        T.tile.sum(l, s, axes=-1, accum=True)
        T.tile.cast(p, s)
        T.tile.mul(acc, acc, alpha)
        T.tile.copy(v, V[j * 32:j * 32 + 32, 0:32])
        T.tile.gemm(acc, p, v, acc, beta=1.0)
    T.tile.mul(acc, acc, T.float32(1.0))
    T.tile.copy(O[bx * 32:bx * 32 + 32, 0:32], acc)
'''

READ_THEN_REPLACED = '''
@T.prim_func
def main(X: T.Buffer((64, 64), "float32"), Y: T.Buffer((64, 64), "float32")):
    T.device_entry()
    bx = T.cta_id([2])
    x = T.alloc_shared((32, 32), "float32")
    y = T.alloc_local((32, 32), "float32")
    t = T.alloc_local((32, 32), "float32")
    r = T.alloc_local((32, 1), "float32")
    for j in range(2):
        T.tile.copy(x, X[j * 32:j * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.exp(y, x)
        T.tile.sum(r, y, axes=-1)
        T.tile.mul(t, r, T.float32(0.25))
        T.tile.sub(t, y, t)
        T.tile.copy(y, t)
        T.tile.copy(Y[j * 32:j * 32 + 32, bx * 32:bx * 32 + 32], y)
'''


@pytest.mark.parametrize("body, seed", [(ATTENTION, 4), (READ_THEN_REPLACED, 5)],
                         ids=["attention", "read_then_replaced"])
def test_tensorized_kernels_verify_on_the_emulator(body, seed):
    """Online-softmax attention (values in CBs, a cast packed from its source's DST slots) and a copy into a value
    its window has read (own slots): the compiled kernels match the NumPy reference on the emulator."""
    text = HEADER + textwrap.dedent(body)
    outcome = emulate(compile_source(text, filename="k.py").artifacts, source=text, filename="k.py", seed=seed)
    assert outcome.passed, outcome.verification.render()


def _exp_of_scaled(scale: float) -> str:
    return HEADER + textwrap.dedent(f'''
    @T.prim_func
    def main(A: T.Buffer((32, 64), "float32"), C: T.Buffer((32, 64), "float32")):
        T.device_entry()
        bx = T.cta_id([1])
        A_s = T.alloc_shared((32, 64), "float32")
        t = T.alloc_local((32, 64), "float32")
        T.tile.copy(A_s, A[0:32, 0:64])
        T.tile.sub(t, A_s, T.float32(1.0))
        T.tile.mul(t, t, T.float32({scale!r}))
        T.tile.exp(t, t)
        T.tile.copy(C[0:32, 0:64], t)
    ''')


@pytest.mark.parametrize("scale, folded", [(0.25, True), (-0.25, False)])
def test_approx_exp_takes_a_positive_scale_into_its_init(scale, folded):
    """With the target's approx_exp, `t = t * c; t = exp(t)` is one approximate exp whose init carries c (the LLK
    computes exp(x * c) in the same instructions): no multiply. A negative c is not folded (the LLK's clamp raises x
    to -88.5 / c, which only bounds x * c from below when c > 0): the multiply stays, the exp's scale is 1. Both
    verify on the emulator, which computes the LLK's algorithm, within the tolerance precision.py derives for it."""
    text = _exp_of_scaled(scale)
    target = TargetConfig(approx_exp=True)
    result = compile_source(text, filename="k.py", target=target)
    compute = result.artifacts["compute.cpp"].decode()
    c_bits = f"{struct.unpack('<I', struct.pack('<f', scale))[0]:#010x}u"
    assert ("mul_unary_tile(" not in compute) == folded
    assert f"exp_tile_init<true, {c_bits if folded else '0x3f800000u'}>()" in compute
    assert "exp_tile<true>(" in compute and "exp_tile_init()" not in compute
    outcome = emulate(result.artifacts, target=target, source=text, filename="k.py", seed=2)
    assert outcome.passed, outcome.verification.render()


SOFTMAX_HEAD = '''
@T.prim_func
def main(A: T.Buffer((64, 128), "bfloat16"), C: T.Buffer((64, 128), "float32")):
    T.device_entry()
    bx = T.cta_id([2])
    A_s = T.alloc_shared((32, 128), "bfloat16")
    x = T.alloc_local((32, 128), "float32")
    m = T.alloc_local((32, 1), "float32")
    T.tile.copy(A_s, A[bx * 32:bx * 32 + 32, 0:128])
    T.tile.copy(x, A_s)
    T.tile.max(m, x, [-1], False)
    T.tile.sub(x, x, m)
    T.tile.exp(x, x)
    T.tile.copy(C[bx * 32:bx * 32 + 32, 0:128], x)
'''


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_forwarded_row_kernel_matches_numpy(arch):
    """The softmax head with its copy forwarded (TTForwardCopies: the FPU's broadcast subtract reading the bf16
    staging tiles) runs on the emulator and matches NumPy."""
    source = HEADER + textwrap.dedent(SOFTMAX_HEAD)
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
