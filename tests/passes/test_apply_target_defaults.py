"""TTApplyTargetDefaults: the target config resolved into tt.target -- the device's numbers, the core grid (the
user's is an upper bound), and the math fidelity ttnn's matmul would pick for the operands' dtypes unless the
user chose one. Reads tt.buffers (an fp32 tile anywhere means an fp32 DST) and the gemm operands' dtypes."""
from __future__ import annotations

import pytest
from tvm.script import tirx as T

from compiler import attrs
from compiler.errors import CompileError
from compiler.passes.apply_target_defaults import ApplyTargetDefaults
from compiler.target import DEVICES
from schemas.target import TargetConfig

from .helpers import assert_ir_equal, run


def gemm(dtype: str, acc: str = "float32"):
    buffers = {"A": {"role": "input", "scope": "global", "shape": [64, 64], "dtype": dtype},
               "B": {"role": "input", "scope": "global", "shape": [64, 64], "dtype": dtype},
               "C": {"role": "output", "scope": "global", "shape": [64, 64], "dtype": acc},
               "A_s": {"role": "staging", "scope": "shared", "shape": [32, 32], "dtype": dtype},
               "B_s": {"role": "staging", "scope": "shared", "shape": [32, 32], "dtype": dtype},
               "C_l": {"role": "compute", "scope": "local", "shape": [32, 32], "dtype": acc}}

    @T.prim_func
    def before(A: T.Buffer((64, 64), dtype), B: T.Buffer((64, 64), dtype), C: T.Buffer((64, 64), acc)):
        T.func_attr({"tt.buffers": buffers})
        T.device_entry()
        by, bx = T.cta_id([2, 2])
        A_s = T.alloc_shared((32, 32), dtype)
        B_s = T.alloc_shared((32, 32), dtype)
        C_l = T.alloc_local((32, 32), acc)
        T.tile.zero(C_l)
        for k in range(2):
            T.tile.copy(A_s, A[by * 32:by * 32 + 32, k * 32:k * 32 + 32])
            T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 32:bx * 32 + 32])
            T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
        T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)

    return before


@T.prim_func
def EXP(A: T.Buffer((64, 64), "bfloat16"), C: T.Buffer((64, 64), "bfloat16")):
    T.func_attr({"tt.buffers": {"A": {"role": "input", "scope": "global", "shape": [64, 64], "dtype": "bfloat16"},
                                "C": {"role": "output", "scope": "global", "shape": [64, 64], "dtype": "bfloat16"},
                                "A_s": {"role": "staging", "scope": "shared", "shape": [32, 32], "dtype": "bfloat16"},
                                "C_l": {"role": "compute", "scope": "local", "shape": [32, 32], "dtype": "bfloat16"}}})
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((32, 32), "bfloat16")
    C_l = T.alloc_local((32, 32), "bfloat16")
    T.tile.copy(A_s, A[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])
    T.tile.exp(C_l, A_s)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)


def target_of(before, config: TargetConfig) -> dict:
    return attrs.TARGET.get(run(ApplyTargetDefaults(config), before)["main"])


def test_the_target_attribute_of_a_bf16_gemm_on_wormhole():
    before = gemm("bfloat16")
    expected = before.with_attr("tt.target", {
        "arch": "wormhole_b0", "core_grid": [8, 8], "num_cores": 64, "l1_bytes": 1_499_136,
        "l1_available_for_cbs": 1_302_528, "dram_banks": 12, "num_cbs": 32, "dram_alignment": 32,
        "partition": None, "tile_order": "row_major", "dram_layout": "interleaved", "tile_shape": [32, 32],
        "cb_depth": None, "blocking": "auto", "math_fidelity": "HiFi2",
        "math_fidelity_reason": "ttnn's matmul default for bfloat16 operands", "fp32_accumulation": True,
        "approx_exp": False, "intermediate_dtype": "declared", "l1_shard": []})
    assert_ir_equal(run(ApplyTargetDefaults(TargetConfig()), before)["main"], expected)


@pytest.mark.parametrize("before,arch,expected", [
    (gemm("bfloat16"), "wormhole_b0", "HiFi2"),
    (gemm("float16"), "blackhole", "HiFi2"),
    (gemm("float32"), "wormhole_b0", "HiFi3"),     # HiFi4 with fp32 accumulation is inaccurate on Wormhole
    (gemm("float32"), "blackhole", "HiFi4"),
    (EXP, "wormhole_b0", "HiFi4"),                 # no matmul: reductions and products at HiFi4, as ttnn's norms
], ids=["bf16-wh", "fp16-bh", "fp32-wh", "fp32-bh", "no-matmul"])
def test_fidelity_follows_ttnns_matmul_for_the_operand_dtypes(before, arch, expected):
    target = target_of(before, TargetConfig(arch=arch))
    assert target["math_fidelity"] == expected and target["math_fidelity_reason"]


def test_the_users_fidelity_wins():
    assert target_of(gemm("float32"), TargetConfig(math_fidelity="LoFi"))["math_fidelity"] == "LoFi"


def test_an_fp32_tile_anywhere_means_an_fp32_dst():
    assert target_of(gemm("bfloat16", acc="bfloat16"), TargetConfig())["fp32_accumulation"] is False
    assert target_of(gemm("bfloat16", acc="float32"), TargetConfig())["fp32_accumulation"] is True
    assert target_of(gemm("bfloat16", acc="float32"), TargetConfig(fp32_accumulation=False))["fp32_accumulation"] \
        is False


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
