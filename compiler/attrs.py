"""Every `tt.*` attribute the pipeline leaves on a PrimFunc, with the type of its value: the frontend, the passes,
codegen and the plan read and write them through the `Attr` objects here (`TARGET.get(func)`,
`TARGET.on(func, value)`, `put(func, {TARGET: ..., GRID: ...})`), never by their key strings.

The types are TypedDicts of plain Python values (what `compiler.ir.get_attr` converts the FFI objects to);
`check(func)` validates a function's attributes against them (tests/passes/test_attrs.py runs it after every pass
on the examples), so a pass that writes a new field or a wrong type is caught where it writes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, Literal, TypeVar

from pydantic import ConfigDict, Field, with_config
from typing_extensions import NotRequired, TypedDict  # pydantic checks TypedDicts from here on Python 3.11

import tvm_ffi
from tvm import tirx

from schemas.plan import PlanTarget
from schemas.target import PartitionPolicy

DECLARED_ONLY = with_config(ConfigDict(extra="forbid"))  # a field nobody declared here is an error

T = TypeVar("T")
_MISSING: Any = object()


def to_py(value: Any) -> Any:
    """FFI containers and immediates (attr values) -> plain Python (dict/list/int/float/str/bool)."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, tirx.IntImm):
        return bool(value.value) if str(value.ty) == "bool" else int(value.value)
    if isinstance(value, tirx.FloatImm):
        return float(value.value)
    if isinstance(value, tvm_ffi.Map) or hasattr(value, "items"):
        return {str(k): to_py(v) for k, v in value.items()}
    if isinstance(value, (tvm_ffi.Array, list, tuple)):
        return [to_py(v) for v in value]
    if isinstance(value, tvm_ffi.String):
        return str(value)
    return value


_ATTR_CACHE: list = []   # [(ffi object, python value)], most recent last; holds refs so identity is stable
_ATTR_CACHE_SIZE = 64


def get_attr(func: tirx.PrimFunc, key: str, default: Any = None) -> Any:
    """A PrimFunc attribute as plain Python. Attrs are immutable FFI objects shared between the functions a
    pass creates, so conversions are memoised by object identity: treat the result as read-only (copy first
    to change it; a pass publishes changes with func.with_attr)."""
    attrs = func.attrs
    if attrs is None or key not in attrs:
        return default
    obj = attrs[key]
    for cached, value in reversed(_ATTR_CACHE):
        if cached.same_as(obj):
            return value
    value = to_py(obj)
    if hasattr(obj, "same_as"):
        _ATTR_CACHE.append((obj, value))
        del _ATTR_CACHE[:-_ATTR_CACHE_SIZE]
    return value


class TargetAttr(PlanTarget):
    """The resolved target: the plan's target type (schemas/plan.py, one definition of every field and rule), as
    TTApplyTargetDefaults writes it -- partition and cb_depth None until TTChooseBlocks chooses them (unless the
    target set them), and the reason for the math fidelity, which TTChooseBlocks moves into tt.blocking."""
    partition: PartitionPolicy | None
    cb_depth: int | None = Field(ge=1)
    math_fidelity_reason: str | None = None


@DECLARED_ONLY
class GridAttr(TypedDict):
    vars: list[str]
    extents: list[int]
    triangular_axis: NotRequired[int | None]
    zigzag_sets: NotRequired[int]     # a zigzag partition's cores per set (partition_work: blocks of equal trip counts)


@DECLARED_ONLY
class ValueGeneratorAttr(TypedDict):
    kind: Literal["affine_value"]
    row_coef: int
    col_coef: int
    offsets: list[int]
    entries: int


@DECLARED_ONLY
class MaskGeneratorAttr(TypedDict):
    kind: Literal["affine_mask"]
    row_coef: int
    col_coef: int
    first_offset: int
    entries: int
    true_value: float | str
    false_value: float | str


@DECLARED_ONLY
class BufferAttr(TypedDict):
    role: str                         # input | output | unused | constant | staging | compute
    scope: str                        # global | shared | local
    shape: list[int]
    dtype: str
    tile_axes: NotRequired[list[int]]         # from TTInferLayout on
    generator: NotRequired[MaskGeneratorAttr | ValueGeneratorAttr]
    accumulate: NotRequired[bool]             # an output its blocks add into (tt.accumulate)
    row_offsets: NotRequired[int]             # an integer tensor whose elements place rows of a matrix this tall


@DECLARED_ONLY
class ShardAttr(TypedDict):
    cores: list[list[int]]            # first and last core (logical x, y) of the shard grid
    shard_shape: list[int]            # elements per shard (rows, columns)
    shard_tiles: list[int]


