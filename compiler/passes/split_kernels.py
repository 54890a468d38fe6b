"""TTSplitKernels: one lowered function -> the three kernels of a Tenstorrent program.

Every tt.* call belongs to one role (ops.py); CB calls belong to the producer or consumer side of their CB
(input CBs: reader pushes, compute pops; output CBs: compute pushes, writer pops). Each kernel keeps the loop
skeleton around its own calls and the bindings it uses. Records per kernel: tt.kernel_role,
tt.runtime_args (ordered) and tt.compile_time_args (TensorAccessor words per DRAM buffer).
"""
from __future__ import annotations

import tvm
import tvm_ffi
from tvm import tirx

from .. import ops
from ..ir import get_attr, seq, stmts_of
from .partition_work import WORK_ARGS

ROLES = (ops.READER, ops.COMPUTE, ops.WRITER)
CB_SIDES = {("input", "producer"): ops.READER, ("input", "consumer"): ops.COMPUTE,
            ("output", "producer"): ops.COMPUTE, ("output", "consumer"): ops.WRITER,
            ("intermediate", "producer"): ops.COMPUTE, ("intermediate", "consumer"): ops.COMPUTE}
PRODUCER_OPS = {"cb_reserve_back", "cb_push_back"}
CONSUMER_OPS = {"cb_wait_front", "cb_pop_front"}
TENSOR_ACCESSOR_IS_DRAM = 2  # TensorAccessorArgs config word for an interleaved DRAM buffer


def vars_used(node) -> set:
    found = set()
    tvm_ffi.structural_walk(node, [(tvm.ir.Var, lambda v: found.add(v))], order="pre")
    return found


class Splitter:
    def __init__(self, func):
        self.cb_roles = {c["index"]: c["role"] for c in get_attr(func, "tt.cb_config")}

    def role_of(self, stmt) -> str | None:
        found = ops.intrinsic_of(stmt)
        if found is None:
            return None
        spec, args = found
        if spec.name in PRODUCER_OPS | CONSUMER_OPS:
            side = "producer" if spec.name in PRODUCER_OPS else "consumer"
            return CB_SIDES[(self.cb_roles[int(args[0])], side)]
        (role,) = tuple(spec.roles)
        return role

    def filter(self, stmts: list, role: str) -> list:
        kept = []
        for s in stmts:
            if isinstance(s, tirx.Bind):
                kept.append(s)
            elif isinstance(s, tirx.For):
                body = self.filter(stmts_of(s.body), role)
                if any(not isinstance(b, tirx.Bind) for b in body):
                    kept.append(tirx.For(s.loop_var, s.min, s.extent, s.kind, seq(body)))
            elif isinstance(s, tirx.IfThenElse):
                then = self.filter(stmts_of(s.then_case), role)
                other = self.filter(stmts_of(s.else_case), role) if s.else_case is not None else []
                if then or other:
                    kept.append(tirx.IfThenElse(s.condition, seq(then), seq(other) if other else None))
            elif self.role_of(s) == role:
                kept.append(s)
        # drop bindings nothing after them uses (walk backwards so chains of bindings resolve); one walk per stmt
        out: list = []
        used: set = set()
        for s in reversed(kept):
            if isinstance(s, tirx.Bind) and s.var not in used:
                continue
            used |= vars_used(s)
            out.append(s)
        return out[::-1]


def _buffers_moved(body) -> list[str]:
    names = []

    def visit(stmt):
        found = ops.intrinsic_of(stmt)
        if found and found[0].name in ("read_tile", "write_tile"):
            name = str(found[1][2 if found[0].name == "read_tile" else 1].value)
            if name not in names:
                names.append(name)
    tvm_ffi.structural_walk(body, [(tirx.Evaluate, visit)], order="pre")
    return names


@tvm.transform.module_pass(opt_level=0, name="TTSplitKernels")
def split_kernels(mod, ctx):
    (gv, func), = list(mod.functions.items())
    splitter = Splitter(func)
    layouts = get_attr(func, "tt.layout_desc")
    param_order = [str(p.name) for p in func.params]
    kernels = {}
    for role in ROLES:
        stmts = splitter.filter(stmts_of(func.body), role)
        if role == ops.WRITER:
            stmts.append(ops.call("noc_async_write_barrier"))
        body = seq(stmts)
        moved = sorted(_buffers_moved(body), key=param_order.index)
        work = [name for name in WORK_ARGS if any(str(v.name) == name for v in vars_used(body))]
        runtime_args = [{"name": f"{b}_addr", "kind": "buffer_address", "buffer": b} for b in moved] + \
                       [{"name": w, "kind": "work"} for w in work]
        compile_args = [{"kind": "tensor_accessor", "buffer": b,
                         "words": [TENSOR_ACCESSOR_IS_DRAM, layouts[b]["page_bytes"]]} for b in moved]
        kernels[role] = func.with_body(body).with_attrs({
            "global_symbol": role, "tt.kernel_role": role, "tt.runtime_args": runtime_args,
            "tt.compile_time_args": compile_args})
    return tvm.IRModule(kernels, attrs=mod.attrs)
