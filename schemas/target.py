"""Target configuration shared by the CLI, the API and the workers."""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Arch = Literal["wormhole_b0", "blackhole", "grayskull"]
PartitionPolicy = Literal["contiguous", "strided", "block"]
MathFidelity = Literal["LoFi", "HiFi2", "HiFi3", "HiFi4"]


class TargetConfig(BaseModel):
    """Everything about the device and schedule that changes the generated code."""

    model_config = ConfigDict(extra="forbid")

    arch: Arch = "wormhole_b0"
    core_grid: tuple[int, int] | None = Field(
        default=None, description="Override of the worker core grid as (x, y); must fit in the device's grid."
    )
    partition: PartitionPolicy = "contiguous"
    cb_depth: int = Field(default=2, ge=1, le=8, description="Buffered blocks per circular buffer (2 = double buffering).")
    math_fidelity: MathFidelity = "HiFi4"
    fp32_accumulation: bool | None = Field(
        default=None, description="fp32 DST accumulation; default: on when any accumulator is float32."
    )
