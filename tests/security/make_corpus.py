"""Regenerates corpus/: hostile and malformed kernel files (run from this directory; the files are committed)."""
H = 'from tvm.script import tirx as T\n\n\n@T.prim_func\ndef main(A: T.Buffer((64, 64), "float32"), C: T.Buffer((64, 64), "float32")):\n'
BODY = '''    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((32, 32), "float32")
    C_l = T.alloc_local((32, 32), "float32")
    T.tile.copy(A_s, A[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32])
    T.tile.exp(C_l, A_s)
    T.tile.copy(C[by * 32:by * 32 + 32, bx * 32:bx * 32 + 32], C_l)
'''
CANARY = "/tmp/tilefarm-canary/canary.txt"
TOUCH = f"touch {CANARY}"
PARAM1 = 'def main(A: T.Buffer((64,), "float32")):\n'
HEAD = "from tvm.script import tirx as T\n\n\n@T.prim_func\n"
EXPRS = {
    "import_os_system": f"__import__('os').system('{TOUCH}')",
    "tvm_base_os": f"tvm.base.os.system('{TOUCH}')",
    "tile_tvm_walk": f"T.tile.tvm.base.os.system('{TOUCH}')",
    "globals_builtins": f"T.evaluate.__globals__['__builtins__']['__import__']('os').system('{TOUCH}')",
    "format_dunder": "'{0.__class__.__mro__}'.format(A)",
    "lambda_call": "(lambda: __import__('os'))()",
    "eval_call": f"eval(\"__import__('os').system('{TOUCH}')\")",
    "exec_call": f"exec(\"open('{CANARY}','w').write('x')\")",
    "open_write": f"open('{CANARY}', 'w')",
    "getattr_builtin": "getattr(A, '__class__')",
    "compile_builtin": "compile('1', 'x', 'eval')",
    "globals_call": "globals()",
    "vars_call": "vars()",
    "breakpoint_call": "breakpoint()",
    "buffer_method": "A.same_as(C)",
    "buffer_attr_chain": "A.data.__class__",
    "subclasses": "().__class__.__bases__[0].__subclasses__()",
    "comprehension_dos": "len([0 for i in range(3 * 10 ** 7)])",
    "generator_dos": "sum(i for i in range(10 ** 9))",
    "huge_pow": "10 ** 10 ** 10",
    "huge_shift": "1 << 10 ** 9",
    "huge_int_literal": "1" + "0" * 5000,
    "string_repeat": "'a' * (10 ** 9)",
    "list_repeat": "[0] * (10 ** 9)",
    "long_string": "'" + "x" * 10000 + "'",
    "walrus": "(x := 1)",
    "fstring": "f'{A.__class__}'",
    "set_literal": "{1, 2}",
    "starred": "T.evaluate(*[1])",
    "T_namespace_bare": "T.tile",
    "T_script_module": "T.tvm",
    "private_attr": "A._handle",
    "unknown_name": "os.getpid()",
    "type_call": "type(A)",
    "chr_chain": "chr(95) + chr(95)",
}
STMTS = {
    "import_in_body": "    import os\n",
    "from_import_in_body": "    from os import system\n",
    "nested_def": "    def f():\n        return 0\n",
    "class_in_body": "    class X:\n        pass\n",
    "try_except": "    try:\n        T.evaluate(0)\n    except Exception:\n        pass\n",
    "global_stmt": "    global A\n",
    "with_open": f"    with open('{CANARY}', 'w') as f:\n        pass\n",
    "while_true": "    while True:\n        pass\n",
    "del_stmt": "    del A\n",
    "rebind_T": "    T = 1\n",
    "raise_stmt": "    raise SystemExit(0)\n",
    "assert_stmt": "    assert False\n",
}
FILES = {
    "top_import_os": "import os\n" + HEAD + PARAM1 + "    T.evaluate(0)\n",
    "top_level_call": f"from tvm.script import tirx as T\n__import__('os').system('{TOUCH}')\n",
    "decorator_exploit": "from tvm.script import tirx as T\n\n\n"
                         f"@T.prim_func(private=__import__('os').system('{TOUCH}') == 0)\n" + PARAM1 + "    T.evaluate(0)\n",
    "annotation_exploit": HEAD + 'def main(A: T.Buffer((tvm.base.os.getpid(),), "float32")):\n    T.evaluate(0)\n',
    "default_arg_exploit": HEAD + 'def main(A: T.Buffer((64,), "float32"), n=__import__("os").getpid()):\n    T.evaluate(0)\n',
    "empty": "",
    "only_comment": "# nothing here\n",
    "no_kernel": "from tvm.script import tirx as T\n",
    "syntax_error": "from tvm.script import tirx as T\n@T.prim_func\ndef main(:\n",
    "deep_nesting_parens": HEAD + PARAM1 + "    T.evaluate(" + "(" * 5000 + "1" + ")" * 5000 + ")\n",
    "deep_nesting_adds": HEAD + PARAM1 + "    T.evaluate(" + "1 + " * 3000 + "1)\n",
    "deep_nesting_blocks": HEAD + PARAM1 + "".join("    " * (i + 1) + f"for i{i} in range(1):\n" for i in range(90))
                           + "    " * 91 + "T.evaluate(0)\n",
    "giant_array": H.replace("(64, 64)", "(1048576, 1048576)") + BODY,
    "giant_grid": H + BODY.replace("T.cta_id([2, 2])", "T.cta_id([100000, 100000])"),
    "wrong_dtype_int8": H.replace('"float32"', '"int8"') + BODY.replace('"float32"', '"int8"'),
    "wrong_dtype_string": H.replace('"float32"', '"float32; rm -rf /"') + BODY,
    "negative_shape": H.replace("(64, 64)", "(-64, 64)") + BODY,
    "zero_shape": H.replace("(64, 64)", "(0, 0)") + BODY,
    "many_kernels_no_main": "from tvm.script import tirx as T\n"
                            + "".join(f"\n\n@T.prim_func\ndef k{i}(A: T.Buffer((64,), \"float32\")):\n    T.evaluate(0)\n"
                                      for i in range(3)),
    "infinite_loop_range": H + "    for i in range(2 ** 62):\n        T.evaluate(0)\n" + BODY,
    "tab_mixing": HEAD + PARAM1 + "\tT.evaluate(0)\n        T.evaluate(0)\n",
    "null_bytes": "from tvm.script import tirx as T\n\x00\x00\n",
    "bidi_override": H + "    T.evaluate(0)  # \u202e }\u2066if (admin)\u2069 \u2066\n" + BODY.replace("T.tile.exp", "T.tile.silu"),
}

