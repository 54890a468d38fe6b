"""Compare a device (emulator) run against the NumPy reference, with dtype-aware tolerances.

Tolerance model (per output, all relative quantities are multiples of a *unit roundoff* u = 2^-p, half an ulp
at 1.0: bfloat16 2^-8, float16 2^-11, tf32 2^-11, float32 2^-24):

* Final store: the reference rounds the exact-in-float32 result once to the output dtype; the device may land
  on the other side of a rounding boundary, so one ulp of the output dtype (2 * u_out) is always allowed.
* Reduction: a K-deep dot product accumulated in a format with unit roundoff u_mid carries an error that
  grows like sqrt(K) * u_mid (probabilistic bound, Higham & Mary 2019; the worst case K * u_mid is never seen
  in practice) times the magnitude of the partial sums. We take 2 * sqrt(K) * u_mid. The partial sums are
  bounded by the output's own scale, so that term is used both as rtol and, times max|expected|, as atol: an
  element near zero after cancellation still carries the rounding error of its large partial sums.
* The intermediate format: Tenstorrent's FPU keeps partial results in its destination registers as bfloat16
  unless fp32 accumulation is on. A float32 output can only come from fp32 accumulation (the examples keep
  an fp32 local accumulator), so its default is float32; every other output defaults to bfloat16
  intermediates. Pass ``intermediate_dtypes`` to override (e.g. "tf32" when fp32 matmul operands are
  truncated to tf32 in the FPU source registers).
* atol also never drops below the smallest normal number of the output dtype: the device flushes denormals.
* NaN must be NaN on both sides (same positions); +/-inf must match exactly; shapes must match exactly.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

__all__ = ["UNIT_ROUNDOFF", "OutputCheck", "VerificationReport", "compare_outputs", "tolerance_for"]

UNIT_ROUNDOFF = {
    "float64": 2.0**-53,
    "float32": 2.0**-24,
    "tf32": 2.0**-11,
    "float16": 2.0**-11,
    "bfloat16": 2.0**-8,
}
# smallest positive normal number per dtype: values below it may be flushed to zero by the device
_SMALLEST_NORMAL = {
    "float64": float(np.finfo(np.float64).tiny),
    "float32": float(np.finfo(np.float32).tiny),
    "tf32": float(np.finfo(np.float32).tiny),
    "float16": float(np.finfo(np.float16).tiny),
    "bfloat16": float(ml_dtypes.finfo(ml_dtypes.bfloat16).tiny),
}
ROUNDING_GROWTH = 2.0  # the lambda in lambda * sqrt(K) * u


def _default_intermediate(dtype: str) -> str:
    return "float32" if dtype in ("float32", "float64") else "bfloat16"


def tolerance_for(dtype: str, reduction_depth: int = 1, intermediate_dtype: str | None = None,
                  scale: float = 1.0) -> tuple[float, float]:
    """(rtol, atol) for an output of ``dtype`` whose elements are ``reduction_depth``-deep sums.

    An element passes when ``|got - expected| <= atol + rtol * |expected|``; ``scale`` is max|expected|.
    """
    if dtype not in UNIT_ROUNDOFF:
        raise ValueError(f"no tolerance model for dtype {dtype!r}; known: {sorted(UNIT_ROUNDOFF)}")
    mid = intermediate_dtype or _default_intermediate(dtype)
    if mid not in UNIT_ROUNDOFF:
        raise ValueError(f"no tolerance model for intermediate dtype {mid!r}")
    depth = max(int(reduction_depth), 1)
    accumulation = ROUNDING_GROWTH * math.sqrt(depth) * UNIT_ROUNDOFF[mid]
    rtol = 2.0 * UNIT_ROUNDOFF[dtype] + accumulation
    atol = max(accumulation * scale, _SMALLEST_NORMAL[dtype])
    return rtol, atol


def _py(value: Any) -> Any:
    """A JSON-friendly scalar (NaN and inf kept as strings)."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else str(value)


@dataclass
class OutputCheck:
    name: str
    shape: tuple[int, ...]
    dtype: str
    ok: bool
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    rtol: float = 0.0
    atol: float = 0.0
    mismatches: int = 0
    size: int = 0
    first_bad_index: tuple[int, ...] | None = None
    expected_value: float | None = None
    got_value: float | None = None
    message: str = ""
    derivation: str = ""     # how the tolerance was derived from the ops on this output's path (precision.py)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["shape"] = list(self.shape)
        d["first_bad_index"] = list(self.first_bad_index) if self.first_bad_index is not None else None
        for key in ("max_abs_err", "max_rel_err", "expected_value", "got_value"):
            d[key] = _py(d[key])
        return d

    def verdict(self) -> dict[str, Any]:
        """What a job shows of this output's check (schemas.jobs.OutputVerdict): pass/fail, the largest errors and
        the tolerance they were held to."""
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "ok": bool(self.ok),
                "max_abs_err": _py(self.max_abs_err), "max_rel_err": _py(self.max_rel_err), "rtol": float(self.rtol),
                "atol": float(self.atol), "mismatches": int(self.mismatches), "size": int(self.size),
                "first_mismatch": self.first_mismatch_text() or None}

    def first_mismatch_text(self) -> str:
        if self.ok:
            return ""
        if self.first_bad_index is None:
            return f"{self.name}: {self.message}"
        index = ", ".join(str(i) for i in self.first_bad_index)
        return (f"{self.name}[{index}]: expected {self.expected_value!r}, got {self.got_value!r} "
                f"({self.mismatches} of {self.size} elements out of tolerance)")


