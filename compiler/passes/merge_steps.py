"""Can two steps of a serial loop be merged into one step twice as long? (TTChooseBlocks' K-step re-tiling.)

TTChooseBlocks re-tiles a loop's class (the axis its DRAM copies step along: a GEMM's K, attention's keys) only when
doing a block of 2n in one step leaves the loop's results as doing it in two steps of n. A body that merely
accumulates (gemm with beta = 1, accumulating sums and maxima) merges by construction; an online softmax
(m' = max(m, rowmax(s)); a = exp(c (m - m')); l' = a l + rowsum(exp(c (s - m'))); o' = a o + exp(c (s - m')) @ v)
merges too, by the identity that makes flash attention work, but not by a rule one can read off each op.

So the body is evaluated, on a model of it small enough to run here: every axis of the class has n = 2 elements per
step, every other axis of its buffers 3 (or 1 where the buffer is a column), float64 NumPy with the op registry's
functions. From one random state of the loop's buffers, the two steps over random inputs (the DRAM copies' data)
and the one merged step over the same data must leave every buffer the loop carries (read in the body before it is
written there, or read after the loop) equal to 1e-9. Anything the model does not cover (parts of buffers, a
transposed copy, a write to DRAM, an op outside the registry's element-wise, reduce and gemm ops) answers no.

An index mask in the body (causal attention's `T.if_then_else(row >= col, 0, -inf)`) is an input of the model like
the DRAM copies' data: each element at random its true or its false value (every row's first element true, so that
no row of the first step is wholly masked). `masked_step_is_null` asks the question a trip count that depends on a
block index needs: does a step whose mask is false everywhere leave what the loop carries unchanged? Then keys a
re-tiled loop adds past a row's own trip count change nothing where the mask is false for them.
"""
from __future__ import annotations

import numpy as np
from tvm import tirx

from .. import registry
from ..ir import is_transposed, op_name, region_of, scalar_of

STEP = 2          # elements of the class per step in the model
OTHER = 3         # elements of any other axis


class _Unsupported(Exception):
    pass


def _whole(r) -> bool:
    return tuple(r.extents) == tuple(r.shape) and all(isinstance(s, tirx.IntImm) and int(s) == 0 for s in r.starts)


def _is_global_copy(name: str, regions: list) -> bool:
    return name == "copy" and any(r is not None and r.scope == "global" for r in regions[:2])


def carried_buffers(calls: list, read_after: set[str], masks: dict | None = None) -> set[str]:
    """Buffers the body reads before writing them (their value comes from the previous step), and buffers the body
    writes that are read after the loop. An index mask's tile (`masks`) is written at the top of every step."""
    written: set[str] = set(masks or {})
    carried: set[str] = set()
    for call in calls:
        name = op_name(call)
        regions = [region_of(a) for a in call.args]
        if _is_global_copy(name, regions):
            written.add(regions[0].name)
            continue
        dst = regions[0]
        operands = [] if name in ("zero", "fill") else regions[1:]
        reads = [r.name for r in operands if r is not None and r.scope != "global"]
        if name == "gemm" and scalar_of(call.args[7]) not in (None, 0.0):
            reads.append(dst.name)
        if name in registry.REDUCE and len(call.args) > 3 and bool(call.args[3]):
            reads.append(dst.name)
        carried |= {b for b in reads if b not in written}
        written.add(dst.name)
    return carried | (written & read_after)


class _Model:
    def __init__(self, buffers: dict, axis_in_class, steps: int):
        self.buffers = buffers
        self.axis_in_class = axis_in_class      # (buffer, axis) -> bool
        self.steps = steps                      # class elements of one step = STEP * steps

    def shape(self, name: str) -> tuple:
        out = []
        for axis, extent in enumerate(self.buffers[name]["shape"]):
            if extent == 1:
                out.append(1)
            elif self.axis_in_class(name, axis):
                out.append(STEP * self.steps)
            else:
                out.append(OTHER)
        return tuple(out)


