"""TTSplitKernels: one lowered function -> reader, compute and writer, each with only its own calls, its role, its
ordered runtime arguments (buffer addresses, then the work arguments) and the TensorAccessor words of the DRAM
buffers it touches; an input is read by one data-movement kernel, the producer of its CB."""
from __future__ import annotations

import tvm_ffi
from tvm import tirx

from compiler import attrs, ops
from compiler.passes.partition_work import WORK_ARGS

from .helpers import apply, kernel

GEMM = '''
@T.prim_func
def main(A: T.Buffer((128, 128), "float16"), B: T.Buffer((128, 128), "float16"), C: T.Buffer((128, 128), "float32")):
    T.device_entry()
    by, bx = T.cta_id([2, 2])
    A_s = T.alloc_shared((64, 32), "float16")
    B_s = T.alloc_shared((32, 64), "float16")
    C_l = T.alloc_local((64, 64), "float32")
    T.tile.zero(C_l)
    for k in range(4):
        T.tile.copy(A_s, A[by * 64:by * 64 + 64, k * 32:k * 32 + 32])
        T.tile.copy(B_s, B[k * 32:k * 32 + 32, bx * 64:bx * 64 + 64])
        T.tile.gemm(C_l, A_s, B_s, C_l, beta=1.0)
    T.tile.copy(C[by * 64:by * 64 + 64, bx * 64:bx * 64 + 64], C_l)
'''


def calls(func) -> list[tuple[str, list]]:
    found = []

    def visit(node):
        op = ops.intrinsic_of(node)
        if op is not None:
            found.append((op[0].name, op[1]))
    tvm_ffi.structural_walk(func.body, [(tirx.Evaluate, visit)], order="pre")
    return found


def test_three_kernels_each_with_its_own_calls():
    _, after = apply(kernel(GEMM), "TTSplitKernels")
    kernels = {gv.name_hint: f for gv, f in after.functions.items()}
    assert set(kernels) == {"reader", "compute", "writer"}
    for role, func in kernels.items():
        assert attrs.KERNEL_ROLE.get(func) == role
        allowed = {ops.READER: ops.READER, ops.COMPUTE: ops.COMPUTE, ops.WRITER: ops.WRITER}[role]
        for name, _ in calls(func):
            assert allowed in ops.OPS[name].roles, f"{name} in the {role} kernel"
    reads = {role: {str(args[2].value) for name, args in calls(f) if name == "read_tile"} for role, f in kernels.items()}
    writes = {role: {str(args[2].value) for name, args in calls(f) if name == "write_tile"} for role, f in kernels.items()}
    # each input is read by one data-movement kernel, the one the CB table names as its staging CB's producer
    assert reads["compute"] == set() and reads["reader"] | reads["writer"] == {"A", "B"}
    assert not reads["reader"] & reads["writer"] and writes == {"reader": set(), "compute": set(), "writer": {"C"}}
    assert not any(n.startswith(("read_", "write_", "noc_")) for n, _ in calls(kernels["compute"]))
    producers = {c["buffer"]: c["producer"] for c in attrs.CB_CONFIG.get(kernels["compute"])}
    for staging, dram in (("A_s", "A"), ("B_s", "B")):
        assert dram in reads[producers[staging]]


def test_runtime_and_compile_time_arguments():
    _, after = apply(kernel(GEMM), "TTSplitKernels")
    kernels = {gv.name_hint: f for gv, f in after.functions.items()}
    producers = {c["buffer"]: c["producer"] for c in attrs.CB_CONFIG.get(kernels["compute"])}
    for role in ("reader", "writer"):
        buffers = sorted([d for s_, d in (("A_s", "A"), ("B_s", "B")) if producers[s_] == role] + (["C"] if role == "writer" else []))
        args = attrs.RUNTIME_ARGS.get(kernels[role])
        addresses = [a["buffer"] for a in args if a["kind"] == "buffer_address"]
        assert sorted(addresses) == buffers and [a["kind"] for a in args[:len(buffers)]] == ["buffer_address"] * len(buffers)
        assert [a["name"] for a in args if a["kind"] == "work"] == list(WORK_ARGS)
        accessors = attrs.COMPILE_TIME_ARGS.get(kernels[role])
        assert sorted(a["buffer"] for a in accessors) == buffers and all(a["kind"] == "tensor_accessor" for a in accessors)
    compute = attrs.RUNTIME_ARGS.get(kernels["compute"])
    assert all(a["kind"] != "buffer_address" for a in compute) and attrs.COMPILE_TIME_ARGS.get(kernels["compute"]) == []
