"""Run `tilefarm verify` over a TileLang checkout's examples, and over tilefarm's own, with small shapes.

    .venv/bin/python bench/tilelang_sweep.py /path/to/tilelang            # its examples/ plus examples/tilelang
    .venv/bin/python bench/tilelang_sweep.py /path/to/tilelang --dirs gemm,norm -t blackhole -v

Every kernel entry (a top-level function decorated with `jit`/`prim_func`/`autotune`) of every file under the
chosen example directories is compiled and verified on the emulator against the NumPy reference, for each target,
with the files unmodified: only the entry and its parameters are chosen here. Problem sizes come from the SIZES
table by parameter name (a parameter's own default is kept unless the table names it); an eager-JIT tensor
argument (`A: T.Tensor((M, K), dtype)` in the body) is given as `A=float16[256,128]`, its sizes from the same
table; a causal flag is swept over true and false. tilefarm's own kernels are run with the `tilefarm verify`
lines written in their header comments.

Each case ends as one of
  verified  compiled, emulated, and the outputs match the reference on every target
  wrong     compiled and ran, but an output differs from the reference
  rejected  a diagnostic located in the user's file (file:line[:col]) -- an unsupported construct, named by the
            diagnostic's own class (CompileError.refusal, set where the compiler refuses it): "not expressible on
            Tenstorrent" (with the reason: thread indices, CUDA-only intrinsics, CUDA host code while the kernel is
            built) or "expressible, not yet lowered"; a refusal that carries no class is counted as "unclassified"
  crash     anything else: an internal compiler error, a Python exception type as the message, an unlocated
            error, an emulator failure, a timeout
and the counts are printed per group (upstream: the default directories; extra: EXTRA_DIRS, issue 28's families,
counted apart so the default count stays comparable; own). Cases run in forked children (one at a time by default:
`--jobs N`), each with a time limit.
"""
from __future__ import annotations

import argparse
import ast
import multiprocessing
import os
import re
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DEFAULT_DIRS = ("gemm", "gemm_splitk", "gemm_streamk", "gemv", "flash_attention", "norm", "online_softmax",
                "elementwise", "attention_sink", "block_causal_attention", "flash_decoding")
# swept beside the default directories and counted on their own line (issue 28's kernel families), so that the
# default directories' count stays comparable run to run
EXTRA_DIRS = ("topk", "grouped_gemm")
# problem sizes and block shapes by parameter name: small enough for the emulator, tile-aligned
SIZES = {
    "M": 256, "N": 256, "K": 256, "D": 256, "batch": 1, "batch_size": 1, "heads": 4, "groups": 2,
    "seq_len": 128, "seq_q": 128, "seq_kv": 128, "dim": 64, "dim_qk": 64, "dim_v": 64, "head_kv": 2, "UQ": 128,
    "UKV": 128, "total_q": 128, "total_kv": 128, "max_seq_len": 128, "seqlen_q": 128, "seqlen_kv": 128,
    "N_CTX": 128, "kv_head_num": 2, "heads_kv": 2, "k_heads": 2, "h_q": 4, "h_kv": 2, "downsample_len": 2, "dllm_block": 32,
    "block_H": 64, "softmax_scale": 0.125, "num_split": 2, "max_seqlen_kv": 128, "max_seqlen_q": 128,
    "max_seqlen_k": 128, "max_seqlen": 128, "total_seqlen_k": 128, "total_tokens": 128, "has_sink": True,
    "block_M": 64, "block_N": 64, "block_K": 32, "BLOCK_M": 32, "BLOCK_N": 64, "BLOCK_K": 64,
    "blk_m": 32, "blk_k": 64, "split_k": 2, "num_stages": 2, "threads": 128, "thread_num": 128,
    "reduce_threads": 32, "streamk_tiles": 4, "enable_rasteration": False, "trans_A": False, "trans_B": False,
    "topk": 4, "batch_sum": 128, "batch_count": 2,
    "batch_sizes_list": "(64,64)",   # batch_count sizes summing to batch_sum (a tuple: `--param batch_sizes_list=(64,64)`)
}
# Sizes at which an example is defined, where the table's are not (not to make it pass: each says why).
# attention_sink's bhsd forwards keep one sink per query row in `sinks = T.alloc_fragment([heads])` and write and read
# it as `sinks[i]` for i in T.Parallel(block_M): past its `heads` elements unless heads >= block_M (64). On CUDA the
# fragment becomes per-thread registers laid out by the loop, so it happens to work; the varlen sibling
# (example_gqa_sink_bwd_varlen.py) allocates it as [block_M].
DEFINED_SIZES = {
    ("example_gqa_sink_bwd_bhsd.py", "flashattn_fwd"): {"heads": 64},
    ("example_mha_sink_bwd_bhsd.py", "flashattn_fwd"): {"heads": 64},
}
OVERRIDDEN_DEFAULTS = {"blk_m", "BLOCK_M", "BLOCK_N", "M", "N", "K"}  # defaults of 1 row / 8192 columns are GPU shapes
DTYPES = {"dtype": "float16", "in_dtype": "float16", "out_dtype": "float16", "accum_dtype": "float32",
          "dtypeAB": "float16", "dtypeC": "float16"}