@DECLARED_ONLY
class LayoutAttr(TypedDict):
    memory: str                               # DRAM | L1 | DST; the rest is set for DRAM buffers only
    data_format: str
    tile_shape: list[int]
    tile_bytes: int
    shape: list[int]
    padded_shape: NotRequired[list[int]]
    tiles: NotRequired[list[int]]
    tile_axes: NotRequired[list[int]]
    layout: NotRequired[str]
    page_bytes: NotRequired[int]
    pages: NotRequired[int]
    banks: NotRequired[int]
    tile_order: NotRequired[str]
    shard: NotRequired[ShardAttr]             # an output block-sharded in L1 (memory L1, layout block_sharded)
    replicated_rows: NotRequired[bool]        # a row vector with its values in every row of its tiles (TTInferLayout)


@DECLARED_ONLY
class CircularBufferAttr(TypedDict):
    index: int
    name: str
    buffer: str
    role: str                         # input | output | intermediate
    data_format: str
    dtype: str
    page_bytes: int
    num_pages: int
    producer: str
    consumer: str
    tiles: list[int] | None
    shard_of: NotRequired[str]        # the L1-sharded tensor whose core's shard this CB's pages are
    shares_with: NotRequired[int]     # the accumulator CB whose L1 this output CB shares (tensorize)
    tile_order: NotRequired[str]      # column_major: a transposed matmul's B, its tiles column by column
    holds: NotRequired[list[str]]     # the other values that take turns on this index (TTShareCircularBuffers)


@DECLARED_ONLY
class BlockingAttr(TypedDict):
    mode: str
    changed: bool
    explain: list[str]
    math_fidelity: NotRequired[str]
    compute_cycles: NotRequired[int]    # the busiest core's modelled matrix-engine cycles (a GEMM's blocks)


@DECLARED_ONLY
class CoreWorkAttr(TypedDict):
    core: list[int]
    start: int
    count: int
    stride: int
    row_len: int
    row_stride: int


@DECLARED_ONLY
class WorkPartitionAttr(TypedDict):
    policy: str
    blocks: int
    grid: list[int]
    num_cores: int
    work_args: list[str]
    cores: list[CoreWorkAttr]


@DECLARED_ONLY
class MulticastAttr(TypedDict):
    cb: int
    buffer: str
    sender_semaphore: int
    receiver_semaphore: int
    axes: list[str]
    groups: int
    cores: list[list[int]]             # per core: x, y, then the fields of passes/share_reads.FIELDS
    # read in the loop whose first step also reads the core's own block, one block a core (TTSplitKernels,
    # steps_behind_own_block): the first step's read is what compute waits for at the kernel's start
    first_step_exposed: NotRequired[bool]


@DECLARED_ONLY
class StaggerAttr(TypedDict):
    semaphore: int
    groups: int
    cb: int                            # the row input whose reads are staggered
    cores: list[list[int]]             # per core: x, y, signals to wait for, has a next core, its x, its y


@DECLARED_ONLY
class RuntimeArgAttr(TypedDict):
    name: str
    kind: str                          # buffer_address | work | multicast | stagger
    buffer: NotRequired[str]
    cb: NotRequired[int]
    field: NotRequired[str]


@DECLARED_ONLY
class CompileTimeArgAttr(TypedDict):
    kind: str
    buffer: str
    words: list[int]


@DECLARED_ONLY
class ComputeConfigAttr(TypedDict):
    fp32_dest_acc_en: bool
    dst_full_sync_en: bool
    math_fidelity: str
    dst_capacity: int
    math_approx_mode: bool
    unpack_to_dest_fp32_cbs: list[int]


@DECLARED_ONLY
class VerificationAttr(TypedDict):
    l1_bytes_per_core: int
    cb_pages_per_block: dict[str, dict[str, int]]


