"""tt.plan.json: the runtime plan of one compiled kernel. `PLAN_JSON_SCHEMA` is published as schemas/tt_plan.schema.json."""
from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from .target import Arch, Blocking, IntermediateDtype, MathFidelity, PartitionPolicy


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # standard JSON: infinities are "inf" strings


# Every string the host program (main.cpp) is generated from is one of these: a plan that comes back from the
# sandbox is untrusted, and main.cpp is rendered from it on the trusted side (workers/sandbox/answers.py), so no
# field may carry C++ (a name is an identifier; anything else is from a closed set or kept out of the code).
Identifier = Annotated[str, StringConstraints(pattern=r"^[^\W\d]\w{0,127}$")]
OneLine = Annotated[str, StringConstraints(pattern=r"^[^\x00-\x1f\x7f\\]{0,255}$")]  # in a // comment: no newline, no \
# Int32: int32 outputs; Int8 / UInt8: int8 / uint8 outputs, 1024-byte pages (the writer converts both)
DataFormat = Literal["Float32", "Float16_b", "Float16", "Int32", "Int8", "UInt8"]
Fidelity = MathFidelity


class CompilerInfo(_Strict):
    name: Literal["tilefarm"]
    version: OneLine


class PlanTarget(_Strict):
    """The resolved target: the plan's `target`, and the compiler's tt.target attribute (compiler/attrs.py: the same
    type, with partition and cb_depth open until TTChooseBlocks settles them)."""
    arch: Arch
    core_grid: list[int] = Field(min_length=2, max_length=2)
    num_cores: int = Field(ge=1)
    l1_bytes: int
    l1_available_for_cbs: int
    dram_banks: int
    num_cbs: int
    dram_alignment: int
    partition: PartitionPolicy
    tile_order: Literal["row_major"]
    dram_layout: Literal["interleaved"]
    tile_shape: list[int]
    cb_depth: int = Field(ge=1)
    blocking: Blocking
    math_fidelity: Fidelity
    fp32_accumulation: bool
    approx_exp: bool = Field(default=False, description="exp lowered to the LLK's approximate exp")
    intermediate_dtype: IntermediateDtype = Field(
        default="declared", description="bfloat16: float32 matmul outputs no loop carries held in bfloat16 in L1")
    l1_shard: list[str] = Field(default_factory=list, description="tensors kept block-sharded in L1")


class Schedule(_Strict):
    blocking: Literal["auto", "as_written"]
    changed: bool = Field(description="the compiler chose other blocks than the kernel's own")
    explain: list[str] = Field(description="the blocks, core grid, partition and math fidelity chosen, and why")


class Grid(_Strict):
    vars: list[Identifier]
    extents: list[int] = Field(min_length=1, max_length=3)
    triangular_axis: int | None = Field(default=None, description="the grid axis whose index bounds a loop's trip "
                                        "count (causal attention's query blocks): what the zigzag partition pairs")
    zigzag_sets: int = Field(default=1, ge=1, description="a zigzag partition's cores per set: each aligned group "
                             "of this many blocks (equal trip counts) is dealt one block per core of a set of "
                             "neighbouring cores, so their reads are shared")


class CoreWork(_Strict):
    core: list[int] = Field(min_length=2, max_length=2, description="logical (x, y)")
    start: int = Field(ge=0)
    count: int = Field(ge=0)
    stride: int
    row_len: int = Field(ge=1)
    row_stride: int
    blocks: list[int] = Field(description="the blocks this core computes, in order")


class WorkPartition(_Strict):
    policy: PartitionPolicy
    blocks: int = Field(ge=1)
    grid: list[int]
    num_cores: int = Field(ge=1)
    work_args: list[Identifier]
    cores: list[CoreWork]


class MaskGenerator(_Strict):
    kind: Literal["affine_mask"]
    row_coef: int
    col_coef: int
    first_offset: int
    entries: int
    true_value: Union[float, Literal["inf", "-inf"]]
    false_value: Union[float, Literal["inf", "-inf"]]


class ValueGenerator(_Strict):
    """An index value table: entry e holds the tile row_coef * r + col_coef * c + offsets[e]."""
    kind: Literal["affine_value"]
    row_coef: int
    col_coef: int
    offsets: list[int]
    entries: int