# Forged answers: the kernel's own Python (TileLang runs it in the sandboxed child) writes the child's answer itself,
# as the child does (workers/sandbox/zygote.py: an 8-byte length, then protocol.pack: a JSON line listing the
# files, then their bytes) down the answer pipe, an open fd of the very process it runs in, and exits before the
# real answer is written. Each forgery is one kind of lie the trusted side must refuse.
FORGE = '''# Forges the sandboxed child's answer during the `{op}` op (see tests/security/make_corpus.py).
import tilelang
import tilelang.language as T

FORGE_OP = {op!r}
FORGED_ANSWER = {answer!r}
FORGED_FILES = {files!r}


def forge():
    real = print.__self__  # the builtins module: its __import__ is not the restricted one
    os, json, struct, stat, sys, fcntl = (real.__import__(m) for m in ("os", "json", "struct", "stat", "sys", "fcntl"))
    frame, op = sys._getframe(), None
    while frame is not None:
        if frame.f_code.co_name.startswith("_op_"):
            op = frame.f_code.co_name[4:]
        frame = frame.f_back
    if op != FORGE_OP:
        return
    files = {{"result.json": FORGED_ANSWER.encode(), **FORGED_FILES}}
    listed = json.dumps({{"files": [[name, len(data)] for name, data in files.items()]}}).encode()
    message = listed + b"\\n" + b"".join(files.values())
    message = struct.pack("<Q", len(message)) + message
    for fd in range(3, 1024):
        try:
            is_pipe = stat.S_ISFIFO(os.fstat(fd).st_mode)
            writable = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_WRONLY
        except OSError:
            continue
        if is_pipe and writable:
            view = memoryview(message)
            while view:
                view = view[os.write(fd, view):]
            os._exit(0)


@T.prim_func
def main(A: T.Tensor((64, 64), "float32"), C: T.Tensor((64, 64), "float32")):
    forge()
    with T.Kernel(2, 2) as (bx, by):
        A_shared = T.alloc_shared((32, 32), "float32")
        C_local = T.alloc_fragment((32, 32), "float32")
        T.copy(A[by * 32, bx * 32], A_shared)
        T.copy(A_shared, C_local)
        T.copy(C_local, C[by * 32, bx * 32])
'''
ARTIFACT_NAMES = ("reader.cpp", "compute.cpp", "writer.cpp", "main.cpp", "tt.plan.json")


