"""Random valid TileLang kernels over the subset tilefarm accepts, each with its own NumPy evaluation.

A seed gives one kernel (`generate(seed)`): its source, entry, parameters and a function computing every output
from the inputs with NumPy -- written here from the same random choices, independently of the compiler and of its
reference evaluator. The families are the shapes real kernels are made of, and the ones a compiler gets wrong:

- `parts`:     a tensor read and written in several column or row regions (equal parts, permuted between input
               and output: rotary halves, concatenations, swaps), one T.Parallel body for all parts or one loop
               each, copies issued in a random order, several inputs and outputs, every dtype combination;
- `reduce`:    an element-wise expression reduced along rows (sum / max) over a width that may not be a multiple
               of 32, the result written whole or in row halves;
- `gemm`:      a GEMM with an epilogue (scale, ReLU, a residual), its output written whole, in column or row
               parts, in any order;
- `columns`:   column reductions (dim=0) over a height that may not be a multiple of 32;
- `masks`:     element-wise expressions under an index mask (causal, a column bound inside a tile, an
               anti-diagonal), T.if_then_else(condition on indices, expression, 0);
- `heads`:     a 4-D [batch, seq, heads, dim] tensor processed head by head in halves of the head dimension;
- `selects`:   T.if_then_else on data values (comparisons of two inputs or with constants, T.Or / T.Not / &, a
               causal index condition beside), over inputs with zeros and ties;
- `online`:    flash attention's running row max and rescaled row sum over column blocks, carried across a
               T.Pipelined loop, with the copy of the old max before or after the block's other work.

Inputs are uniform in [-1, 1): every expression stays in a range where each op is well defined.
"""
from __future__ import annotations

import random
import textwrap
from dataclasses import dataclass, field
from typing import Callable

import ml_dtypes
import numpy as np

DTYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
ROUNDING = {"float32": 2.0 ** -23, "bfloat16": 2.0 ** -8, "float16": 2.0 ** -11}


