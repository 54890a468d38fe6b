"""`T.tile.<name>` for the op registry's tile ops that TVM does not define (TVM's TIRx has exp, exp2, log2, sqrt,
reciprocal, ...; the registry adds the Tenstorrent SFPU's other functions).

Each becomes a TIRx tile primitive like TVM's own: an Op `tirx.tile.<name>` of category `tile_primitive` (so it
is a TilePrimitiveCall the passes and the reference interpreter see by name), printed and parsed as
`T.tile.<name>(dst, src)` (src defaults to dst, as for TVM's unary ops) or `T.tile.<name>(dst, a, b)`. Registered once, when the frontend is
imported: the TVMScript parser then accepts it and the printer round-trips it.
"""
from __future__ import annotations

from tvm.ir import Op, register_op_attr
from tvm.tirx.operator.tile_primitive.ops import BinaryOp, UnaryOp
from tvm.tirx.script.builder import tirx as builder

from .. import registry


def _unary(name: str):
    op = Op.get(f"tirx.tile.{name}")
    call_class = type(f"TT_{name}", (UnaryOp,), {"op": op, "__doc__": f"T.tile.{name}(dst, src): the op registry's."})

    def build(dst, src=None, workspace=None, dispatch=None, scope=None, **config):
        src = dst if src is None else src
        return builder.f_insert(call_class(builder._to_region(dst), builder._to_region(src),
                                           workspace=workspace or {}, config=config, dispatch=dispatch, scope=scope))
    build.__name__ = name
    build.__doc__ = call_class.__doc__
    return builder.ScopedOp(build)


def _binary(name: str):
    op = Op.get(f"tirx.tile.{name}")
    call_class = type(f"TT_{name}", (BinaryOp,), {"op": op,
                                                   "__doc__": f"T.tile.{name}(dst, a, b): the op registry's."})

    def build(dst, a, b, workspace=None, dispatch=None, scope=None, **config):
        a, b = (builder._to_region(x) if builder.is_buffer_var(x) else x for x in (a, b))   # a scalar stays one
        return builder.f_insert(call_class(builder._to_region(dst), a, b,
                                           workspace=workspace or {}, config=config, dispatch=dispatch, scope=scope))
    build.__name__ = name
    build.__doc__ = call_class.__doc__
    return builder.ScopedOp(build)


def register() -> None:
    for op in registry.TILE_OPS.values():
        if op.tvm_builtin or hasattr(builder, op.name):
            continue           # the registry checks the rest are unary or binary (compiler/registry/_check)
        full = f"tirx.tile.{op.name}"
        register_op_attr(full, "TIRxOpCategory", "tile_primitive")
        register_op_attr(full, "TScriptPrinterName", op.name, level=20)
        setattr(builder, op.name, (_unary if op.kind == "unary" else _binary)(op.name))


register()