def compile_answer(artifacts: dict | None = None, ir: str = "{}", timings: str = '{"parse": 0.01}', log: str = '"ok"',
                   entry: str = '"main"', extra: str = "") -> str:
    names = artifacts if artifacts is not None else {n: n for n in ARTIFACT_NAMES}
    listed = ", ".join(f'"{k}": "{v}"' for k, v in names.items())
    return (f'{{"ok": true, "entry": {entry}, "timings": {timings}, "log": {log}, "artifacts": {{{listed}}}, '
            f'"ir": {ir}{extra}}}')


def every_artifact(plan: bytes = b"{}") -> dict:
    return {**{n: b"// forged\n" for n in ARTIFACT_NAMES[:4]}, "tt.plan.json": plan}


def npy(array) -> bytes:
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def pickled_npy() -> bytes:
    """An object array: its data is a pickle that runs `touch` on the canary when loaded with allow_pickle."""
    import io
    import pickle

    import numpy as np

    class Payload:
        def __reduce__(self):
            import os
            return os.system, (f"touch {CANARY_DIR}/unpickled",)

    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": "|O", "fortran_order": False, "shape": (1,)})
    return buffer.getvalue() + pickle.dumps([Payload()], protocol=2)


CANARY_DIR = "/tmp/tilefarm-canary"
EMULATED = '{"ok": true, "passed": true, "log": "", "verification": "", "first_mismatch": null, "report": {"passed": true}}'


