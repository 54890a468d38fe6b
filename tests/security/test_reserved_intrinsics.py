"""The compiler's own intrinsics (T.tt.*, which IR dumps print and the parser reads back) never come from a kernel:
the allow-list refuses them in the source, and TTCheckKernel refuses a function that carries one anyway (a name
argument of theirs is spelled into the C++ the compiler emits)."""
from __future__ import annotations

import pytest
import tvm

from compiler.errors import CompileError
from compiler.frontend import prepare
from compiler.passes.check_kernel import check_kernel

KERNEL = '''from tvm.script import tirx as T


@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), B: T.Buffer((64, 64), "float32")):
    T.device_entry()
    bx = T.cta_id([2])
    A_s = T.alloc_shared((32, 64), "float32")
    o = T.tt.runtime_arg("x); evil(); //")
    T.tile.copy(A_s, A[bx * 32 + o:bx * 32 + o + 32, 0:64])
    T.tile.copy(B[bx * 32:bx * 32 + 32, 0:64], A_s)
'''
LINE = 9


def test_the_allow_list_refuses_them_at_their_line():
    with pytest.raises(CompileError) as info:
        prepare(KERNEL, "k.py")
    assert info.value.location.line == LINE and "`T.tt`" in info.value.message


def test_check_kernel_refuses_a_function_that_carries_one():
    text = KERNEL.replace("from tvm.script import tirx as T\n", "")
    func = tvm.script.from_source(text, check_well_formed=False)   # past the allow-list
    with pytest.raises(Exception) as info:
        with tvm.transform.PassContext(opt_level=0):
            check_kernel(tvm.IRModule({"main": func}))
    error = CompileError.recover(info.value)
    assert error is not None and "compiler's own intrinsics" in error.message
