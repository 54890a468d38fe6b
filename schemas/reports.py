"""The documents a sandboxed step answers besides the plan: an emulated run's report.json (the emulator's counters,
ttemu/src/host_api.cpp; its timing model, timing_sim.cpp; the verification against NumPy and
the wrapper's timings, compiler/toolchain/verification.py) and a compile's linemap.json (compiler/codegen/linemap.py).

They come back from the sandbox, where the job's own code could have written them: each is held to its schema here
before it is stored or drawn (workers/sandbox/answers.py). Every field has a type and a bound; names (arch, kernels, RISCs, buffers, files) are
plain names, not text; free text (messages, warnings) is bounded, and is only ever shown as text.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from schemas.values import Text

MAX_CORES = 4096          # more than any grid (Blackhole: 140 worker cores)
MAX_ITEMS = 100_000       # streams, source lines, timeline bins
Count = Annotated[int, Field(ge=0, le=2**63 - 1)]
Number = Annotated[float, Field(ge=0, le=1e30)]
Index = Annotated[int, Field(ge=0, le=2**31)]
Name = Annotated[Text, StringConstraints(pattern=r"^[A-Za-z0-9_.:/+\-]{0,512}$")]
Message = Annotated[Text, StringConstraints(max_length=8192)]
NumberKey = Annotated[str, StringConstraints(pattern=r"^[0-9]{1,10}$")]
# a counter's name: an identifier, or a block call counted in tiles (the emulator's "matmul_block (tiles)")
OpName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}( \(tiles\))?$")]
Core = Annotated[list[Index], Field(min_length=2, max_length=2)]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class RunError(_Part):
    kind: Name
    message: Message


class Jit(_Part):
    compiled: Count
    cache_hits: Count
    seconds: Number


class BufferCounters(_Part):
    id: Count
    kind: Name
    sharded: bool
    address: Count
    size: Count
    page_size: Count
    num_pages: Count
    bytes_read: Count
    bytes_written: Count
    tiles_read: Count
    tiles_written: Count
    distinct_pages_read: Count
    distinct_pages_written: Count


class DramTraffic(_Part):
    tiles_read: Count
    tiles_written: Count
    bytes_read: Count
    bytes_written: Count


class CoreCounters(_Part):
    core: Core
    noc_bytes_read: Count
    noc_bytes_written: Count
    noc_reads: Count
    noc_writes: Count
    noc_multicasts: Count
    noc_multicast_bytes: Count
    semaphore_ops: Count
    dst_acquires: Count
    tile_ops: dict[OpName, Count] = Field(max_length=512)
    dram: dict[NumberKey, DramTraffic] = Field(max_length=4096)
    cb_high_water_pages: dict[NumberKey, Count] = Field(max_length=64)


class Totals(_Part):
    noc_bytes_read: Count
    noc_bytes_written: Count
    noc_multicasts: Count
    noc_multicast_bytes: Count
    semaphore_ops: Count
    dst_acquires: Count
    tile_ops: dict[OpName, Count] = Field(max_length=512)


class Timeline(_Part):
    bin_cycles: Number
    busy: list[Number] = Field(max_length=MAX_ITEMS)
    wait_cb: list[Number] = Field(max_length=MAX_ITEMS)
    wait_noc: list[Number] = Field(max_length=MAX_ITEMS)
    wait_pipe: list[Number] = Field(max_length=MAX_ITEMS)


class Stream(_Part):
    """One RISC of one core running one kernel, as the timing model replayed it."""
    core: Core
    kernel: Name
    role: Name
    risc: Name
    fidelity: Count
    end: Number
    tile_products: Count
    engine_busy: Number  # a compute UNPACK / PACK thread's unpackers / packers: cycles moving data
    busy: Number
    wait_cb: Number
    wait_noc: Number
    wait_pipe: Number
    cb_wait: dict[NumberKey, Number] = Field(max_length=64)
    timeline: Timeline


class LineCost(_Part):
    file: Name
    line: Count
    kernel: Name
    risc: Name
    busy: Number
    wait: Number
    calls: Count
    streams: Count


class DramBank(_Part):
    bank: Count
    bytes_read: Count
    bytes_written: Count
    busy_cycles: Number


class Dram(_Part):
    bank_bytes_per_cycle: Number
    banks: list[DramBank] = Field(max_length=256)


class Noc(_Part):
    busiest_link_cycles: Number   # the most cycles any one NoC link carried data


class ProgramTiming(_Part):
    index: Count
    kernel_cycles: Number
    dispatch_cycles: Number
    device_cycles: Number
    trisc1_cycles: Number   # the math RISC's first start to its last end across cores (the device profiler's span)
    forced_waits: Count
    forced_at: list[Message] = Field(max_length=100)
    streams: list[Stream] = Field(max_length=MAX_CORES * 8)
    lines: list[LineCost] = Field(max_length=MAX_ITEMS)
    noc: Noc
    dram: Dram


class Timing(_Part):
    clock_ghz: Number
    timing_only: bool
    device_cycles: Number
    trisc1_cycles: Number
    programs: list[ProgramTiming] = Field(max_length=64)


class OutputCheck(_Part):
    """compiler/verify.py OutputCheck.to_dict()."""
    name: Name
    shape: list[Count] = Field(max_length=8)
    dtype: Name
    ok: bool
    max_abs_err: float | str
    max_rel_err: float | str
    rtol: float
    atol: float
    mismatches: Count
    size: Count
    first_bad_index: list[Count] | None = Field(default=None, max_length=8)
    expected_value: float | str | None = None
    got_value: float | str | None = None
    message: Message = ""
    derivation: Message = ""


class Verification(_Part):
    ok: bool
    outputs: list[OutputCheck] = Field(max_length=64)


class EmulatorReport(_Part):
    """report.json of an emulate stage."""
    arch: Literal["wormhole_b0", "blackhole", "grayskull"]
    programs_run: Count
    error: RunError | None
    warnings: list[Message] = Field(max_length=1000)
    jit: Jit
    run_seconds: Number
    buffers: list[BufferCounters] = Field(max_length=4096)
    cores: list[CoreCounters] = Field(max_length=MAX_CORES)
    totals: Totals
    timing: Timing | None
    verification: Verification | None = None
    passed: bool
    timings: dict[OpName, Number] = Field(max_length=64)


class LineMap(_Part):
    """linemap.json: for each generated kernel, the user's source lines each of its lines comes from."""
    version: Literal[1]
    source: Annotated[Text, StringConstraints(max_length=4096)] | None
    files: dict[Literal["reader.cpp", "compute.cpp", "writer.cpp"],
                dict[NumberKey, Annotated[list[Count], Field(max_length=256)]]]
