# TEMPORARY (until compiler/api.py lands): a tiny stand-in for compiler.api, loaded only in test subprocesses.
import ast, hashlib, json, os, sys, time, types

if os.environ.get("TILEFARM_TEST_FAKE_COMPILER") == "1":
    from compiler.errors import CompileError, SourceLocation
    from compiler.version import COMPILER_VERSION

    api = types.ModuleType("compiler.api")
    api.COMPILER_VERSION = COMPILER_VERSION

    def cache_key(source, entry, target):
        blob = json.dumps([source, entry, target.model_dump(mode="json"), COMPILER_VERSION], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    class R:
        pass

    def compile_source(source, filename="kernel.py", entry=None, target=None, dump_ir=False):
        try:
            ast.parse(source, filename)
        except SyntaxError as e:
            raise CompileError(e.msg, stage="parse", location=SourceLocation(filename, e.lineno, e.offset))
        time.sleep(0.3)
        r = R()
        h = hashlib.sha256(source.encode()).hexdigest()
        r.artifacts = {n: f"// {n} {h}\n".encode() for n in ("reader.cpp", "compute.cpp", "writer.cpp", "main.cpp")}
        r.artifacts["tt.plan.json"] = json.dumps({"h": h}).encode()
        r.log = "pass a: 1 ms\n"
        r.timings = {"a": 0.001}
        r.ir_dumps = {"00_input.tir": "x"} if dump_ir else {}
        r.plan = {}
        return r

    api.cache_key, api.compile_source = cache_key, compile_source
    sys.modules["compiler.api"] = api
