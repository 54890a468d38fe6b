"""Per-job overhead of the sandbox: a no-op job and a GEMM compile, in the sandbox vs in-process (warm).

Jobs run back to back (the next child is prepared while the current job runs, so a no-op job also waits for that)
and, for the no-op job, 50 ms apart (a prepared child is waiting: the cost on a job's own critical path)."""
from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from compiler import api  # noqa: E402
from schemas.target import TargetConfig  # noqa: E402
from service.settings import Settings  # noqa: E402
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


def main() -> None:
    source = (REPO / "tests" / "data" / "gemm.py").read_text()
    with tempfile.TemporaryDirectory() as data:
        settings = Settings(data_dir=Path(data))
        started = time.perf_counter()
        zygote = sandbox.zygote_for(settings)
        start_s = time.perf_counter() - started
        noop = timed(lambda: zygote.run("noop", {}))
        noop_spaced = timed(lambda: zygote.run("noop", {}), gap_s=0.05)
        in_sandbox = timed(lambda: sandbox.compile_source(settings, source=source, filename="gemm.py", entry=None,
                                                          target=TargetConfig(), dump_ir=False, params=None))
        in_process = timed(lambda: api.compile_source(source, filename="gemm.py"))
        measures = zygote.run("noop", {}).measures
        zygote.close()
    print(f"zygote start (import tvm, warm-up compiles, learn the pages a compile writes): {start_s:.2f} s; "
          f"namespaces: {measures['namespaces']}; uid {measures['uid']}; {zygote.info.get('prefault_pages')} pages "
          f"copied ahead of each job")
    print("| per job (ms) | median | p90 | min |\n| --- | --- | --- | --- |")
    print(row("sandbox no-op job, back to back (waits for the next child's preparation)", noop))
    print(row("sandbox no-op job, 50 ms apart (a prepared child is waiting)", noop_spaced))
    print(row("GEMM 128^3 compile in the sandbox", in_sandbox))
    print(row("GEMM 128^3 compile in-process (no sandbox)", in_process))
    print(f"overhead of the sandbox on a compile: {statistics.median(in_sandbox) - statistics.median(in_process):.2f} ms "
          f"(target <= 10 ms)")


if __name__ == "__main__":
    main()
