#!/usr/bin/env python3
"""Each test file's seconds in a run's JUnit XML (`pytest --junitxml=FILE`), written to tests/file_seconds.json:
the order tests/conftest.py hands the files to the test processes in (the longest first)."""
from __future__ import annotations

import collections
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "file_seconds.json"


def main(junit: str) -> None:
    seconds: collections.Counter = collections.Counter()
    for case in ET.parse(junit).iter("testcase"):
        module = case.get("classname", "")  # tests.web.test_first_day (or .Class within it)
        parts = module.split(".")
        while parts and not parts[-1].startswith("test_"):
            parts.pop()
        if parts:
            seconds["/".join(parts) + ".py"] += float(case.get("time") or 0)
    OUT.write_text(json.dumps({name: round(s, 1) for name, s in sorted(seconds.items())}, indent=0) + "\n")
    print(f"{OUT}: {len(seconds)} files, {sum(seconds.values()):.0f} s")


if __name__ == "__main__":
    main(sys.argv[1])
