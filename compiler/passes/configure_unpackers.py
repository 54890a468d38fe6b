"""TTConfigureUnpackers: every FPU op reads its CBs with the unpackers configured for their data formats.

An unpacker converts L1 data by the source format in its configuration registers, set by compute_kernel_hw_startup
and the reconfig_data_format calls, not by the CB an op names ([LLK] llk_unpack_A.h / llk_unpack_AB.h program only
the L1 address per call): a float32 CB unpacked while srcA is configured for bfloat16 reads its bytes as bfloat16
(the emulator fails such an op, ttemu check_unpacker). Which source reads which CB is each call's fact in
compiler/ops.py (`unpacks`; `configures` for the calls that set the sources' formats):

    srcA  copy_tile, transpose_tile, the first CB of add/sub/mul_tiles and their broadcasts, a row max's data, the
          scaler of a row sum, and in1 of matmul_tiles / matmul_block (the LLK swaps the matmul operands)
    srcB  the second CB of the binary ops (the broadcast operand), a row max's scaler, a row sum's data, in0 of a
          matmul, unary_bcast's CB

Walking each compute program in order with the formats srcA and srcB are known to hold (loops to a fixed point,
branches joined), a reconfiguration goes in right before an op whose CB has another format than its source holds:
reconfig_data_format(a, b) when both differ, else reconfig_data_format_srca / _srcb for the one. A program that
configures its unpackers already gets nothing (byte-identical). If anything went in, TTHoistInits runs again (a loop's
one reconfiguration, the same every iteration, moves before the loop), and the walk checks the result.

A loop whose first iteration is entered with other formats than its body leaves behind (attention's key loop after
the previous block's float32 normalization; a row loop whose body ends on the formats its first op reads) would
reconfigure every iteration for the sake of the first. Where the formats the body ends with are loop-invariant on the
back edge (the body run from them ends on them again) and fewer reconfigurations go in per iteration when the body
starts from them, one reconfiguration to those formats goes right before the loop instead (`preconfigure`): it runs
once a loop entry, and the iterations start configured.
"""
from __future__ import annotations

from tvm import tirx

from .. import attrs, ops
from ..errors import CompileError
from ..ir import seq, stmts_of
from .hoist_inits import _handle, hoist_inits_in, init_kind

State = tuple  # (srcA's format or None: unknown, srcB's)


