"""Run every bench/ script and write their output to BENCHMARKS.md with the machine and the date."""
from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()} — {cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"


def main() -> int:
    sections = [f"# Benchmarks\n\nMeasured {datetime.datetime.now().isoformat(timespec='minutes')} on {machine()}.\n"]
    status = 0
    for script in sorted(HERE.glob("*.py")):
        if script.name == "run_all.py":
            continue
        print(f"== {script.name}", flush=True)
        proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=HERE.parent)
        print(proc.stdout, end="")
        if proc.returncode:
            status = 1
            print(proc.stderr, file=sys.stderr)
        sections.append(f"## {script.name}\n\n```\n{proc.stdout.strip()}\n```\n")
    (HERE.parent / "BENCHMARKS.md").write_text("\n".join(sections))
    return status


if __name__ == "__main__":
    sys.exit(main())
