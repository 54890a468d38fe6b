"""Target configuration shared by the CLI, the API and the workers."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Arch = Literal["wormhole_b0", "blackhole", "grayskull"]
PartitionPolicy = Literal["contiguous", "strided", "block", "zigzag"]
MathFidelity = Literal["LoFi", "HiFi2", "HiFi3", "HiFi4"]
Blocking = Literal["auto", "as_written"]
IntermediateDtype = Literal["declared", "bfloat16"]


class TargetConfig(BaseModel):
    """Everything about the device and schedule that changes the generated code."""

    model_config = ConfigDict(extra="forbid")

    arch: Arch = "wormhole_b0"
    core_grid: tuple[int, int] | None = Field(
        default=None, description="Override of the worker core grid as (x, y); must fit in the device's grid."
    )
    partition: PartitionPolicy | None = Field(
        default=None, description="How blocks are dealt to cores; default: chosen with the blocking (`block` when cores "
                                  "share reads along rows or columns, `zigzag` when a grid index bounds a loop's trip "
                                  "count (causal attention: block i with block n-1-i on one core), else `contiguous`).")
    cb_depth: int | None = Field(
        default=None, ge=1, le=8, description="Buffered blocks per input circular buffer (2 = double buffering); "
                                              "default: 2, or TileLang's num_stages, lowered where L1 is short.")
    math_fidelity: MathFidelity | None = Field(
        default=None, description="Matrix-engine fidelity; default: ttnn's matmul default for the operands' dtype "
                                  "(HiFi2 for 16-bit operands, HiFi3 on Wormhole / HiFi4 on Blackhole when both are "
                                  "float32), HiFi4 for kernels without a matmul.")
    blocking: Blocking = Field(
        default="auto", description="auto: block shapes, core grid and partition chosen from the problem size and L1 "
                                    "(`tilefarm compile --explain` says why); as_written: the kernel's own blocks.")
    fp32_accumulation: bool | None = Field(
        default=None, description="fp32 DST accumulation; default: on when any tile of the kernel is float32."
    )
    approx_exp: bool = Field(
        default=False, description="exp / exp2 on the SFPU with the LLK's approximate exp (Schraudolph's method, "
                                   "exp_tile<true>: ~6x fewer SFPU instructions, each result within 3.13% of exp, "
                                   "as ttnn's SDPA runs by default) instead of the precise one; a constant scale "
                                   "multiplying the exponent is folded into its init. Verification tolerances count "
                                   "its error.")
    intermediate_dtype: IntermediateDtype = Field(
        default="declared", description="declared: every value in L1 in the dtype the kernel gives it. bfloat16: a "
                                        "float32 fragment that a matmul writes whole and no loop carries from one "
                                        "iteration to the next (attention's scores S, what is computed from them in "
                                        "place) is held in bfloat16 tiles in L1, as ttnn's SDPA holds S and P (its "
                                        "default streaming kernel and STANDARD recipe): half its L1 bytes and its "
                                        "unpacks; accumulators (O, the row max and sum) and outputs keep their dtype, "
                                        "but a row sum of such a value goes through a bfloat16 partial per step (the "
                                        "packer's L1 accumulation, as ttnn's SDPA sums its exponentials). "
                                        "Verification tolerances count the roundings.")
    l1_shard: list[str] = Field(
        default_factory=list, description="Tensors (by the kernel's names) kept block-sharded in L1 instead of DRAM: "
                                          "each core's shard is the block it computes (an output, packed in place) "
                                          "or reads once (an input); needs one whole block per core.")