class _Configurer:
    def __init__(self, formats: dict[int, str]):
        self.formats = formats
        self.inserted = 0
        self._after: dict = {}           # (node, state) -> (node kept alive, state after it)
        self._plans: dict = {}           # (loop, state) -> (loop kept alive, preconfigure's answer)
        self._counts: dict = {}          # (node, state) -> (node kept alive, reconfigurations it gets)

    def fmt(self, value) -> str | None:
        return self.formats.get(int(value)) if isinstance(value, tirx.IntImm) else None

    def walk(self, stmt, state: State) -> tuple[object, State]:
        if isinstance(stmt, tirx.Evaluate):
            s2, state = self.evaluate(stmt, state)
            self.inserted += s2 is not stmt
            return s2, state
        if isinstance(stmt, tirx.SeqStmt):
            out = []
            for s in stmts_of(stmt):
                s2, state = self.walk(s, state)
                if isinstance(s2, tirx.SeqStmt) and isinstance(s, tirx.Evaluate) and out and _fpu_init(out[-1]):
                    # the reconfiguration before the op's init (reconfig_data_format_srca(cb); copy_init(cb)), as
                    # ttnn's kernels order them: an init neither unpacks nor reconfigures a source
                    reconfig, op = stmts_of(s2)
                    out[-1:] = [reconfig, out[-1], op]
                    continue
                out += stmts_of(s2) if isinstance(s2, tirx.SeqStmt) else [s2]
            return seq(out), state
        if isinstance(stmt, tirx.For):
            call, state = self.preconfigure(stmt, state)
            body, after = self.walk(stmt.body, self.loop_entry(stmt, state))
            loop = tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body)
            if call is None:
                return loop, _meet(state, after)
            self.inserted += 1
            return tirx.SeqStmt([call, loop]), _meet(state, after)
        if isinstance(stmt, tirx.IfThenElse):
            then, s1 = self.walk(stmt.then_case, state)
            other, s2 = self.walk(stmt.else_case, state) if stmt.else_case is not None else (None, state)
            return tirx.IfThenElse(stmt.condition, then, other), _meet(s1, s2)
        if _unpacks_inside(stmt):
            raise CompileError(f"TTConfigureUnpackers: an unpacking op inside a {type(stmt).__name__}, which this "
                               "pass does not walk", stage="LowerCompute")
        return stmt, state

    def loop_entry(self, loop, state: State) -> State:
        """The formats at the top of every iteration: a fixed point (a meet only forgets, so it settles)."""
        entry = state
        while True:
            joined = _meet(entry, self.after(loop.body, entry))
            if joined == entry:
                return entry
            entry = joined

    def preconfigure(self, loop, state: State) -> tuple[object, State]:
        """(a reconfiguration to put before `loop` or None, the formats the loop is then entered with): the formats
        the body ends with where the loop's entry does not know them, when they are loop-invariant on the back edge
        and the body then needs fewer reconfigurations (weighted by trip counts) than from the plain entry."""
        key = (_handle(loop), state)
        if key in self._plans:
            return self._plans[key][1]
        plan = None, state
        entry = self.loop_entry(loop, state)
        end = self.after(loop.body, entry)
        ahead = tuple(e if e is not None else x for e, x in zip(entry, end))
        if ahead != entry and _trips(loop) > 1 and _meet(ahead, self.after(loop.body, ahead)) == ahead \
                and self.reconfigs(loop.body, ahead) < self.reconfigs(loop.body, entry):
            # the CB the body first reads on each source set ahead of the loop names its format
            cbs = [self.first_cb(loop.body, source, ahead[source]) if ahead[source] != state[source] else None
                   for source in (0, 1)]
            call = _reconfig_call(*cbs)
            if call is not None:
                plan = call, tuple(ahead[s] if cbs[s] is not None else state[s] for s in (0, 1))
        self._plans[key] = (loop, plan)
        return plan

    def reconfigs(self, stmt, state: State) -> float:
        """How many reconfigurations walking `stmt` from `state` puts in, each counted as often as it runs (a loop's
        body times its trip count; 2 for a trip count not known)."""
        key = (_handle(stmt), state)
        if key not in self._counts:
            if isinstance(stmt, tirx.Evaluate):
                out = float(self.evaluate(stmt, state)[0] is not stmt)
            elif isinstance(stmt, tirx.SeqStmt):
                out = 0.0
                for s in stmts_of(stmt):
                    out += self.reconfigs(s, state)
                    state = self.after(s, state)
            elif isinstance(stmt, tirx.For):
                call, entered = self.preconfigure(stmt, state)
                out = (call is not None) + _trips(stmt) * self.reconfigs(stmt.body, self.loop_entry(stmt, entered))
            elif isinstance(stmt, tirx.IfThenElse):
                out = max(self.reconfigs(stmt.then_case, state),
                          self.reconfigs(stmt.else_case, state) if stmt.else_case is not None else 0.0)
            else:
                out = 0.0
            self._counts[key] = (stmt, out)
        return self._counts[key][1]

    def first_cb(self, stmt, source: int, fmt: str):
        """The first CB of format `fmt` an op (or a reconfiguration) in `stmt` reads on `source` (0: srcA, 1: srcB),
        in program order; None if there is none."""
        for node in _evaluates_in_order(stmt):
            found = ops.intrinsic_of(node)
            if found is None:
                continue
            spec, args = found
            sources = spec.unpacks if spec.unpacks is not None else \
                spec.configures if init_kind(spec.name) == "unpack" else None     # an op, or a reconfiguration
            index = sources[source] if sources is not None else None
            if index is not None and self.fmt(args[index]) == fmt:
                return args[index]
        return None

    def after(self, stmt, state: State) -> State:
        """The formats after `stmt` run from `state` with its reconfigurations in (walk's state, without building
        the statement; memoized, as loops nest and each level's fixed point asks it of its body)."""
        key = (_handle(stmt), state)
        if key not in self._after:
            if isinstance(stmt, tirx.Evaluate):
                out = self.evaluate(stmt, state)[1]
            elif isinstance(stmt, tirx.SeqStmt):
                out = state
                for s in stmts_of(stmt):
                    out = self.after(s, out)
            elif isinstance(stmt, tirx.For):
                entered = self.preconfigure(stmt, state)[1]
                out = _meet(entered, self.after(stmt.body, self.loop_entry(stmt, entered)))
            elif isinstance(stmt, tirx.IfThenElse):
                out = _meet(self.after(stmt.then_case, state),
                            self.after(stmt.else_case, state) if stmt.else_case is not None else state)
            else:
                out = state
            self._after[key] = (stmt, out)
        return self._after[key][1]

    def evaluate(self, stmt, state: State) -> tuple[object, State]:
        found = ops.intrinsic_of(stmt)
        if found is None:
            return stmt, state
        spec, args = found
        if spec.configures is not None:
            a, b = spec.configures
            return stmt, (self.fmt(args[a]) if a is not None else state[0],
                          self.fmt(args[b]) if b is not None else state[1])
        if spec.unpacks is None:
            return stmt, state
        a, b = spec.unpacks
        cb_a = args[a] if a is not None else None
        cb_b = args[b] if b is not None else None
        want = (self.fmt(cb_a) if cb_a is not None else None, self.fmt(cb_b) if cb_b is not None else None)
        if (cb_a is not None and want[0] is None) or (cb_b is not None and want[1] is None):
            raise CompileError(f"TTConfigureUnpackers: {spec.name} reads a CB whose format is not known",
                               stage="LowerCompute")
        fix_a = cb_a is not None and state[0] != want[0]
        fix_b = cb_b is not None and state[1] != want[1]
        if not fix_a and not fix_b:
            return stmt, state
        call = _reconfig_call(cb_a if fix_a else None, cb_b if fix_b else None)
        new = (want[0] if fix_a else state[0], want[1] if fix_b else state[1])
        return tirx.SeqStmt([call, stmt]), new