def _run(calls: list, state: dict, model: _Model, inputs: dict, step: int, masks: dict | None = None) -> None:
    """One step of the body on `state` (buffer -> array), the DRAM copies and the index masks taking their part of
    `inputs`."""
    for name in masks or {}:
        full = inputs[name]
        index = tuple(slice(step * n, (step + 1) * n) if model.axis_in_class(name, axis) else slice(None)
                      for axis, n in enumerate(model.shape(name)))
        state[name] = full[index].copy()

    def operand(arg):
        r = region_of(arg)
        if r is None:
            value = scalar_of(arg)
            if value is None:
                raise _Unsupported("an operand that is neither a buffer nor a constant")
            return value
        if r.scope == "global" or not _whole(r):
            raise _Unsupported(f"`{r.name}` in parts or in DRAM")
        return state[r.name]

    for call in calls:
        name = op_name(call)
        regions = [region_of(a) for a in call.args]
        if _is_global_copy(name, regions):
            dst = regions[0]
            if dst.scope == "global" or not _whole(dst):
                raise _Unsupported("a write to DRAM in the loop")
            full = inputs[dst.name]
            index = tuple(slice(step * n, (step + 1) * n) if model.axis_in_class(dst.name, axis) else slice(None)
                          for axis, n in enumerate(model.shape(dst.name)))
            state[dst.name] = full[index].copy()
            continue
        dst = regions[0]
        if dst is None or dst.scope == "global" or not _whole(dst):
            raise _Unsupported("a destination in parts or in DRAM")
        shape = model.shape(dst.name)
        if name in ("copy", "cast"):
            if is_transposed(call):
                raise _Unsupported("a transposed copy")
            value = np.broadcast_to(operand(call.args[1]), shape)
        elif name == "zero":
            value = np.zeros(shape)
        elif name == "fill":
            value = np.full(shape, float(scalar_of(call.args[1])))
        elif name == "gemm":
            a, b, c = operand(call.args[1]), operand(call.args[2]), operand(call.args[3])
            a = a.T if bool(call.args[4]) else a
            b = b.T if bool(call.args[5]) else b
            alpha, beta = float(scalar_of(call.args[6])), float(scalar_of(call.args[7]))
            value = alpha * (a @ b) + (beta * c if beta else 0.0)
        elif name in registry.REDUCE:
            op = registry.TILE_OPS[name]
            value = op.numpy(operand(call.args[1]), axis=(1,), keepdims=True)
            if len(call.args) > 3 and bool(call.args[3]):
                value = op.combine(state[dst.name], value)
        elif name in registry.BINARY:
            value = registry.TILE_OPS[name].numpy(operand(call.args[1]), operand(call.args[2]))
        elif name in registry.UNARY and registry.TILE_OPS[name].numpy is not None:
            x = operand(call.args[1])
            extra = list(call.args[2:])    # TVM's affine form: f(src * scale + bias)
            if len(extra) > 1 and extra[1] is not None:
                x = x * operand(extra[1])
            if extra and extra[0] is not None:
                x = x + operand(extra[0])
            if any(a is not None for a in extra[2:]):
                raise _Unsupported(f"T.tile.{name} with more arguments")
            value = registry.TILE_OPS[name].numpy(x)
        else:
            raise _Unsupported(f"T.tile.{name}")
        state[dst.name] = np.broadcast_to(np.asarray(value, dtype=np.float64), shape).copy()


def _mask_input(rng, shape: tuple, values: tuple, axis_in_class, name: str, all_false: bool) -> np.ndarray:
    true_value, false_value = values
    if all_false:
        return np.full(shape, false_value)
    chosen = rng.uniform(size=shape) < 0.5
    if axis_in_class(name, 1):
        chosen[:, 0] = True
    elif axis_in_class(name, 0):
        chosen[0, :] = True
    return np.where(chosen, true_value, false_value)


def _setup(calls: list, buffers: dict, axis_in_class, read_after: set[str], masks: dict, rng):
    carried = carried_buffers(calls, read_after, masks)
    names = {r.name for call in calls for r in (region_of(a) for a in call.args)
             if r is not None and r.scope != "global"} | set(masks)
    if any(len(buffers[n]["shape"]) != 2 for n in names):
        raise _Unsupported("a buffer that is not 2-D")
    merged_model, split_model = _Model(buffers, axis_in_class, 2), _Model(buffers, axis_in_class, 1)
    start = {n: rng.uniform(-1.0, 1.0, split_model.shape(n)) for n in names
             if split_model.shape(n) == merged_model.shape(n)}
    if any(b in carried and b not in start for b in names):
        raise _Unsupported("a carried buffer along the class: its size changes with the step")
    return carried, names, merged_model, split_model, start


def steps_merge(calls: list, buffers: dict, axis_in_class, read_after: set[str], masks: dict | None = None) -> bool:
    """Do two steps of the loop body `calls` equal one merged step? (module docstring) `masks`: the index masks the
    body reads, buffer name -> (true value, false value)."""
    masks = masks or {}
    try:
        rng = np.random.default_rng(27)
        carried, names, merged_model, split_model, start = _setup(calls, buffers, axis_in_class, read_after, masks,
                                                                  rng)
        inputs = _random_inputs(calls, merged_model, masks, axis_in_class, rng, all_false=False)
        two = {n: v.copy() for n, v in start.items()}
        with np.errstate(all="ignore"):
            _run(calls, two, split_model, inputs, 0, masks)
            _run(calls, two, split_model, inputs, 1, masks)
            one = {n: v.copy() for n, v in start.items()}
            _run(calls, one, merged_model, inputs, 0, masks)
            return all(np.allclose(two[b], one[b], rtol=1e-9, atol=1e-12) for b in carried)
    except (_Unsupported, KeyError, ValueError, TypeError):
        return False


def _random_inputs(calls: list, model, masks: dict, axis_in_class, rng, all_false: bool) -> dict:
    """Random values for every tensor the body reads from DRAM, and the index masks (all false when `all_false`)."""
    inputs = {}
    for call in calls:
        regions = [region_of(a) for a in call.args]
        if _is_global_copy(op_name(call), regions):
            inputs[regions[0].name] = rng.uniform(-1.0, 1.0, model.shape(regions[0].name))
    for name, values in masks.items():
        inputs[name] = _mask_input(rng, model.shape(name), values, axis_in_class, name, all_false)
    return inputs


def masked_step_is_null(calls: list, buffers: dict, axis_in_class, read_after: set[str], masks: dict) -> bool:
    """Does a step whose index masks are false everywhere leave every buffer the loop carries as it was? (From a
    random finite state: a row that has seen keys before.)"""
    if not masks:
        return False
    try:
        rng = np.random.default_rng(28)
        carried, names, _, split_model, start = _setup(calls, buffers, axis_in_class, read_after, masks, rng)
        inputs = _random_inputs(calls, split_model, masks, axis_in_class, rng, all_false=True)
        after = {n: v.copy() for n, v in start.items()}
        with np.errstate(all="ignore"):
            _run(calls, after, split_model, inputs, 0, masks)
            return all(np.allclose(after[b], start[b], rtol=1e-9, atol=1e-12) for b in carried)
    except (_Unsupported, KeyError, ValueError, TypeError):
        return False
