"""Small IR for one pass at a time: parse a kernel, run the pipeline up to the pass under test, run it, and
compare with the expected IR structurally (tvm_ffi.structural_equal, as TVM's tests/python/tir-transform do)."""
from __future__ import annotations

import textwrap

import tvm
import tvm_ffi
from tvm import tirx

from compiler.errors import CompileError
from compiler.frontend import parse, prepare
from compiler.ir import stmts_of
from compiler.pipeline import tt_passes
from schemas.target import TargetConfig
from compiler import attrs

HEADER = "from tvm.script import tirx as T\n\n\n"


def kernel(body: str):
    text = HEADER + textwrap.dedent(body)
    func = attrs.put(parse(prepare(text, "k.py")), {attrs.SOURCE_FILE: "k.py", attrs.ENTRY: "main"})
    return tvm.IRModule({"main": func})


def _run(p, mod):
    """A pass on a module; a diagnostic comes back as the CompileError it is (passes run through TVM's FFI)."""
    try:
        with tvm.transform.PassContext(opt_level=0):
            return p(mod)
    except Exception as e:
        error = CompileError.recover(e)
        if error is None:
            raise
        raise error from None


AS_WRITTEN = TargetConfig(blocking="as_written")   # a pass's tests see the kernel's own blocks


def run_until(mod, name: str, config: TargetConfig | None = None):
    """(the module right before pass `name`, that pass); the kernel keeps its own blocks unless `config` says."""
    for p in tt_passes(config or AS_WRITTEN):
        if p.info.name == name:
            return mod, p
        mod = _run(p, mod)
    raise KeyError(name)


def apply(mod, name: str, config: TargetConfig | None = None):
    before, p = run_until(mod, name, config)
    return before, _run(p, before)


def block_body(func) -> list:
    """The statements inside the persistent per-core loop (after TTGridToPersistent)."""
    loop = next(s for s in stmts_of(func.body) if isinstance(s, tirx.For))
    return stmts_of(loop.body)


def assert_equal(actual, expected):
    """Structural equality of IR (free variables matched by position), with the first mismatch in the message."""
    if not tvm_ffi.structural_equal(actual, expected, map_free_vars=True):
        raise AssertionError(f"IR differs at {tvm_ffi.get_first_structural_mismatch(actual, expected, True)}\n"
                             f"--- actual\n{actual}\n--- expected\n{expected}")
