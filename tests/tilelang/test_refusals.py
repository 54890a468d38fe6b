"""What kind of refusal a diagnostic is, carried by the diagnostic itself (CompileError.refusal, set where the
construct is refused): not expressible on Tenstorrent (thread indices, CUDA-only intrinsics, CUDA host code while
the kernel is built) or expressible and not lowered yet. bench/tilelang_sweep.py reports refusals by it."""
from __future__ import annotations

import pytest

from compiler.errors import CompileError, Refusal, SourceLocation
from schemas.target import TargetConfig

from .test_frontend import error_of, line_of, src
from .test_cb_sharing import ALL_LIVE

THREAD_INDEX = src('''
    @T.prim_func
    def main(A: T.Tensor((64,), "float32")):
        with T.Kernel(2, threads=32) as bx:
            tx = T.get_thread_binding(0)
            A[bx * 32 + tx] = 1.0
''')


def test_a_thread_index_is_not_expressible():
    e = error_of(THREAD_INDEX)
    assert e.location.line == line_of(THREAD_INDEX, "T.get_thread_binding")
    assert e.refusal is not None and not e.refusal.expressible
    assert "thread and warp indices" in e.refusal.reason
    assert str(e.refusal).startswith("not expressible on Tenstorrent: ")


def factory(before: str, dtype: str = '"float32"') -> str:
    return src(f'''
        {before}

        def build(M):
            dtype = {dtype}
            @T.prim_func
            def kernel(A: T.Tensor((M, M), dtype)):
                with T.Kernel(1):
                    pass
            return kernel
    ''')


@pytest.mark.parametrize("before,dtype", [
    # a CUDA device query while the kernel is built (attention_sink's backward examples)
    ("import torch", "torch.float16 if torch.cuda.get_device_capability()[0] >= 9 else torch.float16"),
    # CUDA tensors made while the kernel is built, behind `import torch.backends` (gemm_streamk)
    ("import torch.backends", 'str(torch.rand(4, device="cuda").dtype)'),
    # the tensor-core MMA emitter (gemm/example_gemm_intrinsics.py)
    ("from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter",
     "TensorCoreIntrinEmitter(a_dtype='float16')"),
])
def test_cuda_host_code_and_cuda_intrinsics_are_not_expressible(before, dtype):
    e = error_of(factory(before, dtype), entry="build", params={"M": 32})
    assert e.refusal is not None and not e.refusal.expressible, e.render()
    assert e.location is not None and e.location.file == "k.py"


def test_import_of_a_submodule_binds_the_root_module_s_names():
    e = error_of(factory("import torch.backends", 'str(torch.rand(4, device="cuda").dtype)'), entry="build",
                 params={"M": 32})
    assert "`torch.rand`" in e.message, e.message


def test_host_code_that_needs_no_gpu_says_no_kind():
    # `torch.float16` is a dtype name: nothing CUDA about it, and nothing tilefarm could not take either
    e = error_of(factory("import torch", "torch.float16"), entry="build", params={"M": 32})
    assert "`torch.float16`" in e.message and e.refusal is None


def test_an_element_loop_outside_t_parallel_is_not_lowered_yet():
    source = src('''
        @T.prim_func
        def main(A: T.Tensor((32, 32), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_fragment((32, 32), "float32")
                for k in T.vectorized(4):
                    a[0, k] = 1.0
                T.copy(a, A)
    ''')
    e = error_of(source)
    assert e.refusal is not None and e.refusal.expressible
    assert str(e.refusal).startswith("expressible, not yet lowered: ")


def test_more_tile_values_than_circular_buffers_is_not_lowered_yet_and_keeps_its_kind_when_located():
    e = error_of(ALL_LIVE, target=TargetConfig(arch="wormhole_b0"))   # 34 values live at once
    assert e.location is not None and e.location.file == "k.py"    # relocated to the user's line
    assert e.refusal is not None and e.refusal.expressible and "32 circular buffers" in e.refusal.reason


def test_a_relocated_diagnostic_keeps_everything_but_its_location():
    e = CompileError("m", stage="parse", location=SourceLocation("gen.py", 3), hint="h", subject="A",
                     refusal=Refusal.not_expressible("r"))
    moved = e.at(SourceLocation("k.py", 9, 2))
    assert (moved.message, moved.stage, moved.hint, moved.subject, moved.refusal) == ("m", "parse", "h", "A",
                                                                                      e.refusal)
    assert moved.location == SourceLocation("k.py", 9, 2)


def test_a_dram_region_written_from_between_tile_columns_is_not_lowered_yet():
    # read from such a column, a block is built element by element (read_window: test_runtime_bounds); written, not
    source = src('''
        @T.prim_func
        def main(X: T.Tensor((32, 32), "float32"), Y: T.Tensor((32, 64), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_shared((32, 32), "float32")
                T.copy(X, x)
                T.copy(x, Y[0:32, 16:48])
    ''')
    e = error_of(source)
    assert e.location.line == line_of(source, "T.copy(x, Y[0:32, 16:48])")
    assert "region start `16` is not a multiple of 32" in e.message, e.message
    assert e.refusal is not None and e.refusal.expressible