class ShardPlan(_Strict):
    cores: list[list[int]] = Field(min_length=2, max_length=2, description="the shard grid: first and last core "
                                   "(logical x, y); shard (i, j) of the tensor's tiles is on core (x0 + j, y0 + i)")
    shard_shape: list[int] = Field(min_length=2, max_length=2, description="elements per shard (rows, columns)")
    shard_tiles: list[int] = Field(min_length=2, max_length=2)


class BufferPlan(_Strict):
    name: Identifier
    role: Literal["input", "output", "unused", "constant"]
    shape: list[int] = Field(min_length=1, description="the user's shape (what .npy inputs and outputs have)")
    tile_axes: list[int] = Field(min_length=2, max_length=2, description=(
        "the axes of `shape` that are the rows and columns of the tiles (-1: a unit axis of a vector); the other "
        "axes are batch axes, outermost first: page = (batch * tile_rows + tile_row) * tile_cols + tile_col"))
    generator: Annotated[Union[MaskGenerator, ValueGenerator], Field(discriminator="kind")] | None = Field(default=None, description="constant buffers: how the host fills them")
    accumulate: bool = Field(default=False, description="an output the kernel adds into (TileLang's T.atomic_add): "
                             "its starting contents are given like an input's and the result is the sum")
    row_offsets: int | None = Field(default=None, description=(
        "an integer tensor whose elements the kernel adds to row positions of a matrix with this many rows (a "
        "variable-length batch's sequence offsets, cu_seqlens): random inputs are non-decreasing from 0 to at most it"))
    replicated_rows: bool = Field(default=False, description=(
        "a row vector stored with its values in every row of its tiles, not zero padded below row 0 (a vector the "
        "kernel reads only as a broadcast down the rows: each tile is its broadcast)"))
    dtype: Literal["float32", "bfloat16", "float16"]
    declared_dtype: Literal["int32", "int16", "int64", "uint16", "uint32", "int8", "uint8", "int4", "uint4",
                            "float8_e4m3", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
                            "float8_e8m0fnu", "float4_e2m1fn", "bool"] | None = Field(
        default=None, description="a low-bit tensor as the kernel declares it, stored as `dtype` (bfloat16 holds each "
                                  "of its values exactly); inputs are values of it")
    data_format: DataFormat
    layout: Literal["interleaved", "block_sharded"]
    memory: Literal["DRAM", "L1"]
    shard: ShardPlan | None = Field(default=None, description="block_sharded: which cores hold which shard")
    padded_shape: list[int]
    tiles: list[int]
    dram_pages: int
    page_bytes: int
    size_bytes: int


class CircularBufferPlan(_Strict):
    index: int = Field(ge=0, le=63)
    name: Identifier
    buffer: Identifier
    role: Literal["input", "output", "intermediate", "values", "scratch"] = Field(description=(
        "values: integers the reader reads while the kernel runs and hands to compute (run-time lengths, offsets); "
        "scratch: a kernel's own L1 pages, reserved once and never pushed (producer and consumer are that kernel)"))
    data_format: DataFormat
    dtype: Literal["float32", "bfloat16", "float16"]
    page_bytes: int
    num_pages: int
    total_bytes: int
    producer: Literal["reader", "writer", "compute"]
    consumer: Literal["reader", "compute", "writer"]
    tiles: list[int] | None
    shares_with: int | None = Field(default=None, description="the CB index whose L1 this CB shares (an output CB "
                                    "the accumulator's last K step packs into): one allocation, two views")
    shard_of: Identifier | None = Field(default=None, description="the L1-sharded tensor whose core's shard this "
                                                                   "CB's pages are (placed on it)")
    tile_order: Literal["row_major", "column_major"] = Field(
        default="row_major", description="the order of a block's tiles in the CB's pages: column by column for the "
                                         "B operand of a transposed matmul (Q @ K^T's K), row by row otherwise")
    deferred_sum: bool = Field(default=False, description="the CB holds a running row sum as its row partial: one "
                               "full tile per tile row whose columns sum to the value (summed once, where it is read)")
    holds: list[Identifier] = Field(default_factory=list, description="the other compute values that take turns on "
                                    "this index, each popped whole before the next is reserved (their live ranges "
                                    "never overlap): one CircularBufferConfig, the values' one format and page size")


