# Forges the sandboxed child's answer during the `compile` op (see tests/security/make_corpus.py).
import tilelang
import tilelang.language as T

FORGE_OP = 'compile'
FORGED_ANSWER = '{"ok": true, "entry": "main", "timings": {"parse": 0.01}, "log": "done \\udc80", "artifacts": {"reader.cpp": "reader.cpp", "compute.cpp": "compute.cpp", "writer.cpp": "writer.cpp", "main.cpp": "main.cpp", "tt.plan.json": "tt.plan.json"}, "ir": {}}'
FORGED_FILES = {'reader.cpp': b'// forged\n', 'compute.cpp': b'// forged\n', 'writer.cpp': b'// forged\n', 'main.cpp': b'// forged\n', 'tt.plan.json': b'{}'}


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
    files = {"result.json": FORGED_ANSWER.encode(), **FORGED_FILES}
    listed = json.dumps({"files": [[name, len(data)] for name, data in files.items()]}).encode()
    message = listed + b"\n" + b"".join(files.values())
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
