"""The op registry: one entry per tile op (table.py), from which everything that used to repeat the op list reads.

- the frontends: TIRx's `T.tile.<name>` (compiler/frontend/tile_primitives.py registers the ones TVM lacks),
  TileLang's element functions and operators (frontend/tilelang: `tilelang_scalars()`, `unary_of_tilelang()`);
- the reference interpreter (NumPy per op) and constant folding (Python floats per op);
- check_kernel, choose_blocks and tensorize (the op kinds, the FPU/SFPU lowering), ops.py (the SFPU intrinsics);
- the timing model's per-op costs (`device_costs`: compiler/target.py merges them into each architecture's table);
- the emulator: `python -m compiler.registry.generate` writes its X-macro table (include/ttemu/sfpu_ops.def: the
  SfpuOp enum, the init-name, cost and arithmetic switches of src/compute.cpp, the cost fields and keys of
  src/timing.h / timing_costs.cpp) and the generated parts of its compute API headers; a test fails when the
  checked-in files are not what the table generates.

How to add an op: compiler/README.md.
"""
from __future__ import annotations

from .spec import Cost, Registry, Scale, Sfpu, TileLangFunction, TileOp
from .table import LN2, REGISTRY, TO_FP32, TO_INT32, int32_of

TILE_OPS: dict[str, TileOp] = {op.name: op for op in REGISTRY.tile_ops}


def names(*kinds: str, lowered: bool = True) -> tuple[str, ...]:
    """Tile ops of these kinds, in table order (only those the backend lowers, unless lowered=False)."""
    return tuple(op.name for op in REGISTRY.tile_ops if op.kind in kinds and (op.lowered or not lowered))


SUPPORTED = tuple(op.name for op in REGISTRY.tile_ops if op.lowered)   # what T.tile.* the backend compiles
UNARY = names("unary")
BINARY = names("binary")
REDUCE = names("reduce")
FPU_BINARY = tuple(op.name for op in REGISTRY.tile_ops if op.fpu)
ELEMENTWISE = names("copy", "cast", "unary", "binary")   # one output element from the same element of each input


def _sfpu_functions() -> tuple[Sfpu, ...]:
    found: dict[str, Sfpu] = {}
    for op in REGISTRY.tile_ops:
        for fn in (*op.lowering, op.sfpu, op.with_scalar):
            if isinstance(fn, Sfpu):
                found.setdefault(fn.opcode, fn)
    for fn in REGISTRY.device_only:
        found.setdefault(fn.opcode, fn)
    return tuple(found.values())


SFPU_FUNCTIONS: tuple[Sfpu, ...] = _sfpu_functions()     # every SFPU function, one per emulator opcode


def _costs() -> dict[str, Cost]:
    out: dict[str, Cost] = {}
    for cost in (*REGISTRY.shared_costs, *(fn.cost for fn in SFPU_FUNCTIONS)):
        if out.setdefault(cost.key, cost) != cost:
            raise ValueError(f"op registry: two different costs named {cost.key!r}")
    return out


COSTS: dict[str, Cost] = _costs()                          # the timing model's per-op constants


def sfpu_call_instructions(costs: dict) -> dict[str, float]:
    """Each SFPU compute-API call's instructions a 32-datum row under `costs` (target.device_costs), as the
    emulator charges them (ttemu/src/compute.cpp: a float binary call one more than its function's slots for the
    second operand's load; a scalar form, `add_unary_tile` and the like, a simple op's)."""
    out = {fn.call: float(costs[fn.cost.key]) + (fn.family == "binary" and not fn.integer)
           for fn in SFPU_FUNCTIONS if fn.call}
    for op in REGISTRY.tile_ops:
        if op.with_scalar is not None:
            out.setdefault(op.scalar_call()[0], float(costs["sfpu_instr_simple"]))
    return out


def tilelang_scalars() -> dict:
    """TileLang element function name (and internal tile-op name) -> its value on a Python float."""
    out = {op.name: op.scalar for op in REGISTRY.tile_ops if op.kind == "unary" and op.scalar and op.lowered}
    out.update({spelling: op.scalar for op in REGISTRY.tile_ops if op.kind == "unary" and op.lowered
                for spelling in op.tilelang})
    out.update({fn.name: fn.scalar for fn in REGISTRY.tilelang_functions})
    return out


def tilelang_function_names() -> tuple[str, ...]:
    """Every TileLang element function (T.exp, T.rsqrt, ...) the frontend lowers, in table order."""
    return (*unary_of_tilelang(), *(fn.name for fn in REGISTRY.tilelang_functions))


