"""What every part of the TileLang stand-in shares: dtype names and the stub for what tilefarm does not provide.

Depends on diagnostics (and compiler.errors) only, so every other module of the frontend can import it.
"""
from __future__ import annotations

from ...errors import Refusal
from ...target import BYTE_OUTPUTS
from .diagnostics import fail

TILE_DTYPES = ("float16", "bfloat16", "float32")
# dtypes a TileLang kernel may name that have no Tenstorrent tile format: read exactly as bfloat16, never written
LOW_BIT = ("int8", "uint8", "int4", "uint4", "float8_e4m3", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
           "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn", "bool")


def declared_as(dtype: str) -> str:
    """The tile dtype a declared dtype is stored in: every low-bit value (int8, uint8, int4, fp8, fp4, e8m0) is a
    bfloat16 exactly (at most 8 significant bits, exponents within bfloat16's range), so low-bit inputs are read as
    bfloat16 tiles; the host converts them exactly."""
    return "bfloat16" if dtype in LOW_BIT else dtype


# integer tensors a kernel reads as data (sequence offsets and lengths: `cu_seqlens[bz + 1] - cu_seqlens[bz]`): every
# value below 2^24 in magnitude is a float32 exactly, so they are read as float32 tiles; the host refuses larger ones
INTEGER_READS = ("int16", "int32", "int64", "uint16", "uint32")


def read_as(dtype: str) -> str:
    """The tile dtype a kernel argument of this dtype is read as (low-bit: bfloat16, integers: float32)."""
    return "float32" if dtype in INTEGER_READS else declared_as(dtype)


# integer tiles and outputs a kernel computes (top-k's indices): float32 tiles holding integers, exact below 2^24; an
# int32 output's pages are converted to int32 by the writer (truncation toward zero, as the SFPU's typecast)
INTEGER_TILES = ("int32",)
# integer tiles held as floats that stores keep integers: int32's, and int8 / uint8 ones (a quantization's codes,
# written to outputs whose pages the writer converts to bytes: compiler/target.py BYTE_OUTPUTS)
INTEGER_VALUED = INTEGER_TILES + BYTE_OUTPUTS


def unwritable(dtype: str, what: str) -> str | None:
    """Why a low-bit or integer output cannot be written (None: it can): the device would have to round to it."""
    if dtype in INTEGER_TILES or dtype in BYTE_OUTPUTS:
        return None
    if dtype in INTEGER_READS:
        return (f"{what} is {dtype}: writing it means converting to integers, which no Tenstorrent tile format or "
                "packer does (integer inputs are read exactly, as float32)")
    if dtype not in LOW_BIT:
        return None
    return (f"{what} is {dtype}: writing it means rounding to {dtype}, which no Tenstorrent tile format or "
            "packer does (low-bit inputs are read exactly, as bfloat16)")


def untileable(dtype: str, what: str) -> str | None:
    """Why a tile or an output of this dtype cannot be made (None: it can): integer and float64 ones because no
    tile holds them (low-bit ones are read as bfloat16: declared_as)."""
    if dtype in TILE_DTYPES or dtype in LOW_BIT or dtype in INTEGER_TILES:
        return None
    return f"{what} is {dtype}; Tenstorrent tiles hold float32, bfloat16 or float16"


LOW_BIT_HINT = ("write the result as bfloat16 or float16 (quantized values stay exact in them) and convert it where "
                "it is consumed")


def tile_dtype_hint(dtype: str) -> str:
    return LOW_BIT_HINT if dtype in LOW_BIT else ("integer values such as indices are exact in float32 tiles below "
                                                  "2^24: compute and store them as float32")


_ALIASES = {"float": "float32", "half": "float16", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32",
            "double": "float64", "int": "int32"}


def _cuda_refusal(name: str, kwargs: dict) -> Refusal | None:
    """A missing name whose use needs a CUDA GPU: CUDA-only intrinsics (`tilelang.cuda...`: the tensor-core MMA
    emitter), a CUDA device query or CUDA tensors made while the kernel is built (`torch.cuda...`,
    `torch.rand(..., device="cuda")`). Other missing names (host helpers, profilers) say nothing of the kind."""
    if name.startswith("tilelang.cuda."):
        return Refusal.not_expressible(f"`{name}` is a CUDA-only intrinsic (tensor cores, warps)")
    device = str(kwargs.get("device", ""))
    if name.startswith("torch.") and (".cuda" in name or device.startswith("cuda")):
        return Refusal.not_expressible(f"`{name}` needs a CUDA GPU while the kernel is built (a device query or "
                                       "CUDA tensors)")
    return None


class Missing:
    """Stands for something tilefarm does not provide (torch, tilelang.profiler...): fails only when used."""

    def __init__(self, name: str, why: str):
        self._name, self._why = name, why

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return Missing(f"{self._name}.{attr}", self._why)

    def _fail(self, *args, **kwargs):
        fail(f"`{self._name}` is used while building the kernel, but {self._why}",
             hint="the compile service evaluates only what the entry needs: keep host-side code (torch, profiling, "
                  "benchmarks) out of the kernel factory", refusal=_cuda_refusal(self._name, kwargs))

    __call__ = __getitem__ = __iter__ = __bool__ = __index__ = __int__ = __float__ = _fail
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __floordiv__ = _fail
    __mro_entries__ = _fail

    def __repr__(self):
        return f"<unavailable {self._name}>"


class Names:
    """`T.GemmWarpPolicy.FullRow`, `tilelang.PassConfigKey.TL_ENABLE_FAST_MATH`: an enum of GPU options whose
    members are accepted (and ignored) by name."""

    def __init__(self, name):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return f"{self._name}.{attr}"


def dtype_name(dtype) -> str:
    """`T.float16`, "float16", "float", T.dtype("half"), a buffer's `.dtype` -> the canonical name ("float16")."""
    if callable(getattr(type(dtype), "_fail", None)):   # a name outside the subset (T.float8_e4m3, a missing module)
        dtype._fail()
    if not isinstance(dtype, str):
        shown = f"`{dtype!r}` is" if isinstance(dtype, (int, float, bool, type(None))) else "this is"
        fail(f"{shown} not a dtype; write it as a string (\"float16\") or T.float16")
    return _ALIASES.get(str(dtype), str(dtype))


def is_dtype_text(text: str) -> bool:
    """A string that names a dtype tilefarm knows (used to type factory parameters)."""
    name = _ALIASES.get(text, text)
    return name in TILE_DTYPES or name in LOW_BIT or name in ("float64", "int32", "int16", "int64", "uint32", "bool")
