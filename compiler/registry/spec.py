"""What one entry of the op registry says (table.py holds the entries).

Plain data: no tvm, no compiler imports, so the reference interpreter, the frontends, the passes, the device
table and the C++ generator can all read it without depending on each other.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

# What a tile op is, for everything that dispatches on it (check_kernel, choose_blocks, tensorize, the reference).
Kind = Literal["copy", "cast", "zero", "fill", "gemm", "unary", "binary", "reduce"]
# How an SFPU function of the compute API takes its operands (decides its C++ signature and emulator entry point).
Family = Literal["unary", "unary_param", "binary", "scalar", "reduce"]


@dataclass(frozen=True)
class Cost:
    """A timing-model constant (device_costs: SFPU instructions per 32-datum row), with where the number comes
    from; the same on every architecture (the SFPU is one design)."""
    key: str
    value: float
    kind: Literal["documented", "derived", "estimate", "calibrated"]
    source: str


@dataclass(frozen=True)
class Sfpu:
    """One SFPU function of the compute API (api/compute/...): an init call that configures the SFPU and a call
    that computes in place on DST tiles. The emulator's opcode (`ttemu::dev::SfpuOp::<opcode>`), its numerics and
    its cost come from here, and its API header (the emulator's copy of ttnn's) is generated unless `api` is False.

    `cpp` is the emulator's arithmetic in fp32 as a C++ expression: of `x` (unary), of `x` and the call's scalar
    parameter `s` (unary_param), of `a` and `b` (binary); empty for the `scalar` family (binop_with_scalar, whose
    calls carry their own operation) and the `reduce` family (sfpu_reduce: the emulator's compute.cpp). An `integer`
    function works on each DST element's 32-bit pattern (Int32 data in a 32-bit DST): `cpp` is then uint32_t
    arithmetic of `u` and the call's parameter `p` (unary, unary_param), of `a` and `b` (binary), and the emulator
    never reads the pattern as a float.

    `spelled` / `init_spelled`: the C++ names at the call site when they are not `call` / `init` (template
    arguments: `bitwise_and_tile<DataFormat::Int32>`; two typecasts share the C++ name `typecast_tile`)."""
    opcode: str                   # SfpuOp member: Exp, Log1p, AddBinary, ...
    call: str                     # the API call: exp_tile, add_binary_tile, ...
    init: str                     # the API call that configures the SFPU for it
    header: str                   # the compute API header declaring both, as in ttnn 0.81.1 (under api/compute/)
    family: Family
    cost: Cost
    cpp: str = ""
    init_opcode: str | None = None   # the configuration it runs on is another function's (mask_posinf_tile on
                                     # mask_tile_init's); its own init, when it has one, makes that configuration
    standard_call: bool = True       # the call takes the family's arguments: (idst), (idst, param0 bits) or
                                     # (idst0, idst1, odst); otherwise ops.py and the emulator spell it by hand
    api: bool = True                 # generate the emulator's declarations (False: hand-written in its header)
    call_template: str = ""          # the real signatures' template heads and extra parameters (defaults kept)
    init_template: str = ""
    extra_params: str = ""
    integer: bool = False
    spelled: str = ""
    init_spelled: str = ""

    @property
    def cpp_call(self) -> str:
        return self.spelled or self.call

    @property
    def cpp_init(self) -> str:
        return self.init_spelled or self.init


@dataclass(frozen=True)
class Scale:
    """A step of a unary lowering: multiply DST by a constant (mul_unary_tile with binop_with_scalar)."""
    factor: float


@dataclass(frozen=True)
class TileOp:
    """One tile op: `T.tile.<name>` in TIRx, what TileLang spells it in a T.Parallel body, what it computes
    (NumPy on float32 arrays for the reference interpreter, Python floats for constant folding) and how it lowers.

    - unary: `lowering` is the SFPU steps applied in place to the DST tile holding the operand, in order;
    - binary: `fpu` names the matrix engine's CB x CB op (add -> add_tiles, add_bcast_*), `sfpu` the DST x DST
      function, `with_scalar` DST op scalar (an SFPU function with a scalar parameter, or the (call, init) of
      binop_with_scalar), `scalar_first` the binop_with_scalar call when the scalar is the first operand (None:
      commutative);
    - reduce: `numpy` reduces over axes (keepdims), `combine` merges it into dst with accum, `pool` is
      reduce_tile's PoolType (sum / max: the FPU), `sfpu_pool` sfpu_reduce's (MAX / MIN: the SFPU, exact on
      fp32; see `reduces_on_sfpu`);
    - copy, cast, zero, fill, gemm: structural, lowered by the passes that know them.
    `lowered=False`: the reference interpreter knows it, the Tenstorrent backend rejects it (a located error)."""
    name: str
    kind: Kind
    numpy: Callable | None = None
    scalar: Callable | None = None
    tilelang: tuple[str, ...] = ()         # T.<fn> / operator spellings inside T.Parallel
    tvm_builtin: bool = True               # TVM defines T.tile.<name>; otherwise compiler/frontend registers it
    affine: bool = False                   # TVM's (dst, src, bias, scale) form: dst = f(src * scale + bias)
    tvm_scalar: str | None = None          # TVM's scalar intrinsic of the same function (tirx.<name>), if any
    lowered: bool = True
    lowering: tuple = ()                   # unary: Sfpu | Scale steps
    fpu: str | None = None                 # binary
    sfpu: Sfpu | None = None               # binary
    with_scalar: Sfpu | tuple[str, str] | None = None
    scalar_first: str | None = None
    pool: str | None = None                # reduce: reduce_tile's PoolType
    sfpu_pool: str | None = None           # reduce: sfpu_reduce's PoolType (row max / min on the SFPU)
    combine: Callable | None = None        # reduce: how an accumulating reduction merges with dst (NumPy)
    commutative: bool = True               # binary: a scalar first operand may swap places (shifts may not)
    integer: bool = False                  # computes on Int32: the SFPU converts its operands to Int32 in DST first
                                           # and its result back to fp32 (registry.TO_INT32 / TO_FP32)


    def scalar_call(self) -> tuple[str, str]:
        """(call, init) of DST op scalar."""
        fn = self.with_scalar
        return (fn.call, fn.init) if isinstance(fn, Sfpu) else fn


@dataclass(frozen=True)
class TileLangFunction:
    """A TileLang element function with no tile op of its own: `expand(t, x)` builds it from tile-op functions
    (`t.exp`, `t.sqrt`, `t.max`, ... and Python arithmetic on x), `scalar` is its value on a constant."""
    name: str
    scalar: Callable
    expand: Callable
    tvm_scalar: str | None = None


@dataclass(frozen=True)
class Registry:
    tile_ops: tuple[TileOp, ...]
    tilelang_functions: tuple[TileLangFunction, ...]
    device_only: tuple[Sfpu, ...]          # SFPU functions the emulator provides that no tile op lowers to
    shared_costs: tuple[Cost, ...] = field(default=())
