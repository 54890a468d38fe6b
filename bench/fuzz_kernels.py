"""Differential testing of the compiler at scale: random TileLang kernels (tests/fuzz/kernelgen.py), each compiled
for both archs, run on the emulator and compared with the generator's own NumPy evaluation.

    .venv/bin/python bench/fuzz_kernels.py --seeds 0:2000 --jobs 2 --failures /tmp/fuzz-failures

Seeded and reproducible: a seed is a kernel (`--show SEED` prints it). Prints how many were generated, verified,
refused (by reason), and every unlocated refusal, crash, wrong or disagreeing result, with the kernel written to
--failures to turn into a regression test.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ARCHES = ("wormhole_b0", "blackhole")


def one(job: tuple[int, str]) -> dict:
    from tests.fuzz.kernelgen import generate
    from tests.fuzz.runner import run_case

    seed, arch = job
    started = time.perf_counter()
    try:
        result = run_case(generate(seed), arch)
        out = result.__dict__
    except Exception as error:      # the runner itself must not stop the batch: report it as a crash
        out = {"seed": seed, "family": "?", "arch": arch, "status": "crash", "detail": f"{type(error).__name__}: {error}"}
    out["seconds"] = round(time.perf_counter() - started, 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0:100", help="START:STOP (a range of seeds)")
    parser.add_argument("--arch", choices=("both", *ARCHES), default="both")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--failures", type=Path, help="write each failing kernel and its result here")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument("--show", type=int, help="print the kernel of one seed and exit")
    args = parser.parse_args()
    if args.show is not None:
        from tests.fuzz.kernelgen import generate
        print(generate(args.show).source)
        return 0
    start, stop = (int(x) for x in args.seeds.split(":"))
    arches = ARCHES if args.arch == "both" else (args.arch,)
    jobs = [(seed, arch) for seed in range(start, stop) for arch in arches]
    started = time.perf_counter()
    results = []
    with multiprocessing.get_context("spawn").Pool(args.jobs) as pool:
        for n, result in enumerate(pool.imap_unordered(one, jobs), 1):
            results.append(result)
            if result["status"] not in ("verified", "refused"):
                print(f"  seed {result['seed']} {result['arch']} {result['family']}: {result['status']}: "
                      f"{result['detail'][:300]}", flush=True)
            if n % 50 == 0:
                counts = Counter(r["status"] for r in results)
                print(f"  {n}/{len(jobs)} in {time.perf_counter() - started:.0f} s: "
                      + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), flush=True)
                if args.json:     # a batch cut short still leaves what it found
                    args.json.write_text(json.dumps(sorted(results, key=lambda r: (r["seed"], r["arch"])), indent=1))
    statuses = Counter(r["status"] for r in results)
    print(f"\n{len(jobs)} programs ({stop - start} kernels x {len(arches)} arch) in {time.perf_counter() - started:.0f} s")
    for status in ("verified", "refused", "unlocated", "crash", "wrong", "disagree"):
        print(f"  {status:10s} {statuses.get(status, 0)}")
    by_family = Counter((r["family"], r["status"]) for r in results)
    print("  by family: " + ", ".join(f"{f}/{s} {n}" for (f, s), n in sorted(by_family.items())))
    reasons = Counter(r["detail"] for r in results if r["status"] == "refused")
    if reasons:
        print("  refusals by reason:")
        for reason, n in reasons.most_common():
            print(f"    {n:4d}  {reason[:160]}")
    if args.failures:
        from tests.fuzz.kernelgen import generate
        args.failures.mkdir(parents=True, exist_ok=True)
        for r in results:
            if r["status"] not in ("verified", "refused"):
                stem = args.failures / f"seed{r['seed']}_{r['arch']}"
                stem.with_suffix(".py").write_text(generate(r["seed"]).source)
                stem.with_suffix(".txt").write_text(r["detail"])
    if args.json:
        args.json.write_text(json.dumps(sorted(results, key=lambda r: (r["seed"], r["arch"])), indent=1))
    return 1 if any(statuses.get(s) for s in ("unlocated", "crash", "wrong", "disagree")) else 0


if __name__ == "__main__":
    sys.exit(main())
