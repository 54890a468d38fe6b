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
    (out / "file_invalid_utf8.py").write_bytes(b"from tvm.script import tirx as T\n# \xff\xfe\xc3\x28 invalid\n")
    print(len(list(out.iterdir())), "files")
