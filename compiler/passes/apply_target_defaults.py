"""TTApplyTargetDefaults: resolve the target config into `tt.target` (device numbers + schedule options).

Math fidelity, when the user leaves it out, follows ttnn 0.81.1's matmul (matmul_device_operation.cpp): HiFi2 for
16-bit operands; when both operands are float32, HiFi3 on Wormhole (HiFi4 with fp32 accumulation is inaccurate
there, tt-metal#38306) and HiFi4 elsewhere. A kernel without a matmul keeps HiFi4 (its FPU work is reductions and
element-wise products, which ttnn's normalisation ops run at HiFi4). The user's choice always wins.
Partition, CB depth and blocking are resolved with the blocking (TTChooseBlocks).
"""
from __future__ import annotations

import tvm_ffi
from tvm import tirx

from schemas.target import TargetConfig

from ..ir import op_name, region_of
from ..target import TILE, core_grid_for, device_for
from .. import attrs, registry
from ..errors import CompileError


def int32_ops(func) -> list[str]:
    """The tile ops of the kernel that compute on Int32 (the op registry's `integer` ops), in body order."""
    found: list[str] = []

    def visit(call):
        name = op_name(call)
        if name in registry.TILE_OPS and registry.TILE_OPS[name].integer and name not in found:
            found.append(name)

    tvm_ffi.structural_walk(func.body, (tirx.TilePrimitiveCall, visit), order="pre")
    return found


def default_fidelity(func, arch: str) -> tuple[str, str]:
    """(fidelity, why) from the dtypes of the matmul operands."""
    operand_dtypes = []
    integer = []
    declared = attrs.DECLARED_DTYPES.get(func, {}) or {}

    def visit(call):
        if op_name(call) == "gemm":
            operand_dtypes.append(tuple(region_of(call.args[i]).dtype for i in (1, 2)))
            integer.append(declared.get(region_of(call.args[0]).name, "").startswith(("int", "uint")))
    tvm_ffi.structural_walk(func.body, (tirx.TilePrimitiveCall, visit), order="pre")
    if not operand_dtypes:
        return "HiFi4", "no matmul: HiFi4 for reductions and element-wise products"
    if any(integer):
        # int8 x int8 into int32 (W8A8): the operands are bfloat16 holding the integers; every fidelity phase is
        # needed for every product to be exact (LoFi keeps 5 of srcA's and 7 of srcB's significant bits)
        return "HiFi4", "integer operands into an int32 accumulator: HiFi4 keeps every product exact"
    if all(a == b == "float32" for a, b in operand_dtypes):
        if arch == "wormhole_b0":
            return "HiFi3", "ttnn's matmul default for float32 operands on Wormhole (HiFi4 with fp32 accumulation " \
                            "is inaccurate there)"
        return "HiFi4", "ttnn's matmul default for float32 operands"
    dtypes = sorted({d for pair in operand_dtypes for d in pair})
    return "HiFi2", f"ttnn's matmul default for {'/'.join(dtypes)} operands"


@tirx.transform.prim_func_pass(opt_level=0, name="TTApplyTargetDefaults")
class ApplyTargetDefaults:
    def __init__(self, config: TargetConfig):
        self.config = config

    def transform_function(self, func, mod, ctx):
        config = self.config
        device = device_for(config)
        grid = core_grid_for(config)
        buffers = attrs.BUFFERS.get(func)
        fp32 = config.fp32_accumulation
        integer_ops = int32_ops(func)
        if fp32 is None:  # fp32 DST whenever an fp32 tile passes through it (computed, or staged and copied out):
            # a 16-bit DST would round an fp32 copy to bfloat16; Int32 data (bitwise operators) needs all 32 bits
            fp32 = any(b["dtype"] == "float32" for b in buffers.values()) or bool(integer_ops)
        elif not fp32 and integer_ops:
            raise CompileError(f"T.tile.{integer_ops[0]} computes on Int32 in DST, which needs a 32-bit DST; the "
                               "target sets fp32_accumulation off", stage="target",
                               hint="leave fp32_accumulation unset (or true) for kernels with bitwise operators")
        if config.math_fidelity is not None:
            fidelity, why = config.math_fidelity, "the target's math_fidelity"
        else:
            fidelity, why = default_fidelity(func, device.arch)
        return attrs.TARGET.on(func, {
            "arch": device.arch,
            "core_grid": list(grid),
            "num_cores": grid[0] * grid[1],
            "l1_bytes": device.l1_bytes,
            "l1_available_for_cbs": device.l1_available_for_cbs,
            "dram_banks": device.dram_banks,
            "num_cbs": device.num_cbs,
            "dram_alignment": device.dram_alignment,
            "partition": config.partition,          # None: chosen by TTChooseBlocks
            "tile_order": "row_major",
            "dram_layout": "interleaved",
            "tile_shape": [TILE, TILE],
            "cb_depth": config.cb_depth,            # None: chosen by TTChooseBlocks
            "blocking": config.blocking,
            "math_fidelity": fidelity,
            "math_fidelity_reason": why,
            "fp32_accumulation": bool(fp32),
            "approx_exp": config.approx_exp,
            "intermediate_dtype": config.intermediate_dtype,
            "l1_shard": list(config.l1_shard),
        })
