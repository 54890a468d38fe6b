"""The TT pass pipeline, top to bottom (one pass per file in passes/), in five named phases.

Metadata travels as PrimFunc attributes: tt.grid, tt.buffers, tt.target, tt.blocking, tt.layout_desc, tt.core_grid,
tt.core_ranges, tt.work_partition, tt.cb_config, tt.compute_config, then per kernel tt.kernel_role,
tt.runtime_args, tt.compile_time_args, tt.verification.
"""
from __future__ import annotations

import tvm

from schemas.target import TargetConfig

from .passes.apply_target_defaults import ApplyTargetDefaults
from .passes.check_kernel import check_kernel
from .passes.choose_blocks import choose_blocks
from .passes.serialize_accumulation import serialize_accumulation
from .passes.exchange_partials import exchange_partials
from .passes.forward_copies import forward_copies
from .passes.grid_to_persistent import grid_to_persistent
from .passes.configure_unpackers import configure_unpackers
from .passes.hoist_inits import hoist_inits
from .passes.interleave_groups import interleave_groups
from .passes.infer_layout import infer_layout
from .passes.lower_index_masks import lower_index_masks
from .passes.lower_to_circular_buffers import lower_to_circular_buffers
from .passes.pad_tiles import pad_tiles
from .passes.partition_work import partition_work
from .passes.recompute_vector_ops import recompute_vector_ops
from .passes.share_circular_buffers import share_circular_buffers
from .passes.share_reads import share_reads
from .passes.split_kernels import split_kernels
from .passes.split_rows import split_rows
from .passes.stream_reads import stream_reads
from .passes.stagger_reads import stagger_reads
from .passes.stream_variance import stream_variance
from .passes.tensorize import tensorize
from .passes.verify_program import verify_program


def phases(config: TargetConfig) -> dict[str, list]:
    """The pipeline in named phases (as TileLang's LowerAndLegalize / OptimizeForTarget): IR dumps and tests can
    stop at a phase boundary, where the IR has a well-defined shape."""
    return {
        # the kernel as written, checked and re-tiled for the target: one tile-level function with its tiles laid out
        "Legalize": [
            check_kernel,                  # shapes, dtypes, gemm rules, grid coverage -> located errors
            serialize_accumulation,        # blocks adding into the same output tiles: one core each, in order
            ApplyTargetDefaults(config),   # tt.target: device numbers, schedule options, math fidelity
            choose_blocks,                 # block shapes, core grid, partition from the problem: the kernel re-tiled
            split_rows,                    # fewer row blocks than half the cores: each row's columns on 2^k cores
            stream_variance,               # one row block a core: the variance about the first tile's mean, streamed
            infer_layout,                  # tt.layout_desc: DRAM interleaved tiles, formats, padding
        ],
        # its blocks dealt to cores: a persistent per-core loop
        "Distribute": [
            partition_work,                # blocks -> cores (contiguous / strided / block / zigzag)
            grid_to_persistent,            # T.cta_id -> per-core loop over (start, count, stride...)
        ],
        # data movement lowered: circular buffers and NoC page reads/writes (tile ops still whole-tile)
        "LowerDataMovement": [
            lower_to_circular_buffers,     # staging tiles -> CBs; DRAM copies -> NoC page reads/writes
            share_reads,                   # a block several cores read at the same step: read once, multicast
            exchange_partials,             # a split row's cores swap their partial row reductions pairwise
            stagger_reads,                 # one row block a core: the cores read their rows group after group
            lower_index_masks,             # index masks (causal, bounds) -> tiles of a host-generated table
            pad_tiles,                     # zero-fill reads / drop writes of pages outside the buffer
        ],
        # compute lowered: DST windows of FPU/SFPU calls
        "LowerCompute": [
            forward_copies,                # ops read a whole copy's source; a copy nothing reads is dropped
            recompute_vector_ops,          # a float32 block = staged block op vector: recomputed by its readers
            tensorize,                     # tile ops -> DST windows of FPU/SFPU calls; values between them in CBs
            interleave_groups,             # a group loop reading the one before's groups: one loop, in step
            hoist_inits,                   # engine inits out of loops, dropped where the engine is set already
            configure_unpackers,           # srcA / srcB reconfigured where an op reads a CB of another format
            stream_reads,                  # waits at first use; a block's first pass starts on its first tiles
        ],
        # three kernels for the three RISC groups, checked against the device's limits
        "SplitKernels": [
            split_kernels,                 # reader / compute / writer; input streams balanced over the two RISCs
            share_circular_buffers,        # a full CB table: values never live together take turns on one index
            verify_program,                # L1, CBs, runtime args, coverage, CB balance
        ],
    }


def tt_passes(config: TargetConfig) -> list:
    """Every pass, in order."""
    return [p for passes in phases(config).values() for p in passes]


def phase(name: str, config: TargetConfig) -> tvm.transform.Pass:
    """One phase as a pass (a Sequential named after it)."""
    return tvm.transform.Sequential(phases(config)[name], name=name)


def optimize_for_target_tt(mod: tvm.IRModule, config: TargetConfig, instruments=()) -> tvm.IRModule:
    with tvm.transform.PassContext(opt_level=0, instruments=list(instruments)):
        return tvm.transform.Sequential([phase(name, config) for name in phases(config)],
                                        name="OptimizeForTargetTT")(mod)
