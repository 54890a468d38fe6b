"""Kernels whose own Python writes the sandboxed child's answer, as corpus/forge_* do (make_corpus.py says how), but
built at test time around artifacts the compiler really made: a forgery as good as the genuine answer plus one lie
(a static constructor in reader.cpp, an include hidden from a naive reader, a verdict the device never earned)."""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from schemas.target import TargetConfig

KERNEL = '''# Forges the sandboxed child's answer in the ops of FORGERIES (tests/security/forging.py).
import tilelang
import tilelang.language as T

FORGERIES = {forgeries!r}  # op -> (result.json text, {{file name: bytes}})


def forge():
    real = print.__self__  # the builtins module: its __import__ is not the restricted one
    os, json, struct, stat, sys, fcntl = (real.__import__(m) for m in ("os", "json", "struct", "stat", "sys", "fcntl"))
    frame, op = sys._getframe(), None
    while frame is not None:
        if frame.f_code.co_name.startswith("_op_"):
            op = frame.f_code.co_name[4:]
        frame = frame.f_back
    if op not in FORGERIES:
        return
    answer, files = FORGERIES[op]
    files = {{"result.json": answer.encode(), **files}}
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
        for i, j in T.Parallel(32, 32):
            C_local[i, j] = A_shared[i, j] * {scale}
        T.copy(C_local, C[by * 32, bx * 32])
'''


def forging_kernel(forgeries: dict[str, tuple[str, dict[str, bytes]]], scale: float = 1.0) -> str:
    """The kernel (C = A * scale on 64x64 float32) that answers `forgeries[op]` instead of running `op`."""
    return KERNEL.format(forgeries=forgeries, scale=repr(float(scale)))


def genuine_compile(arch: str = "wormhole_b0", scale: float = 1.0) -> tuple[dict, dict[str, bytes]]:
    """The compile answer (result.json as a dict, the files of out/) the child's op really gives for the forging
    kernel when it forges nothing; run here, in-process, on that trusted text."""
    from workers.sandbox import ops

    work = Path(tempfile.mkdtemp(prefix="tilefarm-genuine-"))
    (work / "out").mkdir()
    try:
        value = ops.OPS["compile"]({"source": forging_kernel({}, scale), "filename": "forge.py",
                                    "target": TargetConfig(arch=arch).model_dump(mode="json")}, work)
        files = {p.name: p.read_bytes() for p in (work / "out").iterdir()}
    finally:
        shutil.rmtree(work)
    assert value["ok"], value
    return json.loads(json.dumps(value)), files


def compile_forgery(answer: dict, files: dict[str, bytes], **replaced: bytes) -> tuple[str, dict[str, bytes]]:
    """A compile forgery: the genuine answer with artifacts replaced (reader_cpp=... for reader.cpp)."""
    files = dict(files)
    for name, data in replaced.items():
        files[answer["artifacts"][name.replace("_", ".")]] = data
    return json.dumps(answer), files