class RuntimeArg(_Strict):
    name: Identifier
    kind: Literal["buffer_address", "work", "multicast", "stagger"]
    buffer: Identifier | None = None
    cb: int | None = Field(default=None, description="multicast: the CB whose reads are shared")
    field: Literal["role", "sender_x", "sender_y", "start_x", "start_y", "end_x", "end_y", "receivers", "loopback",
                   "waits", "next", "next_x", "next_y"] | None \
        = Field(default=None, description="multicast: which of the core's multicast values; stagger: which of its "
                                          "staggered-read values")


class MulticastCore(_Strict):
    core: list[int] = Field(min_length=2, max_length=2)
    role: Literal[0, 1] = Field(description="1: reads the block from DRAM and multicasts it (or reads it alone)")
    sender: list[int] = Field(min_length=2, max_length=2, description="logical core that sends to this one")
    start: list[int] = Field(min_length=2, max_length=2, description="multicast rectangle corner, in the mover's "
                                                                     "NoC order (logical)")
    end: list[int] = Field(min_length=2, max_length=2)
    receivers: int = Field(ge=0)
    loopback: Literal[0, 1]


class MulticastGroup(_Strict):
    cb: int
    buffer: Identifier
    mover: Literal["reader", "writer"]
    noc: Literal[0, 1]
    read_noc: Literal[0, 1] | None = Field(None, description="the NoC the senders read their blocks from DRAM on, "
                                                              "when it is not the mover's (absent: the mover's)")
    sender_semaphore: int = Field(ge=0)
    receiver_semaphore: int = Field(ge=0)
    depends_on: list[Identifier] = Field(description="grid indices the shared block depends on")
    groups: int = Field(ge=1, description="sets of cores sharing it (one sender each)")
    cores: list[MulticastCore]


class StaggerCore(_Strict):
    core: list[int] = Field(min_length=2, max_length=2)
    waits: int = Field(ge=0, description="signals from cores of the group before to wait for before reading the row")
    next: list[int] | None = Field(min_length=2, max_length=2,
                                   description="the core (logical) this one signals once its row is read")


class StaggerPlan(_Strict):
    semaphore: int = Field(ge=0)
    groups: int = Field(ge=2, description="groups of cores reading their rows one after another")
    cb: int = Field(description="the row input whose reads are staggered")
    cores: list[StaggerCore]


class CompileTimeArg(_Strict):
    kind: Literal["tensor_accessor"]
    buffer: Identifier
    words: list[int]


class CoreArgs(_Strict):
    core: list[int]
    values: list[Union[int, str]] = Field(description="ints, or `address(<buffer>)` / `noc_x(x,y)` / `noc_y(x,y)` "
                                                      "filled in by the host")


class KernelPlan(_Strict):
    role: Literal["reader", "compute", "writer"]
    file: Literal["reader.cpp", "compute.cpp", "writer.cpp"]
    processor: Literal["RISCV_0", "RISCV_1", "TRISC0/1/2"]
    noc: Literal["NOC_0", "NOC_1", "RISCV_0_default", "RISCV_1_default"] | None
    runtime_args: list[RuntimeArg]
    compile_time_args: list[CompileTimeArg]
    per_core_args: list[CoreArgs]


class ComputeConfigPlan(_Strict):
    fp32_dest_acc_en: bool
    dst_full_sync_en: bool
    math_fidelity: Fidelity
    dst_capacity: int
    math_approx_mode: bool
    unpack_to_dest_fp32_cbs: list[int] = Field(description="CBs unpacked straight to an fp32 DST (UnpackToDestFp32)")


class Plan(_Strict):
    schema_version: Literal[1]
    compiler: CompilerInfo
    kernel: Identifier
    source_file: OneLine
    target: PlanTarget
    grid: Grid
    schedule: Schedule
    core_grid: list[int]
    core_ranges: list[list[list[int]]]
    work: WorkPartition
    buffers: list[BufferPlan]
    circular_buffers: list[CircularBufferPlan]
    multicast: list[MulticastGroup]
    stagger: StaggerPlan | None = Field(default=None, description="row reads started group after group "
                                        "(TTStaggerReads): one group's writes overlap the next one's reads")
    semaphores_per_core: int = Field(ge=0)
    kernels: list[KernelPlan]
    compute_config: ComputeConfigPlan
    l1_bytes_per_core: int
    cb_pages_per_block: dict[str, dict[str, int]]


PLAN_JSON_SCHEMA = Plan.model_json_schema()
