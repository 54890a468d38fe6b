"""Per-job overhead of the sandbox: a no-op job and a GEMM compile, in the sandbox vs in-process (warm).

Jobs run back to back (the next child is prepared while the current job runs, so a no-op job also waits for that)
and, for the no-op job, 50 ms apart (a prepared child is waiting: the cost on a job's own critical path)."""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from compiler import api  # noqa: E402
from schemas.target import TargetConfig  # noqa: E402
from farm.settings import Settings  # noqa: E402
from workers import sandbox  # noqa: E402

RUNS = 40


def timed(fn, runs: int = RUNS, gap_s: float = 0.0) -> list[float]:
    fn()
    out = []
    for _ in range(runs):
        time.sleep(gap_s)
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1e3)
    return sorted(out)


def row(name: str, samples: list[float]) -> str:
    p90 = samples[int(len(samples) * 0.9) - 1]
    return f"| {name} | {statistics.median(samples):.2f} | {p90:.2f} | {samples[0]:.2f} |"


def zygote_cpu_s(zygote) -> float:
    """User + system CPU of the zygote and of its children it has reaped (/proc/PID/stat utime..cstime)."""
    with open(f"/proc/{zygote.process.pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def paired(first, second, runs: int = RUNS) -> tuple[list[float], list[float], list[float]]:
    """Alternate the two so that whatever else the machine does weighs on both alike; (first, second, differences)."""
    first(), second()
    a, b = [], []
    for _ in range(runs):
        for fn, out in ((first, a), (second, b)):
            start = time.perf_counter()
            fn()
            out.append((time.perf_counter() - start) * 1e3)
    return sorted(a), sorted(b), sorted(x - y for x, y in zip(a, b))


STEPS = [("sent", "handed_over", "request to the zygote, handed to the prepared child"),
         ("handed_over", "op_start", "child: inputs, rlimits, drop to nobody, seccomp filter"),
         ("op_start", "op_end", "the op itself (compile, in the child)"),
         ("op_end", "returned", "answer: collect, pipe to the zygote and the worker, kill")]


def main() -> None:
    source = (REPO / "tests" / "data" / "gemm.py").read_text()
    with tempfile.TemporaryDirectory() as data:
        settings = Settings(data_dir=Path(data))
        started = time.perf_counter()
        zygote = sandbox.zygote_for(settings)
        start_s = time.perf_counter() - started
        noop = timed(lambda: zygote.run("noop", {}))
        noop_spaced = timed(lambda: zygote.run("noop", {}), gap_s=0.05)
        in_sandbox, in_process, overhead = paired(
            lambda: sandbox.compile_source(settings, source=source, filename="gemm.py", entry=None,
                                           target=TargetConfig(), dump_ir=False, params=None),
            lambda: api.compile_source(source, filename="gemm.py"))
        args = {"source": source, "filename": "gemm.py", "entry": None, "dump_ir": False, "params": {},
                "target": TargetConfig().model_dump(mode="json")}
        cpu_before, own_before = zygote_cpu_s(zygote), time.process_time()
        timelines = [zygote.run("compile", args).measures["timeline"] for _ in range(RUNS // 2)]
        zygote.run("noop", {})  # the last compile's child is reaped (its CPU time counted) after its reply
        sandbox_cpu = (zygote_cpu_s(zygote) - cpu_before) / (RUNS // 2 + 1) * 1e3
        own_cpu = (time.process_time() - own_before) / (RUNS // 2 + 1) * 1e3
        start_cpu = time.process_time()
        for _ in range(RUNS // 2):
            api.compile_source(source, filename="gemm.py")
        in_process_cpu = (time.process_time() - start_cpu) / (RUNS // 2) * 1e3
        measures = zygote.run("noop", {}).measures
        zygote.close()
    print(f"zygote start (import tvm, warm-up compiles, learn the pages a compile writes): {start_s:.2f} s; "
          f"namespaces: {measures['namespaces']}; uid {measures['uid']}; {zygote.info.get('prefault_pages')} pages "
          f"copied ahead of each job")
    print("| per job (ms) | median | p90 | min |\n| --- | --- | --- | --- |")
    print(row("sandbox no-op job, back to back (waits for the next child's preparation)", noop))
    print(row("sandbox no-op job, 50 ms apart (a prepared child is waiting)", noop_spaced))
    print(row("GEMM 128^3 compile in the sandbox", in_sandbox))
    print(row("GEMM 128^3 compile in-process (no sandbox), alternating with the above", in_process))
    print(row("overhead of the sandbox on a compile (paired differences; target <= 10 ms)", overhead))
    print(f"\nCPU per GEMM compile: {sandbox_cpu + own_cpu:.1f} ms in the sandbox (zygote, prepared child, job; "
          f"worker side {own_cpu:.1f} ms) vs {in_process_cpu:.1f} ms in-process: on a saturated machine the difference "
          f"is the latency overhead too")
    print("\nwhere a sandboxed compile's time goes (median ms):")
    for start, end, what in STEPS:
        print(f"- {what}: {statistics.median(t[end] - t[start] for t in timelines) * 1e3:.2f}")


if __name__ == "__main__":
    main()
