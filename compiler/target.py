"""The device table: one place, data not code. Numbers from the TT-Metalium 0.81.1 reference sheet (§5)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from schemas.target import TargetConfig

from .errors import CompileError


@dataclass(frozen=True)
class DeviceSpec:
    arch: str
    display_name: str
    core_grid: tuple[int, int]          # (x, y) worker grid available to kernels
    l1_bytes: int                       # L1 per Tensix core
    l1_reserved_bytes: int              # firmware, kernel binaries, allocator's l1_small: not available to CBs
    dram_banks: int
    num_cbs: int
    dram_alignment: int
    supported_by_sdk: bool              # Grayskull was removed from tt-metal; we still lower for it

    @property
    def num_cores(self) -> int:
        return self.core_grid[0] * self.core_grid[1]

    @property
    def l1_available_for_cbs(self) -> int:
        return self.l1_bytes - self.l1_reserved_bytes


DEVICES: dict[str, DeviceSpec] = {
    "wormhole_b0": DeviceSpec("wormhole_b0", "Wormhole B0 (n150)", (8, 8), 1_499_136, 196_608, 12, 32, 32, True),
    "blackhole": DeviceSpec("blackhole", "Blackhole (p150, unharvested)", (13, 10), 1_572_864, 196_608, 8, 64, 64, True),
    "grayskull": DeviceSpec("grayskull", "Grayskull (e150)", (12, 9), 1_048_576, 196_608, 8, 32, 32, False),
}

TILE = 32                   # tile height and width
FACE = 16                   # tiles are four 16x16 faces
MAX_RUNTIME_ARGS = 341      # per core per kernel, unique + common


@dataclass(frozen=True)
class DataFormatSpec:
    name: str               # tt::DataFormat enumerator
    enum_value: int
    tile_bytes: int
    dtype: str


DATA_FORMATS: dict[str, DataFormatSpec] = {
    "float32": DataFormatSpec("Float32", 0, 4096, "float32"),
    "bfloat16": DataFormatSpec("Float16_b", 5, 2048, "bfloat16"),
    "float16": DataFormatSpec("Float16", 1, 2048, "float16"),
}

# integer outputs: compute packs their values as floats, the writer converts each page before writing it (int32 in
# place, fp32_pages_to_int32; int8 / uint8 to the page's first 1024 bytes, pages_to_bytes); their DRAM pages' format
CONVERTED_OUTPUTS: dict[str, DataFormatSpec] = {
    "int32": DataFormatSpec("Int32", 8, 4096, "int32"),
    "int8": DataFormatSpec("Int8", 14, TILE * TILE, "int8"),
    "uint8": DataFormatSpec("UInt8", 30, TILE * TILE, "uint8"),
}
BYTE_OUTPUTS = tuple(d for d, f in CONVERTED_OUTPUTS.items() if f.tile_bytes == TILE * TILE)   # int8, uint8


def dst_capacity(fp32_accumulation: bool, full_sync: bool) -> int:
    """Tiles usable per tile_regs_acquire (reference sheet §3.2)."""
    tiles = 16 if full_sync else 8
    return tiles // 2 if fp32_accumulation else tiles


def device_for(config: TargetConfig) -> DeviceSpec:
    return DEVICES[config.arch]


def core_grid_for(config: TargetConfig) -> tuple[int, int]:
    """The worker grid to use: the device's, or a validated override."""
    device = device_for(config)
    if config.core_grid is None:
        return device.core_grid
    gx, gy = config.core_grid
    if gx < 1 or gy < 1 or gx > device.core_grid[0] or gy > device.core_grid[1]:
        raise CompileError(
            f"core grid override {gx}x{gy} does not fit {device.display_name}'s {device.core_grid[0]}x{device.core_grid[1]} grid",
            stage="target",
        )
    return gx, gy


# The timing model's per-arch costs (device_costs.json beside this file: every constant with its source), plus each
# SFPU function's cost from the op registry (the same on every architecture).
DEVICE_COSTS_PATH = Path(__file__).with_name("device_costs.json")


@lru_cache(maxsize=None)
def device_costs(arch: str) -> dict[str, float | list[float]]:
    """The cost constants of `arch` as plain values (the table's `value` fields, then the registry's op costs)."""
    from . import registry  # here, not at the top: the API and the worker's main process read the device table only

    table = json.loads(DEVICE_COSTS_PATH.read_text())
    if arch not in table:
        raise CompileError(f"no timing costs for {arch!r} (have {', '.join(k for k in table if not k.startswith('_'))})",
                           stage="target")
    costs = {name: entry["value"] for name, entry in table[arch].items()}
    for key, cost in registry.COSTS.items():
        if key in costs:
            raise CompileError(f"device_costs.json defines {key!r}, an op cost of the op registry", stage="target")
        costs[key] = cost.value
    return costs