@dataclass
class VerificationReport:
    outputs: list[OutputCheck] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.outputs) and all(o.ok for o in self.outputs)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "outputs": [o.to_dict() for o in self.outputs]}

    def render(self) -> str:
        header = ("output", "shape", "dtype", "max abs", "max rel", "tol (rtol / atol)", "status")
        rows = [header]
        for o in self.outputs:
            rows.append((
                o.name, "x".join(str(d) for d in o.shape) or "scalar", o.dtype,
                f"{o.max_abs_err:.3g}", f"{o.max_rel_err:.3g}", f"{o.rtol:.3g} / {o.atol:.3g}",
                "ok" if o.ok else "FAIL",
            ))
        widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines += [f"  {o.name}: tolerance from {o.derivation}" for o in self.outputs if o.derivation]
        lines += [f"  first mismatch: {o.first_mismatch_text()}" for o in self.outputs if not o.ok]
        lines.append("PASS" if self.ok else "FAIL")
        return "\n".join(lines)


def _dtype_name(array: np.ndarray) -> str:
    return str(np.asarray(array).dtype)


def _check_one(name: str, expected: np.ndarray, got: np.ndarray | None, dtype: str, depth: int,
               intermediate: str | None, path=None) -> OutputCheck:
    exp = np.asarray(expected)
    check = OutputCheck(name=name, shape=tuple(exp.shape), dtype=dtype, ok=False, size=int(exp.size))
    if got is None:
        check.message = "missing from the device outputs"
        return check
    got = np.asarray(got)
    if got.shape != exp.shape:
        check.message = f"shape mismatch: expected {exp.shape}, got {got.shape}"
        return check

    e = exp.astype(np.float64)
    g = got.astype(np.float64)
    finite = np.isfinite(e) & np.isfinite(g)
    scale = float(np.abs(e[finite]).max()) if finite.any() else 0.0
    if dtype.startswith(("int", "uint")):     # integer outputs (indices): exact
        check.rtol, check.atol = 0.0, 0.0
        check.derivation = f"none: {dtype} values, compared exactly"
    elif path is None:
        check.rtol, check.atol = tolerance_for(dtype, depth, intermediate, scale)
    else:                    # the ops on this output's own path (compiler/precision.py)
        check.derivation = path.explain(dtype)
        carried = 0.0 if path.exact else path.terms()
        check.rtol = 0.0 if path.exact else 2.0 * UNIT_ROUNDOFF[dtype] + carried
        check.atol = 0.0 if path.exact else max(carried * scale, _SMALLEST_NORMAL[dtype])

    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: those elements are judged below
        diff = np.where(finite, np.abs(g - e), 0.0)
    nonzero = finite & (e != 0)
    check.max_abs_err = float(diff.max()) if diff.size else 0.0
    check.max_rel_err = float((diff[nonzero] / np.abs(e[nonzero])).max()) if nonzero.any() else 0.0

    nan_e, nan_g = np.isnan(e), np.isnan(g)
    inf_e, inf_g = np.isinf(e), np.isinf(g)
    bad = nan_e != nan_g  # NaN on exactly one side
    bad |= (inf_e | inf_g) & ~(nan_e | nan_g) & (e != g)  # infinities must match, sign included
    bad |= finite & (diff > check.atol + check.rtol * np.abs(e))

    check.mismatches = int(bad.sum())
    check.ok = check.mismatches == 0
    if not check.ok:
        flat = int(np.flatnonzero(bad)[0])  # row-major first
        index = tuple(int(i) for i in np.unravel_index(flat, exp.shape))
        check.first_bad_index = index
        check.expected_value = float(e[index])
        check.got_value = float(g[index])
        check.message = "values out of tolerance"
    return check


def compare_outputs(expected: dict[str, np.ndarray], got: dict[str, np.ndarray], *, dtypes: dict[str, str],
                    reduction_depth: dict[str, int] | None = None,
                    intermediate_dtypes: dict[str, str] | None = None,
                    paths: dict | None = None) -> VerificationReport:
    """Check every expected output against the device's; see the module docstring for the tolerances.

    ``dtypes`` maps output name -> the buffer's declared dtype ("float32", "float16", "bfloat16");
    ``reduction_depth`` maps output name -> K of the reduction behind it (1 for element-wise; default 1);
    ``intermediate_dtypes`` overrides the format partial results are kept in on the device; ``paths`` (output
    name -> compiler.precision.Path) derives an output's tolerance from the ops on its own path instead.
    """
    reduction_depth = reduction_depth or {}
    intermediate_dtypes = intermediate_dtypes or {}
    report = VerificationReport()
    for name in expected:
        dtype = dtypes.get(name) or _dtype_name(expected[name])
        report.outputs.append(_check_one(name, expected[name], got.get(name), dtype,
                                         reduction_depth.get(name, 1), intermediate_dtypes.get(name),
                                         (paths or {}).get(name)))
    return report