def forgeries() -> dict[str, tuple[str, str, dict]]:
    """name -> (op, result.json text, other files)."""
    import numpy as np

    C = np.zeros((64, 64), np.float32)
    return {
        "compile_absolute_artifact": ("compile", compile_answer({f"{CANARY_DIR}/absolute.cpp": "x.cpp"}),
                                      {"x.cpp": b"pwned"}),
        "compile_dotdot_artifact": ("compile", compile_answer({"../" * 12 + f"{CANARY_DIR[1:]}/dotdot.cpp": "x.cpp"}),
                                    {"x.cpp": b"pwned"}),
        "compile_every_artifact_plus_absolute": ("compile", compile_answer(
            {**{n: n for n in ARTIFACT_NAMES}, f"{CANARY_DIR}/extra.cpp": "reader.cpp"}), every_artifact()),
        "compile_ir_traversal": ("compile", compile_answer(ir='{"../../../../../../../..' + CANARY_DIR + '/ir.py": "ir-000.py.txt"}'),
                                 {**every_artifact(), "ir-000.py.txt": b"pwned"}),
        "compile_nan_timing": ("compile", compile_answer(timings='{"parse": NaN, "total": Infinity}'), every_artifact()),
        "compile_overflowing_timing": ("compile", compile_answer(timings='{"parse": 1e999}'), every_artifact()),
        "compile_surrogate_log": ("compile", compile_answer(log='"done \\udc80"'), every_artifact()),
        "compile_surrogate_timing_key": ("compile", compile_answer(timings='{"\\ud800": 1.0}'), every_artifact()),
        "compile_plan_not_a_plan": ("compile", compile_answer(), every_artifact(b'{"kernel": "main", "buffers": 7}')),
        "compile_plan_with_nan": ("compile", compile_answer(), every_artifact(b'{"kernel": NaN}')),
        "compile_unlisted_file": ("compile", compile_answer(), {**every_artifact(), "evil.sh": b"rm -rf /"}),
        "compile_listed_file_missing": ("compile", compile_answer(), {"reader.cpp": b"x"}),
        "compile_not_an_object": ("compile", '["ok", true]', {}),
        "compile_not_json": ("compile", '{"ok": tru', {}),
        "compile_entry_path": ("compile", compile_answer(entry='"../../etc/passwd"'), every_artifact()),
        "compile_extra_field": ("compile", compile_answer(extra=', "write_to": "/etc/cron.d/x"'), every_artifact()),
        "compile_binary_artifact": ("compile", compile_answer(), {**every_artifact(), "compute.cpp": b"\xff\xfe\x00"}),
        "compile_slash_in_file_name": ("compile", compile_answer(), {**every_artifact(), f"..{CANARY_DIR}/x": b"x"}),
        "compile_error_with_files": ("compile", '{"ok": false, "error": {"stage": "parse", "message": "no"}}',
                                     {"../x": b"x", "x.cpp": b"x"}),
        "compile_error_nan_line": ("compile", '{"ok": false, "error": {"stage": "parse", "message": "m", "line": NaN}}', {}),
        "emulate_output_outside_plan": ("emulate", EMULATED, {"output-Z.npy": npy(C)}),
        "emulate_output_traversal": ("emulate", EMULATED, {f"output-..{CANARY_DIR}/x.npy": npy(C)}),
        "emulate_pickled_output": ("emulate", EMULATED, {"output-C.npy": pickled_npy()}),
        "emulate_output_wrong_shape": ("emulate", EMULATED, {"output-C.npy": npy(np.zeros((3,), np.float32))}),
        "emulate_output_not_npy": ("emulate", EMULATED, {"output-C.npy": b"\x93NUMPY garbage"}),
        "emulate_nan_report": ("emulate", EMULATED.replace('"report": {"passed": true}', '"report": {"passed": NaN}'),
                               {"output-C.npy": npy(C)}),
        "emulate_report_markup": ("emulate", EMULATED.replace('"report": {"passed": true}', '"report": {"passed": true, '
                                  '"cores": [{"core": [0, 0], "noc_reads": "<img src=x onerror=alert(document.cookie)>"}]}'),
                                  {"output-C.npy": npy(C)}),
        "emulate_report_extra_field": ("emulate", EMULATED.replace('"report": {"passed": true}',
                                       '"report": {"passed": true, "script": "<script>alert(1)</script>"}'),
                                       {"output-C.npy": npy(C)}),
        "emulate_surrogate_mismatch": ("emulate", EMULATED.replace('"first_mismatch": null', '"first_mismatch": "\\udfff"'),
                                       {"output-C.npy": npy(C)}),
    }


if __name__ == "__main__":
    from pathlib import Path

    out = Path(__file__).resolve().parent / "corpus"
    out.mkdir(exist_ok=True)
    for name, expr in EXPRS.items():
        (out / f"expr_{name}.py").write_text(H + f"    T.evaluate({expr})\n" + BODY)
    for name, stmt in STMTS.items():
        (out / f"stmt_{name}.py").write_text(H + stmt + BODY)
    for name, text in FILES.items():
        (out / f"file_{name}.py").write_text(text)
    for name, (op, answer, files) in forgeries().items():
        (out / f"forge_{name}.py").write_text(FORGE.format(op=op, answer=answer, files=files))
    (out / "file_invalid_utf8.py").write_bytes(b"from tvm.script import tirx as T\n# \xff\xfe\xc3\x28 invalid\n")
    print(len(list(out.iterdir())), "files")