CAUSAL = re.compile(r"causal", re.I)
STATUSES = ("verified", "wrong", "rejected", "crash")
UNCLASSIFIED = "unclassified"   # a refusal whose diagnostic does not say whether Tenstorrent could express it
TARGETS = ("wormhole_b0", "blackhole")


@dataclass
class Case:
    group: str          # upstream | own
    path: Path
    entry: str
    params: dict


# ---- upstream kernels: entries and parameters from the source ---------------------------------------------------
def _decorated_entries(tree: ast.Module) -> list[ast.FunctionDef]:
    out = []
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        names = []
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            if isinstance(target, ast.Attribute) and ast.unparse(target.value).split(".")[0] == "triton":
                names = []          # a Triton baseline beside the TileLang kernels (`@triton.jit`)
                break
            names.append(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
        if any(n in ("jit", "prim_func", "autotune") for n in names):
            out.append(node)
    return out


def _autotuned(fn: ast.FunctionDef) -> bool:
    for dec in fn.decorator_list:
        target = dec.func if isinstance(dec, ast.Call) else dec
        if (target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")) == "autotune":
            return True
    return False


def _dtype_of(expr: ast.expr, values: dict, local: dict) -> str:
    if isinstance(expr, ast.Attribute):
        name = expr.attr
    elif isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        name = expr.value
    elif isinstance(expr, ast.Name) and expr.id in values:
        name = str(values[expr.id])
    elif isinstance(expr, ast.Name) and expr.id in local:
        return _dtype_of(local[expr.id], values, local)
    else:
        name = "float32"
    return {"float": "float32", "half": "float16"}.get(name, name)


def _dim_of(expr: ast.expr, values: dict) -> int | None:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, int):
        return expr.value
    if isinstance(expr, ast.Name):
        value = values.get(expr.id, SIZES.get(expr.id))
        return value if isinstance(value, int) else None
    return None


def _chosen(expr: ast.expr, values: dict) -> ast.expr:
    """`[M, K] if not trans_b else [K, M]` -> the branch the parameters' values choose (a flag or its negation);
    any other expression as it is."""
    if not isinstance(expr, ast.IfExp):
        return expr
    test, negate = expr.test, False
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test, negate = test.operand, True
    if not isinstance(test, ast.Name) or test.id not in values:
        return expr
    value = values[test.id]
    truth = str(value) not in ("False", "false", "0", "None", "") if isinstance(value, str) else bool(value)
    return _chosen(expr.body if truth != negate else expr.orelse, values)


def _tensor_params(fn: ast.FunctionDef, values: dict) -> dict[str, str]:
    """Eager-JIT tensor arguments: `X: T.Tensor((M, N), dtype)` in the body -> "dtype[M,N]"."""
    local = {t.id: _chosen(s.value, values) for s in fn.body if isinstance(s, ast.Assign)
             for t in s.targets if isinstance(t, ast.Name)}
    out = {}
    for s in fn.body:   # factory arguments, and tensors only the body declares (bound when the kernel is called)
        if not (isinstance(s, ast.AnnAssign) and s.value is None and isinstance(s.target, ast.Name)):
            continue
        ann = s.annotation
        if isinstance(ann, ast.Call):
            args = list(ann.args)
        elif isinstance(ann, ast.Subscript):
            args = list(ann.slice.elts) if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        else:
            continue
        if args and isinstance(args[0], ast.Name) and isinstance(local.get(args[0].id), (ast.Tuple, ast.List)):
            args[0] = local[args[0].id]       # `A_shape = (M, K)` ... `A: T.Tensor(A_shape, dtype)`
        if not args or not isinstance(args[0], (ast.Tuple, ast.List)):
            continue
        dims = [_dim_of(e, values) for e in args[0].elts]
        if None in dims:
            continue
        dtype = _dtype_of(args[1], values, local) if len(args) > 1 else "float32"
        out[s.target.id] = f"{dtype}[{','.join(map(str, dims))}]"
    return out


def upstream_cases(checkout: Path, dirs: tuple[str, ...], group: str = "upstream") -> list[Case]:
    cases = []
    for d in dirs:
        for path in sorted((checkout / "examples" / d).glob("*.py")):
            if path.name.startswith(("test_", "regression_")):
                continue
            text = path.read_text()
            if not re.search(r"^\s*(import|from)\s+tilelang\b", text, re.M):
                continue            # Triton or PyTorch baselines beside the examples: not TileLang kernels
            try:
                tree = ast.parse(text)
            except SyntaxError:
                continue
            module_ints = {t.id: n.value.value for n in tree.body if isinstance(n, ast.Assign)
                           and isinstance(n.value, ast.Constant) and type(n.value.value) is int
                           for t in n.targets if isinstance(t, ast.Name)}
            for fn in _decorated_entries(tree):
                args = fn.args.args
                defaults = dict(zip([a.arg for a in args][len(args) - len(fn.args.defaults):], fn.args.defaults))
                values: dict = {}
                tuned = _autotuned(fn)
                defined = DEFINED_SIZES.get((path.name, fn.name), {})
                for a in args:
                    name = a.arg
                    # a `None` default of an @autotune entry is the autotuner's to fill (gemv's BLOCK_N,
                    # reduce_threads): the table's value stands for one of its configs
                    by_tuner = tuned and isinstance(defaults.get(name), ast.Constant) and defaults[name].value is None
                    if name in defined:
                        values[name] = defined[name]
                    elif name in SIZES and (name not in defaults or name in OVERRIDDEN_DEFAULTS or by_tuner):
                        values[name] = SIZES[name]
                    elif name in DTYPES and name not in defaults:
                        values[name] = DTYPES[name]
                dtype_defaults = {n: ast.unparse(d).split(".")[-1].strip("'\"") for n, d in defaults.items()
                                  if n not in values}
                consts = {n for sub in ast.walk(fn) if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
                          and sub.func.attr == "const" and sub.args and isinstance(sub.args[0], ast.Constant)
                          for n in str(sub.args[0].value).replace(",", " ").split()}
                # T.dynamic sizes and scalar kernel arguments (`max_seqlen_q: T.int32`) are given by name
                for sub in ast.walk(fn):
                    named = isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.args and \
                        sub.func.attr in ("dynamic", "symbolic") and isinstance(sub.args[0], ast.Constant)
                    size = SIZES.get(sub.args[0].value, SIZES.get(str(sub.args[0].value).upper())) if named else None
                    if size is not None:       # `T.dynamic("m")`: the table's `m`, or its `M`
                        values.setdefault(sub.args[0].value, size)
                for sub in ast.walk(fn):
                    if isinstance(sub, ast.FunctionDef) and sub is not fn:
                        for a in sub.args.args:
                            if a.arg in SIZES and isinstance(a.annotation, ast.Attribute) and \
                                    a.annotation.attr.startswith("int"):
                                values.setdefault(a.arg, SIZES[a.arg])
                fixed = {k: v for k, v in module_ints.items() if k not in consts}   # sizes the file fixes itself
                tensors = _tensor_params(fn, {**fixed, **dtype_defaults, **values})
                values.update(tensors)
                required = [a.arg for a in args if a.arg not in defaults and a.arg not in values]
                flags = [n for n in required if CAUSAL.search(n)]
                variants = [dict(values, **{f: v for f in flags}) for v in (["true", "false"] if flags else [None])]
                for params in variants:
                    cases.append(Case(group, path, fn.name, params))
    return cases


# ---- tilefarm's own kernels: the `tilefarm verify` lines in their headers ---------------------------------------
def own_cases(examples: Path) -> list[Case]:
    cases = []
    for path in sorted(examples.glob("*.py")):
        for line in path.read_text().splitlines():
            m = re.match(r"^#\s+tilefarm verify (\S+)(.*)$", line)
            if not m:
                continue
            words = shlex.split(m.group(2))
            entry, params = None, {}
            for flag, value in zip(words[::2], words[1::2]):
                if flag == "--entry":
                    entry = value
                elif flag == "--param":
                    name, _, text = value.partition("=")
                    params[name] = text
            cases.append(Case("own", path, entry, params))
    return cases


# ---- one case ----------------------------------------------------------------------------------------------------
def classify(case: Case, targets: tuple[str, ...]) -> tuple[str, str, object]:
    """(status, detail, the diagnostic's Refusal when rejected: its class and reason, None when it carries none)"""
    from compiler.api import compile_source, emulate
    from compiler.errors import CompileError
    from schemas.target import TargetConfig

    from tilefarm.cmd_compile import parse_params

    source = case.path.read_text()
    filename = str(case.path)
    params = parse_params([f"{k}={v}" for k, v in case.params.items()])   # exactly as `--param k=v` arrives
    for arch in targets:
        try:
            result = compile_source(source, filename=filename, entry=case.entry, params=params,
                                    target=TargetConfig(arch=arch))
            outcome = emulate(result.artifacts, target=TargetConfig(arch=arch), source=source, filename=filename,
                              entry=case.entry, params=params, seed=1)
        except CompileError as e:
            return _error_status(e, filename), f"{arch}: {e.render().splitlines()[0]}", e.refusal
        except Exception as e:  # noqa: BLE001 -- a crash is what the sweep counts
            return "crash", f"{arch}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}", None
        if not outcome.passed:
            bad = next(o for o in outcome.verification.outputs if not o.ok)
            return "wrong", f"{arch}: {bad.first_mismatch_text()}", None
    return "verified", "", None


def _error_status(e, filename: str) -> str:
    located = e.location is not None and e.location.file == filename and e.location.line is not None
    internal = e.message.startswith("internal compiler error") or e.stage == "emulate"
    python_type = re.match(r"^[A-Z][A-Za-z]*(Error|Exception): ", e.message) is not None
    return "rejected" if located and not internal and not python_type else "crash"


def _run_child(case: Case, targets, conn) -> None:
    try:
        conn.send(classify(case, targets))
    except BaseException as e:  # noqa: BLE001
        conn.send(("crash", f"{type(e).__name__}: {e}", None))


def run_case(case: Case, targets, timeout: float) -> tuple[str, str, object, float]:
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    t0 = time.perf_counter()
    proc = ctx.Process(target=_run_child, args=(case, targets, child))
    proc.start()
    child.close()
    status, detail, refusal = "crash", f"timed out after {timeout:.0f} s", None
    if parent.poll(timeout):
        try:
            status, detail, refusal = parent.recv()
        except EOFError:
            status, detail = "crash", f"the case's process died (exit {proc.exitcode})"
    proc.kill()
    proc.join()
    return status, detail, refusal, time.perf_counter() - t0


def _revision(checkout: Path) -> str:
    import subprocess

    proc = subprocess.run(["git", "-C", str(checkout), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"tilelang@{proc.stdout.strip()}" if proc.returncode == 0 else checkout.name


def describe(case: Case) -> str:
    params = " ".join(f"{k}={v}" for k, v in case.params.items())
    return f"{case.path.parent.name}/{case.path.name}::{case.entry} {params}".strip()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkout", nargs="?", default=os.environ.get("TILELANG_CHECKOUT"),
                        help="a TileLang checkout (its examples/ are swept; default $TILELANG_CHECKOUT)")
    parser.add_argument("--dirs", default=",".join(DEFAULT_DIRS), help="example directories to sweep")
    parser.add_argument("--extra-dirs", default=",".join(EXTRA_DIRS),
                        help="more example directories, counted on a line of their own ('' for none)")
    parser.add_argument("-t", "--target", action="append", choices=TARGETS, help="target(s) (default: both)")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per case")
    parser.add_argument("--no-own", action="store_true", help="skip tilefarm's examples/tilelang")
    parser.add_argument("-k", default=None, help="only cases whose description contains this text")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case, not only the failures")
    args = parser.parse_args(argv)
    targets = tuple(args.target or TARGETS)

    import compiler.api  # noqa: F401 -- import tvm once in the parent; children are forked warm

    cases = []
    if args.checkout:
        cases += upstream_cases(Path(args.checkout), tuple(d for d in args.dirs.split(",") if d))
        cases += upstream_cases(Path(args.checkout), tuple(d for d in args.extra_dirs.split(",") if d), "extra")
    if not args.no_own:
        cases += own_cases(ROOT / "examples" / "tilelang")
    if args.k:
        cases = [c for c in cases if args.k in describe(c)]
    results: list[tuple[Case, str, str, str, float]] = []   # case, status, detail, refusal class, seconds
    with multiprocessing.pool.ThreadPool(max(1, args.jobs)) as pool:
        for case, (status, detail, refusal, seconds) in zip(cases, pool.imap(
                lambda c: run_case(c, targets, args.timeout), cases)):
            label = (refusal.label if refusal else UNCLASSIFIED) if status == "rejected" else ""
            results.append((case, status, detail, label, seconds))
            if args.verbose or status != "verified":
                where = detail.replace(str(case.path.parent) + "/", "")
                print(f"{status:<9} {seconds:6.1f}s  {describe(case)}" + (f"\n          {where[:200]}" if detail else "")
                      + (f"\n          [{refusal or UNCLASSIFIED}]" if label else ""), flush=True)
    print(f"\ntargets: {', '.join(targets)}")
    if not args.checkout:
        print("no TileLang checkout given (argument or $TILELANG_CHECKOUT): tilefarm's examples only")
    for group in ("upstream", "extra", "own"):
        mine = [r for r in results if r[0].group == group]
        if not mine:
            continue
        counts = {s: sum(1 for r in mine if r[1] == s) for s in STATUSES}
        label = {"upstream": f"TileLang examples ({_revision(Path(args.checkout))})",
                 "extra": f"  extra dirs ({args.extra_dirs})", "own": "tilefarm examples/tilelang"}[group]
        print(f"{label:<40} {len(mine):3d} cases: " + ", ".join(f"{counts[s]} {s}" for s in STATUSES))
        classes: dict[str, int] = {}
        for r in mine:
            if r[1] == "rejected":
                classes[r[3]] = classes.get(r[3], 0) + 1
        if classes:
            print(f"{'':<40} rejected: " + ", ".join(f"{n} {label}" for label, n in sorted(classes.items())))
    return 0


if __name__ == "__main__":
    import multiprocessing.pool

    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
