"""TTHoistInits: engine inits out of loops, and dropped where the engine is already configured that way.

Tensorize gives every op its own init (copy_init, exp_tile_init, unary_bcast_init ...), so a group loop over DST
slots re-programs the unpacker, the FPU and the SFPU once per tile: on the math RISC that costs more than the tile's
arithmetic. The compute engine keeps four independent configurations, each changed only by its own calls:

    fpu     the unpacker/FPU op (copy, transpose, matmul, eltwise, broadcast, reduce) and its operands' formats
    sfpu    the SFPU function (exp_tile_init, binop_with_scalar_tile_init, ...)
    unpack  the source registers' data formats (reconfig_data_format)
    pack    the packer's output format (pack_reconfig_data_format)

as ttnn's kernels rely on (copy_init and exp_tile_init once, then copy_tile + exp_tile per tile). Two rewrites:

1. hoisting: a loop whose body (at its top level) holds exactly one init of a kind, with arguments that do not
   depend on the loop, gets that init once before the loop (every iteration configured the engine the same way);
2. elision: walking the program in order with the configuration each engine is known to be in (loops to a fixed
   point, branches joined), an init that sets what is already set is dropped.

reduce_init also sets the packer's edge mask (reduce_uninit clears it), so it is never moved or dropped. The
emulator checks every op against the configuration it runs with, so a wrong elision fails verification loudly.
"""
from __future__ import annotations

from tvm import tirx

from .. import attrs, ops, registry
from ..ir import seq, stmts_of

# SFPU inits that make another function's configuration (mul_binary_tile_init: add_binary_tile's): keyed by that
# function's init, so one configures the engine for both
_SAME_SFPU_CONFIG = {fn.init: by.init for fn in registry.SFPU_FUNCTIONS if fn.init_opcode
                     for by in registry.SFPU_FUNCTIONS if by.opcode == fn.init_opcode and by.init != fn.init}
NEVER_MOVED = ("reduce_init_sum", "reduce_init_max", "reduce_block_max_row_init")
STARTUP = ("hw_startup_matmul", "hw_startup_binary", "hw_startup_unary")
KINDS = ("fpu", "sfpu", "unpack", "pack")
UNINITS = ("reduce_uninit", "reduce_block_max_row_uninit")
FPU_OPS = ("matmul_tiles", "matmul_block", "copy_tile", "transpose_tile", "add_tiles", "sub_tiles", "mul_tiles",
           "reduce_tile_sum", "reduce_tile_max", "reduce_block_max_row")
NOT_ENGINE = ("cb_", "tile_regs_", "runtime_arg", "pack_reconfig_l1_acc", "read_tile", "write_tile", "noc_", "mcast_",
              "write_rows", "zero_tile", "fill_reduce_scaler", "compute_", "write_barrier", "page_", "pack_relu_")


def uses_kind(name: str) -> set[str]:
    """Which configurations an (non-init) intrinsic runs with."""
    if init_kind(name) is not None or name in STARTUP or name in UNINITS or name.startswith(NOT_ENGINE):
        return set()
    if name in ("pack_tile", "pack_tile_at"):
        return {"pack"}
    if name in FPU_OPS or "_tiles_bcast_" in name or name.startswith("unary_bcast_") \
            or name.endswith("_reuse_dest_tiles"):
        return {"fpu", "unpack"}
    return {"sfpu"}


def init_kind(name: str) -> str | None:
    """Which configuration an intrinsic sets (None: it sets none)."""
    if name in ("reconfig_data_format", "reconfig_data_format_srca", "reconfig_data_format_srcb"):
        return "unpack"
    if name == "pack_reconfig_data_format":
        return "pack"
    if name.endswith("_tile_init") or name == "copy_dest_values_init" or name.startswith("sfpu_reduce_init_"):
        return "sfpu"
    if name.endswith("_init") or name in NEVER_MOVED:
        return "fpu"
    return None


