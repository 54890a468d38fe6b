"""`T.reduce_max` / `T.reduce_sum` (row reductions)."""
from __future__ import annotations

from .diagnostics import fail


def lower_reduce(rec, kind, buffer, out, dim, clear, location) -> None:
    fail(f"T.reduce_{kind} is not lowered to Tenstorrent yet (the tile pipeline has no reduction op)",
         hint="row reductions need reduce_tile support in the compute lowering", location=location)