def _reconfig_call(cb_a, cb_b):
    """The reconfiguration of srcA to `cb_a`'s format and/or srcB to `cb_b`'s (None: that source left as it is);
    None when neither changes."""
    if cb_a is not None and cb_b is not None:
        return ops.call("reconfig_data_format", cb_a, cb_b)
    if cb_a is not None:
        return ops.call("reconfig_data_format_srca", cb_a)
    if cb_b is not None:
        return ops.call("reconfig_data_format_srcb", cb_b)
    return None


def _trips(loop) -> int:
    """A loop's trip count; 2 for one not known (it runs more than once)."""
    return loop.extent.value if isinstance(loop.extent, tirx.IntImm) else 2


def _fpu_init(stmt) -> bool:
    found = ops.intrinsic_of(stmt) if isinstance(stmt, tirx.Evaluate) else None
    return found is not None and init_kind(found[0].name) == "fpu"


def _meet(a: State, b: State) -> State:
    return tuple(x if x == y else None for x, y in zip(a, b))


def _evaluates_in_order(stmt):
    if isinstance(stmt, tirx.Evaluate):
        yield stmt
    elif isinstance(stmt, tirx.SeqStmt):
        for s in stmts_of(stmt):
            yield from _evaluates_in_order(s)
    elif isinstance(stmt, tirx.For):
        yield from _evaluates_in_order(stmt.body)
    elif isinstance(stmt, tirx.IfThenElse):
        yield from _evaluates_in_order(stmt.then_case)
        if stmt.else_case is not None:
            yield from _evaluates_in_order(stmt.else_case)


def _unpacks_inside(stmt) -> bool:
    import tvm_ffi
    found: list = []

    def visit(node):
        spec = ops.intrinsic_of(node)
        if spec is not None and (spec[0].unpacks is not None or spec[0].configures is not None):
            found.append(spec[0].name)
    tvm_ffi.structural_walk(stmt, [(tirx.Evaluate, visit)], order="pre")
    return bool(found)


def configure_unpackers_in(func: tirx.PrimFunc) -> tirx.PrimFunc:
    formats = {int(c["index"]): c["data_format"] for c in attrs.CB_CONFIG.get(func)}
    c = _Configurer(formats)
    body, _ = c.walk(func.body, (None, None))
    if not c.inserted:
        return func                      # configured already: the program as it was
    func = hoist_inits_in(func.with_body(body))
    check = _Configurer(formats)
    check.walk(func.body, (None, None))
    if check.inserted:
        raise CompileError("TTConfigureUnpackers: an op still reads a CB of another format than its unpacker holds "
                           "after hoisting the reconfigurations", stage="LowerCompute")
    return func


@tirx.transform.prim_func_pass(opt_level=0, name="TTConfigureUnpackers")
def configure_unpackers(func, mod, ctx):
    return configure_unpackers_in(func)