class _Hoister:
    def __init__(self, formats: dict[int, str]):
        self.formats = formats
        # memos keyed by the node (_handle: every access of a field, stmt.body, makes a new Python object of the
        # same node, so id() would miss), the nodes kept alive beside their answers: loops nest and every level's
        # fixed point re-walks its body
        self._after: dict = {}
        self._children: dict = {}
        self._kinds: dict = {}
        self._specs: dict = {}
        self._inits: dict = {}

    def spec(self, node):
        """ops.intrinsic_of, once per node."""
        if _handle(node) not in self._specs:
            self._specs[_handle(node)] = (node, ops.intrinsic_of(node))
        return self._specs[_handle(node)][1]

    # ---- what an init sets ----------------------------------------------------------------------------------------
    def init_of(self, stmt) -> tuple[str, tuple] | None:
        """(kind, key) of an init statement: the key is what the engine ends up configured as (CB arguments by
        their data format: the emulator and the LLKs configure by format)."""
        if _handle(stmt) in self._inits:
            return self._inits[_handle(stmt)][1]
        answer = self._init_of(stmt)
        self._inits[_handle(stmt)] = (stmt, answer)
        return answer

    def _init_of(self, stmt):
        found = self.spec(stmt) if isinstance(stmt, tirx.Evaluate) else None
        if found is None:
            return None
        spec, args = found
        kind = init_kind(spec.name)
        if kind is None:
            return None
        key = [_SAME_SFPU_CONFIG.get(spec.name, spec.name)]
        for arg_kind, value in zip(spec.args, args):
            if arg_kind == "cb" and isinstance(value, tirx.IntImm):
                key.append(self.formats.get(int(value), f"cb{int(value)}"))
            elif isinstance(value, (tirx.IntImm, tirx.FloatImm)):
                key.append(value.value)
            elif isinstance(value, tvm_str_types()):
                key.append(str(value))
            else:
                return kind, None     # depends on a variable: sets the kind to something we cannot name
        return kind, tuple(key)

    # ---- 1. hoisting ---------------------------------------------------------------------------------------------
    def hoist(self, stmt):
        if isinstance(stmt, tirx.SeqStmt):
            return seq([self.hoist(s) for s in stmts_of(stmt)])
        if isinstance(stmt, tirx.IfThenElse):
            return tirx.IfThenElse(stmt.condition, self.hoist(stmt.then_case),
                                   self.hoist(stmt.else_case) if stmt.else_case is not None else None)
        if not isinstance(stmt, tirx.For):
            return stmt
        body = stmts_of(self.hoist(stmt.body))
        flat = []                        # an inner loop's hoisted inits sit in a SeqStmt of its own
        for s in body:
            flat += stmts_of(s) if isinstance(s, tirx.SeqStmt) else [s]
        body = flat
        bound = {stmt.loop_var} | {s.var for s in body if isinstance(s, tirx.Bind)}
        by_kind: dict[str, list] = {}
        nested: set[str] = set()
        for s in body:
            found = self.init_of(s)
            if found is not None:
                by_kind.setdefault(found[0], []).append(s)
            elif not isinstance(s, tirx.Evaluate):
                nested |= self.kinds_inside(s)
        hoisted, dropped = [], []
        for kind, inits in by_kind.items():
            # several inits that all configure the engine the same way are one (copy_init of two fp32 CBs)
            if kind in nested or (len(inits) != 1 and len({self.init_of(s)[1] for s in inits}) != 1) \
                    or self.init_of(inits[0])[1] is None and len(inits) != 1:
                continue
            init = inits[0]
            name = self.spec(init)[0].name
            if name in NEVER_MOVED or _uses_any(init, bound):
                continue
            before = body[:next(k for k, s in enumerate(body) if s.same_as(init))]
            if any(kind in self.kinds_used(s) for s in before):
                continue                 # an op ahead of it in the body runs on the configuration from before
            hoisted.append(init)
            dropped += inits
        if not hoisted:
            return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, seq(body))
        rest = [s for s in body if not any(s.same_as(h) for h in dropped)]
        loop = tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, seq(rest))
        return tirx.SeqStmt(hoisted + [loop])

    def kinds_inside(self, stmt) -> set[str]:
        if _handle(stmt) in self._kinds:
            return self._kinds[_handle(stmt)][1]
        out: set[str] = set()

        def visit(node):
            found = self.init_of(node)
            if found is not None:
                out.add(found[0])
            spec = self.spec(node)
            if spec is not None and spec[0].name in STARTUP:
                out.update(KINDS)
        for node in _evaluates(stmt):
            visit(node)
        self._kinds[_handle(stmt)] = (stmt, out)
        return out

    def kinds_used(self, stmt) -> set[str]:
        out: set[str] = set()
        for node in _evaluates(stmt):
            spec = self.spec(node)
            if spec is not None:
                out |= uses_kind(spec[0].name)
        return out

    # ---- 2. elision ------------------------------------------------------------------------------------------------
    def after(self, stmt, state: dict) -> dict:
        """The configuration after `stmt` run from `state` (what elide returns beside the statement, without building
        it: a loop's fixed point asks this of its body up to 8 times, at every level of nesting)."""
        key = (_handle(stmt), tuple(sorted(state.items())))
        if key not in self._after:
            self._after[key] = (stmt, self._after_uncached(stmt, state))
        return self._after[key][1]

    def _after_uncached(self, stmt, state: dict) -> dict:
        if isinstance(stmt, tirx.Evaluate):
            spec = self.spec(stmt)
            if spec is not None and spec[0].name in STARTUP:
                return {}
            found = self.init_of(stmt)
            if found is None or self.redundant(stmt, state):
                return state
            kind, key = found
            return {**state, kind: key}
        if isinstance(stmt, tirx.SeqStmt):
            for s in self.children(stmt):
                state = self.after(s, state)
            return state
        if isinstance(stmt, tirx.For):
            return _meet(state, self.after(stmt.body, self.loop_entry(stmt, state)))
        if isinstance(stmt, tirx.IfThenElse):
            return _meet(self.after(stmt.then_case, state),
                         self.after(stmt.else_case, state) if stmt.else_case is not None else state)
        if self.kinds_inside(stmt):      # a statement we do not look into that configures an engine
            return {}
        return state

    def redundant(self, stmt, state: dict) -> bool:
        """An init that sets its engine to what `state` has it set to already (reduce_init never: its edge mask)."""
        found = self.init_of(stmt) if isinstance(stmt, tirx.Evaluate) else None
        if found is None or found[1] is None or state.get(found[0]) != found[1]:
            return False
        return self.spec(stmt)[0].name not in NEVER_MOVED

    def loop_entry(self, loop: tirx.For, state: dict) -> dict:
        """The configuration at the top of every iteration of `loop` entered from `state`: a fixed point."""
        entry = state
        for _ in range(8):
            joined = _meet(state, self.after(loop.body, entry))
            if joined == entry:
                return entry
            entry = joined
        return {}

    def children(self, stmt) -> list:
        """stmts_of a SeqStmt, once per node."""
        if _handle(stmt) not in self._children:
            self._children[_handle(stmt)] = (stmt, stmts_of(stmt))
        return self._children[_handle(stmt)][1]

    def without_redundant(self, stmt, state: dict):
        """`stmt` run from `state` without the inits that set what is set already (_NOTHING: nothing is left)."""
        if isinstance(stmt, tirx.Evaluate):
            return _NOTHING if self.redundant(stmt, state) else stmt
        if isinstance(stmt, tirx.SeqStmt):
            out = []
            for s in self.children(stmt):
                s2 = self.without_redundant(s, state)
                state = self.after(s, state)
                if s2 is not _NOTHING:
                    out.append(s2)
            return seq(out) if out else _NOTHING
        if isinstance(stmt, tirx.For):
            body = self.without_redundant(stmt.body, self.loop_entry(stmt, state))
            body = body if body is not _NOTHING else tirx.Evaluate(0)
            return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body)
        if isinstance(stmt, tirx.IfThenElse):
            then = self.without_redundant(stmt.then_case, state)
            other = self.without_redundant(stmt.else_case, state) if stmt.else_case is not None else None
            then = then if then is not _NOTHING else tirx.Evaluate(0)
            if other is _NOTHING:
                other = None
            return tirx.IfThenElse(stmt.condition, then, other)
        return stmt


