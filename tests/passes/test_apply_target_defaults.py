"""TTApplyTargetDefaults: the target config resolved into tt.target -- the device's numbers, the core grid (the
user's is an upper bound), and the math fidelity ttnn's matmul would pick for the operands' dtypes unless the
user chose one."""
from __future__ import annotations

import pytest

from compiler import attrs
from compiler.errors import CompileError
from compiler.target import DEVICES
from schemas.target import TargetConfig

from .helpers import apply, kernel


def gemm(dtype: str, acc: str = "float32") -> str:
    return f'''
@T.prim_func
def main(A: T.Buffer((64, 64), "{dtype}"), B: T.Buffer((64, 64), "{dtype}"), C: T.Buffer((64, 64), "{acc}")):
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((32, 32), "{dtype}")
    B_s = T.alloc_shared((32, 32), "{dtype}")
    C_l = T.alloc_local((32, 32), "{acc}")
    T.tile.zero(C_l)
    for k in range(2):
        T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
'''


EXP = '''
@T.prim_func
def main(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((32, 32), "float32")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.copy(A_s, A[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])
    T.tile.exp(C_l, A_s)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
'''


def target_of(text: str, config: TargetConfig) -> dict:
    _, after = apply(kernel(text), "TTApplyTargetDefaults", config)
    return attrs.TARGET.get(after["main"])


@pytest.mark.parametrize("source,arch,expected", [
    (gemm("bfloat16"), "wormhole_b0", "HiFi2"),
    (gemm("float16"), "blackhole", "HiFi2"),
    (gemm("float32"), "wormhole_b0", "HiFi3"),     # HiFi4 with fp32 accumulation is inaccurate on Wormhole
    (gemm("float32"), "blackhole", "HiFi4"),
    (EXP, "wormhole_b0", "HiFi4"),                 # no matmul: reductions and products at HiFi4, as ttnn's norms
])
def test_fidelity_follows_ttnns_matmul_for_the_operand_dtypes(source, arch, expected):
    target = target_of(source, TargetConfig(arch=arch))
    assert target["math_fidelity"] == expected and target["math_fidelity_reason"]


def test_the_users_fidelity_wins():
    assert target_of(gemm("float32"), TargetConfig(math_fidelity="LoFi"))["math_fidelity"] == "LoFi"


@pytest.mark.parametrize("arch", ["wormhole_b0", "blackhole"])
def test_the_device_numbers_and_the_grid(arch):
    device = DEVICES[arch]
    target = target_of(gemm("bfloat16"), TargetConfig(arch=arch))
    assert target["core_grid"] == list(device.core_grid) and target["num_cores"] == device.num_cores
    assert target["l1_available_for_cbs"] == device.l1_available_for_cbs and target["dram_banks"] == device.dram_banks
    assert target["partition"] is None and target["cb_depth"] is None   # left to TTChooseBlocks
    smaller = target_of(gemm("bfloat16"), TargetConfig(arch=arch, core_grid=(2, 3)))
    assert smaller["core_grid"] == [2, 3] and smaller["num_cores"] == 6


def test_a_grid_larger_than_the_device_is_refused():
    with pytest.raises(CompileError, match="core grid|core_grid") as refused:
        target_of(gemm("bfloat16"), TargetConfig(arch="wormhole_b0", core_grid=(9, 9)))
    assert "8" in str(refused.value)  # names the device's own grid