@dataclass(frozen=True)
class Attr(Generic[T]):
    key: str
    type: Any
    doc: str

    def get(self, func, default: Any = _MISSING) -> T:
        """The value as plain Python (read-only: copy it to change it); `default` when absent, else KeyError."""
        value = get_attr(func, self.key, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise KeyError(f"{self.key} is not set on this function (a pass ran out of order?)")
            return default
        return value

    def on(self, func, value: T):
        return func.with_attr(self.key, value)


def put(func, values: dict[Attr, Any]):
    """The function with several attributes set at once."""
    return func.with_attrs({attr.key: value for attr, value in values.items()})


SOURCE_FILE = Attr[str]("tt.source_file", str, "the user's file name, for diagnostics and generated headers")
ENTRY = Attr[str]("tt.entry", str, "the kernel (or TileLang factory) compiled")
PIPELINE_STAGES = Attr[int]("tt.pipeline_stages", int, "TileLang's num_stages: the input CBs' depth")
SINGLE_BUFFERED = Attr[list]("tt.single_buffered", list[str],
                           "staging buffers given one buffered block, whatever cb_depth says (TTChooseBlocks)")
LOGICAL_SHAPES = Attr[dict]("tt.logical_shapes", dict[str, list[int]], "1-D user tensors the kernel sees as 2-D")
DECLARED_DTYPES = Attr[dict]("tt.declared_dtypes", dict[str, str],
                             "user tensors of a dtype no tile holds (low-bit: read as bfloat16, integers: as float32) "
                             "and int32 tiles (float32 tiles holding integers)")
EXACT_VALUES = Attr[list]("tt.exact_values", list[str],
                          "integer values and what they are computed from: no FPU element-wise op (precision.exact_values)")
TARGET = Attr[TargetAttr]("tt.target", TargetAttr, "the target, its defaults resolved")
GRID = Attr[GridAttr]("tt.grid", GridAttr, "the launch grid's variables and extents")
BUFFERS = Attr[dict]("tt.buffers", dict[str, BufferAttr], "every buffer: role, scope, shape, dtype")
CONSTANTS = Attr[dict]("tt.constants", dict[str, Any], "compile-time scalars the kernel check knows")
ACCUMULATE = Attr[list]("tt.accumulate", list[str],
                        "outputs blocks add into (T.atomic_add): read, added to and written back, block after block")
SERIAL_GROUP = Attr[int]("tt.serial_group", int,
                         "consecutive blocks that run on one core in order (they add into the same output tiles)")
BLOCKING = Attr[BlockingAttr]("tt.blocking", BlockingAttr, "the blocks chosen and why (TTChooseBlocks)")
LAYOUT_DESC = Attr[dict]("tt.layout_desc", dict[str, LayoutAttr], "each DRAM buffer's tiled, paged layout")
CB_CONFIG = Attr[list]("tt.cb_config", list[CircularBufferAttr], "the circular buffers")
CORE_GRID = Attr[list]("tt.core_grid", list[int], "the worker grid used")
CORE_RANGES = Attr[list]("tt.core_ranges", list[list[list[int]]], "the cores the kernels run on, as ranges")
WORK_PARTITION = Attr[WorkPartitionAttr]("tt.work_partition", WorkPartitionAttr, "which blocks each core computes")
MULTICAST = Attr[list]("tt.multicast", list[MulticastAttr], "blocks shared by multicast (TTShareReads)")
STAGGER = Attr[StaggerAttr]("tt.stagger", StaggerAttr, "row reads started group after group (TTStaggerReads)")
KERNEL_ROLE = Attr[str]("tt.kernel_role", Literal["reader", "compute", "writer"], "a split kernel's role")
RUNTIME_ARGS = Attr[list]("tt.runtime_args", list[RuntimeArgAttr], "a kernel's runtime arguments, in order")
COMPILE_TIME_ARGS = Attr[list]("tt.compile_time_args", list[CompileTimeArgAttr], "a kernel's compile-time arguments")
COMPUTE_CONFIG = Attr[ComputeConfigAttr]("tt.compute_config", ComputeConfigAttr, "the compute kernel's ComputeConfig")
VERIFICATION = Attr[VerificationAttr]("tt.verification", VerificationAttr, "what TTVerifyProgram checked")

ALL: tuple[Attr, ...] = (SOURCE_FILE, ENTRY, PIPELINE_STAGES, SINGLE_BUFFERED, LOGICAL_SHAPES, DECLARED_DTYPES, EXACT_VALUES, TARGET, GRID, BUFFERS, CONSTANTS,
                         ACCUMULATE, SERIAL_GROUP, BLOCKING,
                         LAYOUT_DESC, CB_CONFIG, CORE_GRID, CORE_RANGES, WORK_PARTITION, MULTICAST, STAGGER, KERNEL_ROLE,
                         RUNTIME_ARGS, COMPILE_TIME_ARGS, COMPUTE_CONFIG, VERIFICATION)
BY_KEY = {a.key: a for a in ALL}


def check(func) -> list[str]:
    """What is wrong with the function's tt.* attributes: unknown keys, values not of their declared type."""
    from pydantic import ValidationError

    problems = []
    for key in (str(k) for k in (func.attrs or {}).keys()):
        if not key.startswith("tt."):
            continue
        attr = BY_KEY.get(key)
        if attr is None:
            problems.append(f"{key}: not declared in compiler/attrs.py")
            continue
        try:
            _adapter(attr).validate_python(_plain(attr.get(func)), strict=False)
        except ValidationError as error:
            problems.append(f"{key}: {error.errors()[0]['loc']}: {error.errors()[0]['msg']}")
    return problems


@cache
def _adapter(attr: Attr):
    from pydantic import TypeAdapter

    return TypeAdapter(attr.type)


def _plain(value):
    """FFI strings as str (they are str subclasses pydantic's TypedDict validation does not always take)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, str):
        return str(value)
    return value