def unary_of_tilelang() -> dict[str, str]:
    """TileLang element function spelling -> the unary tile op it is."""
    return {spelling: op.name for op in REGISTRY.tile_ops if op.kind == "unary" and op.lowered
            for spelling in op.tilelang}


def binary_of_tilelang() -> dict[str, str]:
    """TileLang operator (+ - *) or function (max, min) inside T.Parallel -> the binary tile op."""
    return {spelling: op.name for op in REGISTRY.tile_ops if op.kind == "binary" for spelling in op.tilelang}


TILELANG_FUNCTIONS: dict[str, TileLangFunction] = {fn.name: fn for fn in REGISTRY.tilelang_functions}


def tvm_scalar_functions() -> dict:
    """TVM scalar intrinsic name (tirx.<name>) -> its value on a Python float (scalar expressions, masks)."""
    out = {op.tvm_scalar: op.scalar for op in REGISTRY.tile_ops if op.tvm_scalar}
    out.update({fn.tvm_scalar: fn.scalar for fn in REGISTRY.tilelang_functions if fn.tvm_scalar})
    return out


def reduces_on_sfpu(name: str, dtype: str, exact: bool) -> bool:
    """Does a row reduction `name` of a fragment of `dtype` run on the SFPU (sfpu_reduce) rather than the FPU
    (reduce_tile)? The FPU's source registers hold TF32, so an fp32 (or int32-as-fp32) max there is rounded to 11
    significant bits (the one rounding compiler/precision.py counts); the SFPU compares DST's values as they are,
    and costs more (an attention's row max: BH 1x10x2048x128 213 -> 306 us under the model). So an fp32 max is on
    the SFPU where its value must be `exact` (precision.exact_values: integers, and data compared with data, as
    top-k's `max_val[i] == x[i, j]`). A reduction the FPU lacks (min) is always on the SFPU; bf16 max stays on the
    FPU (exact there: bf16 fits TF32)."""
    op = TILE_OPS[name]
    return op.kind == "reduce" and op.sfpu_pool is not None and (op.pool is None or (dtype == "float32" and exact))


def _check() -> None:
    """The table's own consistency, at import: a bad entry fails here, naming itself."""
    seen: dict[str, str] = {}
    for fn in SFPU_FUNCTIONS:
        for name in (fn.call, fn.opcode):
            if name and seen.setdefault(name, fn.opcode) != fn.opcode:
                raise ValueError(f"op registry: {name!r} names two SFPU functions")
        if fn.family not in ("scalar", "reduce") and not fn.cpp:
            raise ValueError(f"op registry: SFPU function {fn.opcode} has no arithmetic (cpp)")
        if fn.api and not fn.standard_call:
            raise ValueError(f"op registry: {fn.opcode}'s declarations cannot be generated (not a standard call)")
    names_seen: set[str] = set()
    for op in REGISTRY.tile_ops:
        if op.name in names_seen:
            raise ValueError(f"op registry: tile op {op.name!r} twice")
        names_seen.add(op.name)
        if op.kind == "unary" and op.lowered and not op.lowering:
            raise ValueError(f"op registry: unary tile op {op.name!r} has no lowering")
        if op.integer and not all(fn.integer for fn in (*op.lowering, op.sfpu, op.with_scalar)
                                  if isinstance(fn, Sfpu)):
            raise ValueError(f"op registry: Int32 tile op {op.name!r} lowers to a function of float data")
        if op.kind == "binary" and op.lowered and op.sfpu is None:
            raise ValueError(f"op registry: binary tile op {op.name!r} needs sfpu")
        if op.kind in ("unary", "binary", "reduce") and op.numpy is None:
            raise ValueError(f"op registry: tile op {op.name!r} has no NumPy reference")
        if not op.tvm_builtin and op.kind not in ("unary", "binary"):   # frontend/tile_primitives.py builds these
            raise ValueError(f"op registry: {op.kind} tile op {op.name!r} is not TVM's: T.tile builders are "
                             "derived for unary and binary ops only")


_check()

__all__ = ["TO_FP32", "TO_INT32", "int32_of", "BINARY", "COSTS", "Cost", "ELEMENTWISE", "FPU_BINARY", "LN2", "REDUCE", "REGISTRY", "Registry",
           "SFPU_FUNCTIONS", "SUPPORTED", "sfpu_call_instructions", "Scale", "Sfpu", "TILELANG_FUNCTIONS", "TILE_OPS", "TileLangFunction",
           "TileOp", "UNARY", "binary_of_tilelang", "reduces_on_sfpu", "names", "tilelang_function_names", "tilelang_scalars", "tvm_scalar_functions",
           "unary_of_tilelang"]