@dataclass
class Kernel:
    seed: int
    family: str
    source: str
    entry: str
    params: dict
    dtypes: dict[str, str]                          # every tensor's dtype
    outputs: list[str]
    evaluate: Callable[[dict], dict]                # inputs (as the device holds them) -> expected outputs (float64)
    tolerance: dict[str, tuple[float, float]] = field(default_factory=dict)   # output -> (rtol, atol)
    # inputs -> output -> atol per element, where the error grows with the data (a sum's with the sum of magnitudes)
    bounds: Callable[[dict], dict] | None = None
    # a generator of inputs (np.random.Generator -> name -> array) where uniform ones would miss the point (zeros
    # in masks, ties); None: the emulator's seeded uniform inputs
    inputs: Callable[[np.random.Generator], dict] | None = None

    def held(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The inputs as the device holds them (rounded to their buffers' dtypes)."""
        return {n: np.asarray(a, np.float32).astype(DTYPES[self.dtypes[n]]).astype(np.float64)
                for n, a in inputs.items()}

    def expected(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        out = self.evaluate(self.held(inputs))
        return {n: out[n].astype(DTYPES[self.dtypes[n]]).astype(np.float64) for n in self.outputs}


# ---- element-wise expressions: (TileLang text, NumPy function), over named operands ---------------------------------
def _expr(rng: random.Random, operands: list[str], depth: int) -> tuple[str, Callable]:
    """A random expression of the operands (strings are the TileLang operand texts, e.g. `a[i, j]`)."""
    if depth == 0 or rng.random() < 0.3:
        k = rng.randrange(len(operands))
        return operands[k], (lambda env, k=k: env[k])
    kind = rng.choice(["add", "sub", "mul", "scale", "max", "exp", "sqrt"])
    a_text, a = _expr(rng, operands, depth - 1)
    if kind in ("add", "sub", "mul", "max"):
        b_text, b = _expr(rng, operands, depth - 1)
        if kind == "max":
            return f"T.max({a_text}, {b_text})", lambda env: np.maximum(a(env), b(env))
        sym = {"add": "+", "sub": "-", "mul": "*"}[kind]
        fn = {"add": np.add, "sub": np.subtract, "mul": np.multiply}[kind]
        return f"({a_text} {sym} {b_text})", lambda env: fn(a(env), b(env))
    if kind == "scale":
        c = rng.choice([0.5, 2.0, -1.5, 0.25, 3.0])
        return f"({a_text} * {c})", lambda env: a(env) * c
    if kind == "exp":    # arguments in a few units at most: exp stays small
        return f"T.exp({a_text} * 0.5)", lambda env: np.exp(a(env) * 0.5)
    return f"T.sqrt({a_text} * {a_text} + 1.0)", lambda env: np.sqrt(a(env) * a(env) + 1.0)


def _magnitude(values: list[np.ndarray]) -> float:
    """The largest finite magnitude (a -inf a select keeps must not make every tolerance infinite)."""
    finite = [np.abs(v[np.isfinite(v)]) for v in values]
    return max(1.0, *(float(np.max(f)) for f in finite if f.size))


# ---- family: regions -------------------------------------------------------------------------------------------------
def _parts(rng: random.Random, seed: int) -> Kernel:
    axis = rng.choice([1, 1, 0])                 # column parts (most kernels), or row parts
    nparts = rng.choice([1, 2, 2, 3])
    width = rng.choice([32, 64, 64, 96])
    ragged = nparts == 1 and axis == 1 and rng.random() < 0.5
    n_in, n_out = rng.choice([1, 1, 2]), rng.choice([1, 1, 2])
    dts = [rng.choice(list(DTYPES)) for _ in range(n_in + n_out)]
    ins, outs = [f"X{k}" for k in range(n_in)], [f"Y{k}" for k in range(n_out)]
    rows_per_block = rng.choice([32, 64]) if axis == 1 else width * nparts
    cols = width * nparts if axis == 1 else rng.choice([32, 64, 96])
    if ragged:
        cols -= rng.choice([8, 16, 24])
    M = rows_per_block * rng.choice([1, 2, 3])
    part_w = cols // nparts if axis == 1 else cols
    part_h = rows_per_block if axis == 1 else width
    fused = rng.random() < 0.6
    # output part p of output o = expr over input parts perm[x][p] of each input
    perms = {x: rng.sample(range(nparts), nparts) for x in ins}
    exprs = {}
    for o in outs:
        for p in range(nparts):
            operands = [f"{x}_{perms[x][p]}[i, j]" for x in ins]
            exprs[(o, p)] = _expr(rng, operands, rng.choice([1, 2, 3]))

    def region(p: int) -> str:
        if axis == 1:
            return f"bx * {rows_per_block}:(bx + 1) * {rows_per_block}, {p * part_w}:{(p + 1) * part_w}"
        return f"bx * {rows_per_block} + {p * part_h}:bx * {rows_per_block} + {(p + 1) * part_h}, 0:{cols}"
    lines = []
    for x, dt in zip(ins, dts):
        for p in range(nparts):
            lines.append(f"{x}_{p} = T.alloc_shared(({part_h}, {part_w}), \"{dt}\")")
    for o in outs:
        for p in range(nparts):
            lines.append(f"{o}_{p}l = T.alloc_fragment(({part_h}, {part_w}), T.float32)")
    reads = [(x, p) for x in ins for p in range(nparts)]
    rng.shuffle(reads)
    lines += [f"T.copy({x}[{region(p)}], {x}_{p})" for x, p in reads]
    stores = [(o, p) for o in outs for p in range(nparts)]
    if fused:
        lines.append(f"for i, j in T.Parallel({part_h}, {part_w}):")
        lines += [f"    {o}_{p}l[i, j] = {exprs[(o, p)][0]}" for o, p in stores]
    else:
        for o, p in stores:
            lines += [f"for i, j in T.Parallel({part_h}, {part_w}):", f"    {o}_{p}l[i, j] = {exprs[(o, p)][0]}"]
    writes = list(stores)
    rng.shuffle(writes)
    lines += [f"T.copy({o}_{p}l, {o}[{region(p)}])" for o, p in writes]
    params = ", ".join(f"{t}: T.Tensor(({M}, {cols}), \"{dt}\")" for t, dt in zip(ins + outs, dts))
    source = _wrap(seed, "k", params, f"T.ceildiv({M}, {rows_per_block})", "bx", lines,
                   out_idx=list(range(n_in, n_in + n_out)))

    def evaluate(held):
        out = {}
        for o in outs:
            result = np.zeros((M, cols))
            for p in range(nparts):
                sl = (slice(None), slice(p * part_w, (p + 1) * part_w)) if axis == 1 else None
                blocks = []
                for b in range(M // rows_per_block):
                    def piece(x, q, b=b):
                        a = held[x][b * rows_per_block:(b + 1) * rows_per_block]
                        return a[:, q * part_w:(q + 1) * part_w] if axis == 1 else a[q * part_h:(q + 1) * part_h]
                    env = [piece(x, perms[x][p]) for x in ins]
                    blocks.append(np.broadcast_to(exprs[(o, p)][1](env), env[0].shape))
                for b, value in enumerate(blocks):
                    r0 = b * rows_per_block
                    if axis == 1:
                        result[r0:r0 + rows_per_block, sl[1]] = value
                    else:
                        result[r0 + p * part_h:r0 + (p + 1) * part_h] = value
            out[o] = result
        return out
    return Kernel(seed, "parts", source, "k", {}, dict(zip(ins + outs, dts)), outs, evaluate)


# ---- family: reductions ----------------------------------------------------------------------------------------------
def _reduce(rng: random.Random, seed: int) -> Kernel:
    N = rng.choice([64, 96, 128, 232, 200, 160, 40])
    block_M = rng.choice([32, 64])
    M = block_M * rng.choice([1, 2])
    pool = rng.choice(["sum", "max"])
    din, dout = rng.choice(list(DTYPES)), rng.choice(["float32", "float32", "bfloat16"])
    text, fn = _expr(rng, ["a[i, j]"], rng.choice([1, 2]))
    halves = block_M == 64 and rng.random() < 0.5
    lines = [f"a = T.alloc_shared(({block_M}, {N}), \"{din}\")",
             f"e = T.alloc_fragment(({block_M}, {N}), T.float32)",
             f"r = T.alloc_fragment(({block_M},), T.float32)",
             f"T.copy(X[bx * {block_M}:(bx + 1) * {block_M}, 0:{N}], a)",
             f"for i, j in T.Parallel({block_M}, {N}):",
             f"    e[i, j] = {text}",
             f"T.reduce_{pool}(e, r, dim=1)"]
    if halves:
        lines += ["T.copy(r[32:64], R[bx * 64 + 32:bx * 64 + 64])", "T.copy(r[0:32], R[bx * 64:bx * 64 + 32])"]
    else:
        lines.append(f"T.copy(r, R[bx * {block_M}:(bx + 1) * {block_M}])")
    params = f"X: T.Tensor(({M}, {N}), \"{din}\"), R: T.Tensor(({M},), \"{dout}\")"
    source = _wrap(seed, "k", params, f"T.ceildiv({M}, {block_M})", "bx", lines, out_idx=[1])
    reduce = np.sum if pool == "sum" else np.max

    def evaluate(held):
        return {"R": reduce(np.broadcast_to(fn([held["X"]]), held["X"].shape), axis=1)}

    def bounds(held):   # the FPU reduces operands rounded to TF32 (10 mantissa bits): each term off by 2^-11
        return {"R": 2.0 ** -10 * np.abs(np.broadcast_to(fn([held["X"]]), held["X"].shape)).sum(axis=1)}
    kernel = Kernel(seed, "reduce", source, "k", {}, {"X": din, "R": dout}, ["R"], evaluate, bounds=bounds)
    kernel.tolerance["R"] = (2.0 ** -9, 0.0)
    return kernel


# ---- family: column reductions ----------------------------------------------------------------------------------------
def _columns(rng: random.Random, seed: int) -> Kernel:
    """T.reduce_*(..., dim=0) of an element-wise expression per column block, over a height that may not be a
    multiple of 32 (the padding rows must not count)."""
    M = rng.choice([32, 40, 64, 96, 100])
    block_N = rng.choice([32, 64])
    N = block_N * rng.choice([1, 2, 3])
    pool = rng.choice(["sum", "max"])
    din, dout = rng.choice(list(DTYPES)), rng.choice(["float32", "float32", "bfloat16"])
    text, fn = _expr(rng, ["a[i, j]"], rng.choice([1, 2]))
    lines = [f"a = T.alloc_shared(({M}, {block_N}), \"{din}\")",
             f"e = T.alloc_fragment(({M}, {block_N}), T.float32)",
             f"r = T.alloc_fragment(({block_N},), T.float32)",
             f"T.copy(X[0:{M}, bx * {block_N}:(bx + 1) * {block_N}], a)",
             f"for i, j in T.Parallel({M}, {block_N}):",
             f"    e[i, j] = {text}",
             f"T.reduce_{pool}(e, r, dim=0)",
             f"T.copy(r, R[bx * {block_N}:(bx + 1) * {block_N}])"]
    params = f"X: T.Tensor(({M}, {N}), \"{din}\"), R: T.Tensor(({N},), \"{dout}\")"
    source = _wrap(seed, "k", params, f"T.ceildiv({N}, {block_N})", "bx", lines, out_idx=[1])
    reduce = np.sum if pool == "sum" else np.max

    def values(held):
        return np.broadcast_to(fn([held["X"]]), held["X"].shape)

    def bounds(held):   # TF32 operands through the FPU, as for row reductions
        return {"R": 2.0 ** -10 * np.abs(values(held)).sum(axis=0)}
    kernel = Kernel(seed, "columns", source, "k", {}, {"X": din, "R": dout}, ["R"],
                    lambda held: {"R": reduce(values(held), axis=0)}, bounds=bounds)
    kernel.tolerance["R"] = (2.0 ** -9, 0.0)
    return kernel


# ---- family: index masks ---------------------------------------------------------------------------------------------
def _masks(rng: random.Random, seed: int) -> Kernel:
    """y = T.if_then_else(condition on the element's indices, expression, 0): causal (global row >= column), a
    column bound that cuts a tile, or an anti-diagonal of the block."""
    block_M, block_N = rng.choice([32, 64]), rng.choice([32, 64, 128])
    M, N = block_M * rng.choice([1, 2]), block_N * rng.choice([1, 2])
    dt = rng.choice(list(DTYPES))
    text, fn = _expr(rng, ["x[i, j]"], rng.choice([1, 2]))
    kind = rng.choice(["causal", "column", "anti"])
    bound = rng.randrange(1, N)
    offset = rng.randrange(0, block_M + block_N)
    cond = {"causal": f"by * {block_M} + i >= bx * {block_N} + j",
            "column": f"bx * {block_N} + j < {bound}",
            "anti": f"i + j >= {offset}"}[kind]
    lines = [f"x = T.alloc_shared(({block_M}, {block_N}), \"{dt}\")",
             f"y = T.alloc_fragment(({block_M}, {block_N}), T.float32)",
             f"T.copy(X[by * {block_M}, bx * {block_N}], x)",
             f"for i, j in T.Parallel({block_M}, {block_N}):",
             f"    y[i, j] = T.if_then_else({cond}, {text}, 0.0)",
             f"T.copy(y, Y[by * {block_M}, bx * {block_N}])"]
    params = f"X: T.Tensor(({M}, {N}), \"{dt}\"), Y: T.Tensor(({M}, {N}), \"{dt}\")"
    source = _wrap(seed, "k", params, f"T.ceildiv({N}, {block_N}), T.ceildiv({M}, {block_M})", "(bx, by)", lines,
                   out_idx=[1])

    def evaluate(held):
        rows, cols = np.indices((M, N))
        keep = {"causal": rows >= cols, "column": cols < bound,
                "anti": rows % block_M + cols % block_N >= offset}[kind]
        return {"Y": np.where(keep, np.broadcast_to(fn([held["X"]]), (M, N)), 0.0)}
    return Kernel(seed, "masks", source, "k", {}, {"X": dt, "Y": dt}, ["Y"], evaluate)


# ---- family: GEMM with an epilogue, its output in parts ------------------------------------------------------------------
def _gemm(rng: random.Random, seed: int) -> Kernel:
    block_M, block_N, block_K = rng.choice([32, 64]), rng.choice([32, 64, 128]), rng.choice([32, 64])
    M, N, K = block_M * rng.choice([1, 2]), block_N * rng.choice([1, 2]), block_K * rng.choice([1, 2, 3])
    din = rng.choice(["bfloat16", "bfloat16", "float16", "float32"])
    dout = rng.choice(["float32", "bfloat16"])
    epilogue = rng.choice(["none", "scale", "relu", "residual"])
    split = rng.choice(["whole", "cols", "rows"]) if (block_N >= 64 or block_M >= 64) else "whole"
    if split == "cols" and block_N < 64:
        split = "rows"
    if split == "rows" and block_M < 64:
        split = "cols"
    lines = [f"A_s = T.alloc_shared(({block_M}, {block_K}), \"{din}\")",
             f"B_s = T.alloc_shared(({block_K}, {block_N}), \"{din}\")",
             f"C_l = T.alloc_fragment(({block_M}, {block_N}), T.float32)",
             "T.clear(C_l)",
             f"for k in T.Pipelined({K // block_K}, num_stages=2):",
             f"    T.copy(A[by * {block_M}, k * {block_K}], A_s)",
             f"    T.copy(B[k * {block_K}, bx * {block_N}], B_s)",
             "    T.gemm(A_s, B_s, C_l)"]
    tensors = [("A", (M, K), din), ("B", (K, N), din)]
    if epilogue == "residual":
        tensors.append(("Rs", (M, N), "float32"))
        lines += [f"R_s = T.alloc_shared(({block_M}, {block_N}), \"float32\")",
                  f"T.copy(Rs[by * {block_M}, bx * {block_N}], R_s)"]
    if epilogue != "none":
        body = {"scale": "C_l[i, j] * 0.5", "relu": "T.max(C_l[i, j], 0.0)", "residual": "C_l[i, j] + R_s[i, j]"}
        lines += [f"for i, j in T.Parallel({block_M}, {block_N}):", f"    C_l[i, j] = {body[epilogue]}"]
    tensors.append(("C", (M, N), dout))
    rows, cols = f"by * {block_M}", f"bx * {block_N}"
    if split == "whole":
        lines.append(f"T.copy(C_l, C[{rows}, {cols}])")
    elif split == "cols":
        h = block_N // 2
        parts = [f"T.copy(C_l[:, 0:{h}], C[{rows}:{rows} + {block_M}, {cols}:{cols} + {h}])",
                 f"T.copy(C_l[:, {h}:{block_N}], C[{rows}:{rows} + {block_M}, {cols} + {h}:{cols} + {block_N}])"]
        rng.shuffle(parts)
        lines += parts
    else:
        h = block_M // 2
        parts = [f"T.copy(C_l[0:{h}, :], C[{rows}:{rows} + {h}, {cols}:{cols} + {block_N}])",
                 f"T.copy(C_l[{h}:{block_M}, :], C[{rows} + {h}:{rows} + {block_M}, {cols}:{cols} + {block_N}])"]
        rng.shuffle(parts)
        lines += parts
    params = ", ".join(f"{n}: T.Tensor({shape}, \"{dt}\")" for n, shape, dt in tensors)
    source = _wrap(seed, "k", params, f"T.ceildiv({N}, {block_N}), T.ceildiv({M}, {block_M})", "(bx, by)", lines,
                   out_idx=[len(tensors) - 1])

    def evaluate(held):
        c = held["A"] @ held["B"]
        if epilogue == "scale":
            c = c * 0.5
        elif epilogue == "relu":
            c = np.maximum(c, 0.0)
        elif epilogue == "residual":
            c = c + held["Rs"]
        return {"C": c}
    kernel = Kernel(seed, "gemm", source, "k", {}, {n: dt for n, _, dt in tensors}, ["C"], evaluate)
    # bf16/fp16 operands through the matrix engine at HiFi2 (and TF32 for float32 ones): K products of values < 1
    kernel.tolerance["C"] = (0.05, 0.02 * K ** 0.5)
    return kernel


# ---- family: heads of a 4-D tensor, in halves of the head dimension -------------------------------------------------------
def _heads(rng: random.Random, seed: int) -> Kernel:
    D = rng.choice([64, 128])
    half = D // 2
    B, H, S = rng.choice([1, 2]), rng.choice([1, 2, 3]), rng.choice([32, 64])
    block_S = rng.choice([32, S])
    dt = rng.choice(list(DTYPES))
    x1_text, f1 = _expr(rng, ["x1[i, j]", "x2[i, j]"], 2)
    x2_text, f2 = _expr(rng, ["x1[i, j]", "x2[i, j]"], 2)
    writes = [f"T.copy(y1, Out[bz, s0:s0 + {block_S}, by, 0:{half}])",
              f"T.copy(y2, Out[bz, s0:s0 + {block_S}, by, {half}:{D}])"]
    rng.shuffle(writes)
    reads = [f"T.copy(Q[bz, s0:s0 + {block_S}, by, 0:{half}], x1)",
             f"T.copy(Q[bz, s0:s0 + {block_S}, by, {half}:{D}], x2)"]
    rng.shuffle(reads)
    lines = [f"x1 = T.alloc_shared(({block_S}, {half}), \"{dt}\")",
             f"x2 = T.alloc_shared(({block_S}, {half}), \"{dt}\")",
             f"y1 = T.alloc_fragment(({block_S}, {half}), T.float32)",
             f"y2 = T.alloc_fragment(({block_S}, {half}), T.float32)",
             f"s0 = bx * {block_S}", *reads,
             f"for i, j in T.Parallel({block_S}, {half}):", f"    y1[i, j] = {x1_text}", f"    y2[i, j] = {x2_text}",
             *writes]
    params = f"Q: T.Tensor(({B}, {S}, {H}, {D}), \"{dt}\"), Out: T.Tensor(({B}, {S}, {H}, {D}), \"{dt}\")"
    source = _wrap(seed, "k", params, f"T.ceildiv({S}, {block_S}), {H}, {B}", "(bx, by, bz)", lines, out_idx=[1])

    def evaluate(held):
        q = held["Q"]
        env = [q[..., :half], q[..., half:]]
        return {"Out": np.concatenate([np.broadcast_to(f1(env), env[0].shape),
                                       np.broadcast_to(f2(env), env[0].shape)], axis=-1)}
    return Kernel(seed, "heads", source, "k", {}, {"Q": dt, "Out": dt}, ["Out"], evaluate)


# ---- family: selects on data values ----------------------------------------------------------------------------------------
_CONDITIONS = [   # (TileLang text over x = x[i, j], w = w[i, j], NumPy)
    ("x[i, j] > w[i, j]", lambda x, w: x > w),
    ("x[i, j] <= w[i, j]", lambda x, w: x <= w),
    ("x[i, j] < 0.25", lambda x, w: x < 0.25),
    ("w[i, j] >= -0.5", lambda x, w: w >= -0.5),
    ("x[i, j] != 0", lambda x, w: x != 0),
    ("x[i, j] == 0", lambda x, w: x == 0),
    ("(x[i, j] > 0) & (w[i, j] < 0.5)", lambda x, w: (x > 0) & (w < 0.5)),
    ("T.Or(x[i, j] < -0.5, w[i, j] > 0.5)", lambda x, w: (x < -0.5) | (w > 0.5)),
    ("T.Not(x[i, j] > w[i, j])", lambda x, w: ~(x > w)),
]


def _selects(rng: random.Random, seed: int) -> Kernel:
    """y = T.if_then_else(condition on data values, expression, expression) (key-padding masks, where-style
    selects), sometimes with an index condition beside (causal), over inputs where a quarter of x is exactly 0
    (masks given as tensors) and comparisons of the two inputs are exact in every format they pass through."""
    block_M, block_N = rng.choice([32, 64]), rng.choice([32, 64])
    M, N = block_M * rng.choice([1, 2]), block_N * rng.choice([1, 2])
    dt = rng.choice(list(DTYPES))
    cond_text, cond = rng.choice(_CONDITIONS)
    causal = rng.random() < 0.3
    if causal:
        cond_text = f"({cond_text}) & (by * {block_M} + i >= bx * {block_N} + j)"
    a_text, a = _expr(rng, ["x[i, j]", "w[i, j]"], rng.choice([0, 1, 2]))
    b_text, b = rng.choice([(None, None), _expr(rng, ["x[i, j]", "w[i, j]"], rng.choice([0, 1]))])
    if b_text is None:
        b_text, b = rng.choice([("0.0", lambda env: 0.0), ("-T.infinity(T.float32)", lambda env: -np.inf)])
    lines = [f"x = T.alloc_shared(({block_M}, {block_N}), \"{dt}\")",
             f"w = T.alloc_shared(({block_M}, {block_N}), \"{dt}\")",
             f"y = T.alloc_fragment(({block_M}, {block_N}), T.float32)",
             f"T.copy(X[by * {block_M}, bx * {block_N}], x)",
             f"T.copy(W[by * {block_M}, bx * {block_N}], w)",
             f"for i, j in T.Parallel({block_M}, {block_N}):",
             f"    y[i, j] = T.if_then_else({cond_text}, {a_text}, {b_text})",
             f"T.copy(y, Y[by * {block_M}, bx * {block_N}])"]
    params = (f"X: T.Tensor(({M}, {N}), \"{dt}\"), W: T.Tensor(({M}, {N}), \"{dt}\"), "
              f"Y: T.Tensor(({M}, {N}), \"float32\")")
    source = _wrap(seed, "k", params, f"T.ceildiv({N}, {block_N}), T.ceildiv({M}, {block_M})", "(bx, by)", lines,
                   out_idx=[2])

    def inputs(gen: np.random.Generator) -> dict:
        # values on a grid of 1/64: exact in every format (and their differences too), zeros and ties included
        x = gen.integers(-64, 65, (M, N)) / 64.0
        x[gen.random((M, N)) < 0.25] = 0.0
        w = np.where(gen.random((M, N)) < 0.2, x, gen.integers(-64, 65, (M, N)) / 64.0)
        return {"X": x.astype(np.float32), "W": w.astype(np.float32)}

    def evaluate(held):
        x, w = held["X"], held["W"]
        keep = cond(x, w)
        if causal:
            rows, cols = np.indices((M, N))
            keep = keep & (rows >= cols)
        return {"Y": np.where(keep, np.broadcast_to(a([x, w]), (M, N)), np.broadcast_to(b([x, w]), (M, N)))}
    return Kernel(seed, "selects", source, "k", {}, {"X": dt, "W": dt, "Y": "float32"}, ["Y"], evaluate,
                  inputs=inputs)


# ---- family: online softmax statistics, carried across a loop ---------------------------------------------------------------
def _online(rng: random.Random, seed: int) -> Kernel:
    """The running row max and rescaled row sum of flash attention over column blocks (T.Pipelined), state carried
    in fragments from one iteration to the next; the statements in one of the orders kernels write them (the copy
    of the old max first or later), exp or exp2 with a scale."""
    block_M, block_N = rng.choice([32, 64]), rng.choice([32, 64, 128])
    steps = rng.choice([1, 2, 3, 4])
    M, N = block_M * rng.choice([1, 2]), block_N * steps
    dt = rng.choice(list(DTYPES))
    stages = rng.choice([1, 2])
    scale = rng.choice([1.0, 0.5, 1.44269504])
    use_exp2 = rng.random() < 0.5
    exp = "T.exp2" if use_exp2 else "T.exp"
    np_exp = np.exp2 if use_exp2 else np.exp
    text, fn = _expr(rng, ["x[i, j]"], rng.choice([0, 1]))
    early_copy = rng.random() < 0.5
    lines = [f"x = T.alloc_shared(({block_M}, {block_N}), \"{dt}\")",
             f"e = T.alloc_fragment(({block_M}, {block_N}), T.float32)",
             f"m = T.alloc_fragment(({block_M},), T.float32)",
             f"m_prev = T.alloc_fragment(({block_M},), T.float32)",
             f"t = T.alloc_fragment(({block_M},), T.float32)",
             f"s = T.alloc_fragment(({block_M},), T.float32)",
             "T.fill(m, -T.infinity(T.float32))",
             "T.fill(s, 0.0)",
             f"for k in T.Pipelined({steps}, num_stages={stages}):",
             f"    T.copy(X[bx * {block_M}, k * {block_N}], x)"]
    body = [f"for i, j in T.Parallel({block_M}, {block_N}):", f"    e[i, j] = {text}"]
    if early_copy:
        lines += ["    T.copy(m, m_prev)"] + ["    " + b for b in body]
    else:
        lines += ["    " + b for b in body] + ["    T.copy(m, m_prev)"]
    lines += ["    T.reduce_max(e, m, dim=1, clear=False)",
              f"    for i, j in T.Parallel({block_M}, {block_N}):",
              f"        e[i, j] = {exp}((e[i, j] - m[i]) * {scale})",
              "    T.reduce_sum(e, t, dim=1)",
              f"    for i in T.Parallel({block_M}):",
              f"        s[i] = s[i] * {exp}((m_prev[i] - m[i]) * {scale}) + t[i]",
              f"T.copy(s, S[bx * {block_M}:(bx + 1) * {block_M}])",
              f"T.copy(m, Mx[bx * {block_M}:(bx + 1) * {block_M}])"]
    params = (f"X: T.Tensor(({M}, {N}), \"{dt}\"), S: T.Tensor(({M},), \"float32\"), "
              f"Mx: T.Tensor(({M},), \"float32\")")
    source = _wrap(seed, "k", params, f"T.ceildiv({M}, {block_M})", "bx", lines, out_idx=[1, 2])

    def evaluate(held):
        v = np.broadcast_to(fn([held["X"]]), held["X"].shape)
        m = v.max(axis=1)
        return {"Mx": m, "S": np_exp((v - m[:, None]) * scale).sum(axis=1)}
    kernel = Kernel(seed, "online", source, "k", {}, {"X": dt, "S": "float32", "Mx": "float32"}, ["S", "Mx"],
                    evaluate)
    # the max: one TF32 rounding; the sum: N terms of an exp (the SFPU's, to a few bf16 ulps) in [0, 1]
    kernel.tolerance["Mx"] = (2.0 ** -10, 0.0)
    kernel.tolerance["S"] = (2.0 ** -6, 0.0)
    return kernel


FAMILIES = {"parts": _parts, "reduce": _reduce, "columns": _columns, "masks": _masks, "gemm": _gemm,
            "heads": _heads, "selects": _selects, "online": _online}
WEIGHTS = {"parts": 4, "reduce": 2, "columns": 1, "masks": 2, "gemm": 2, "heads": 2, "selects": 2, "online": 2}


def _wrap(seed: int, entry: str, params: str, grid: str, names: str, lines: list[str], out_idx: list[int]) -> str:
    body = textwrap.indent("\n".join(lines), " " * 12)
    return (f"# generated by tests/fuzz/kernelgen.py, seed {seed}\n"
            "import tilelang\nimport tilelang.language as T\n\n\n"
            f"@tilelang.jit(out_idx={out_idx})\n"
            f"def {entry}():\n"
            "    @T.prim_func\n"
            f"    def main({params}):\n"
            f"        with T.Kernel({grid}, threads=128) as {names}:\n"
            f"{body}\n"
            "    return main\n")


def generate(seed: int) -> Kernel:
    rng = random.Random(seed)
    family = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
    kernel = FAMILIES[family](rng, seed)
    for name in kernel.outputs:
        kernel.tolerance.setdefault(name, (0.0, 0.0))
    return kernel


def tolerance(kernel: Kernel, name: str, expected: np.ndarray, inputs: dict) -> tuple[float, object]:
    """(rtol, atol) for one output: the generator's own for a GEMM or a reduction; else a few roundings of the
    narrowest dtype on the path, relative to the output's magnitude (an element in the wrong place is off by the
    data's scale)."""
    rtol, atol = kernel.tolerance.get(name, (0.0, 0.0))
    unit = max(ROUNDING[dt] for dt in kernel.dtypes.values())
    scale = _magnitude([expected])
    atol = max(atol, 8 * unit * scale, 1e-5 * scale)
    if kernel.bounds is not None:
        atol = atol + kernel.bounds(kernel.held(inputs))[name]
    return max(rtol, 8 * unit, 1e-5), atol
