"""TTApplyTargetDefaults: resolve the target config into `tt.target` (device numbers + schedule options)."""
from __future__ import annotations

from tvm import tirx

from schemas.target import TargetConfig

from ..ir import get_attr
from ..target import TILE, core_grid_for, device_for


@tirx.transform.prim_func_pass(opt_level=0, name="TTApplyTargetDefaults")
class ApplyTargetDefaults:
    def __init__(self, config: TargetConfig):
        self.config = config

    def transform_function(self, func, mod, ctx):
        config = self.config
        device = device_for(config)
        grid = core_grid_for(config)
        buffers = get_attr(func, "tt.buffers")
        fp32 = config.fp32_accumulation
        if fp32 is None:  # accumulate in fp32 whenever a computed tile is fp32
            fp32 = any(b["role"] == "compute" and b["dtype"] == "float32" for b in buffers.values())
        return func.with_attr("tt.target", {
            "arch": device.arch,
            "core_grid": list(grid),
            "num_cores": grid[0] * grid[1],
            "l1_bytes": device.l1_bytes,
            "l1_available_for_cbs": device.l1_available_for_cbs,
            "dram_banks": device.dram_banks,
            "num_cbs": device.num_cbs,
            "dram_alignment": device.dram_alignment,
            "partition": config.partition,
            "tile_order": "row_major",
            "dram_layout": "interleaved",
            "tile_shape": [TILE, TILE],
            "cb_depth": config.cb_depth,
            "math_fidelity": config.math_fidelity,
            "fp32_accumulation": bool(fp32),
        })
