"""Pass tests as TVM writes them (tests/python/tir-transform): a `before` function carrying exactly the attributes
the pass reads, the pass alone, and an `expected` function compared with tvm.ir.assert_structural_equal. The
compiler's intrinsics are written `T.tt.<name>(...)` (compiler/ops.py registers the namespace), as the IR prints."""
from __future__ import annotations

import textwrap

import tvm

from compiler import attrs, ops  # noqa: F401 -- ops: T.tt.* in the test modules' TVMScript
from compiler.errors import CompileError
from compiler.frontend import parse, prepare
from compiler.target import DEVICES

HEADER = "from tvm.script import tirx as T\n\n\n"


def kernel(body: str):
    """A user kernel as the frontend parses it (the input of TTCheckKernel)."""
    text = HEADER + textwrap.dedent(body)
    func = attrs.put(parse(prepare(text, "k.py")), {attrs.SOURCE_FILE: "k.py", attrs.ENTRY: "main"})
    return tvm.IRModule({"main": func})


def run(p, before) -> tvm.IRModule:
    """One pass, alone, on a function (as `main`) or a module; a diagnostic comes back as the CompileError it is
    (passes run through TVM's FFI)."""
    mod = before if isinstance(before, tvm.IRModule) else tvm.IRModule({"main": before})
    try:
        with tvm.transform.PassContext(opt_level=0):
            return p(mod)
    except Exception as e:
        error = CompileError.recover(e)
        if error is None:
            raise
        raise error from None


def assert_ir_equal(actual, expected) -> None:
    """Structural equality of IR (free variables matched by position; a function's own name, global_symbol, left
    out), with both sides printed on a mismatch."""
    if isinstance(actual, tvm.tirx.PrimFunc) and isinstance(expected, tvm.tirx.PrimFunc):
        actual, expected = (f.without_attr("global_symbol") for f in (actual, expected))
    try:
        tvm.ir.assert_structural_equal(actual, expected, map_free_vars=True)
    except ValueError as mismatch:
        raise AssertionError(f"{mismatch}\n--- actual\n{actual}\n--- expected\n{expected}") from None


def target_attr(arch: str = "wormhole_b0", **changes) -> dict:
    """A resolved tt.target (as TTChooseBlocks leaves it) for the device `arch`, with `changes`."""
    device = DEVICES[arch]
    value = {"arch": arch, "core_grid": list(device.core_grid), "num_cores": device.num_cores,
             "l1_bytes": device.l1_bytes, "l1_available_for_cbs": device.l1_available_for_cbs,
             "dram_banks": device.dram_banks, "num_cbs": device.num_cbs, "dram_alignment": device.dram_alignment,
             "partition": "contiguous", "tile_order": "row_major", "dram_layout": "interleaved", "tile_shape": [32, 32],
             "cb_depth": 2, "blocking": "as_written", "math_fidelity": "HiFi4", "fp32_accumulation": True,
             "l1_shard": []}
    value.update(changes)
    return value


def with_attrs(func, values: dict):
    """`func` with these tt.* attributes (Attr -> value) added to the ones it has."""
    return attrs.put(func, values)