_NOTHING = object()


def _handle(node) -> int:
    """The node's address: the same for every Python object of one node (TVM nodes are immutable; each memo keeps
    its node alive, so the address is not reused for another one while the memo lives)."""
    return node.__chandle__()


def tvm_str_types():
    import tvm
    return (tvm.ir.StringImm, str)


def _meet(a: dict, b: dict) -> dict:
    return {k: v for k, v in a.items() if k in b and b[k] == v and v is not None}


def _evaluates(stmt) -> list:
    import tvm_ffi
    out: list = []
    tvm_ffi.structural_walk(stmt, [(tirx.Evaluate, out.append)], order="pre")
    return out


def _uses_any(node, variables: set) -> bool:
    import tvm_ffi
    found: list = []
    tvm_ffi.structural_walk(node, [(tirx.Var, lambda v: found.append(any(v.same_as(x) for x in variables)))],
                            order="pre")
    return any(found)


def hoist_inits_in(func: tirx.PrimFunc) -> tirx.PrimFunc:
    formats = {int(c["index"]): c["data_format"] for c in attrs.CB_CONFIG.get(func)}
    h = _Hoister(formats)
    body = h.hoist(func.body)
    body = h.without_redundant(body, {})
    return func.with_body(body)


@tirx.transform.prim_func_pass(opt_level=0, name="TTHoistInits")
def hoist_inits(func, mod, ctx):
    return hoist_inits_in(func)
