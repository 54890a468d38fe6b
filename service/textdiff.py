"""Unified diffs of untrusted texts, bounded: in a child process of their own (never the API's threads or its
interpreter lock), niced, under CPU-time and memory limits, killed at a deadline, a few at a time.

difflib is exact but its cost depends on the texts' shape, not only their size: two ~227 KB sources of many
near-identical lines took 34 s of the API's CPU on its shared thread pool. Here such a pair costs at most the
deadline, in a process that is killed then; the diffs finished before it are kept, the others say why they are
missing.

Run as a script (`python -I -S textdiff.py SECONDS`), it is that child: it reads [[name, a, b, label_a, label_b],
...] as JSON on stdin and writes one JSON line {"name", "diff"} per pair as each is done. Standard library only, so
the child starts in milliseconds.
"""
from __future__ import annotations

import asyncio
import difflib
import json
import os
import sys
from contextlib import asynccontextmanager

CHILD_MEMORY_BYTES = 1 << 30
MAX_ANSWER_LINE = 1 << 28   # one pair's diff, as a JSON line (a diff of wholly different texts holds both)
_slots: dict[object, asyncio.Semaphore] = {}   # per event loop


class DiffBusy(Exception):
    """Every diff slot stayed taken until the deadline."""


@asynccontextmanager
async def _slot(concurrency: int, seconds: float):
    loop = asyncio.get_running_loop()
    semaphore = _slots.setdefault(loop, asyncio.Semaphore(concurrency))
    try:
        await asyncio.wait_for(semaphore.acquire(), seconds)
    except TimeoutError:
        raise DiffBusy(f"all {concurrency} diff slots stayed busy for {seconds:g} s") from None
    try:
        yield
    finally:
        semaphore.release()


async def unified_diffs(pairs: list[tuple[str, str, str, str, str]], *, seconds: float,
                        concurrency: int = 2) -> dict[str, str]:
    """{name: unified diff} of each (name, a, b, label_a, label_b) finished within `seconds` (the wait for a slot
    included); a pair missing from the answer was not done in time. DiffBusy when no slot came free."""
    if not pairs:
        return {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    async with _slot(concurrency, seconds):
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", os.path.abspath(__file__), str(max(1, int(seconds) + 1)),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True, limit=MAX_ANSWER_LINE)
        done: dict[str, str] = {}

        async def exchange() -> None:
            process.stdin.write(json.dumps(pairs).encode())
            await process.stdin.drain()
            process.stdin.close()
            async for line in process.stdout:
                item = json.loads(line)
                done[item["name"]] = item["diff"]

        try:
            await asyncio.wait_for(exchange(), max(0.0, deadline - loop.time()))
        except (TimeoutError, BrokenPipeError, ConnectionResetError, ValueError):
            pass  # out of time (or the child died at its limits): what it finished is kept
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()
        return done


def _child(cpu_seconds: int) -> None:
    import resource

    os.nice(10)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds))
    resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    for name, a, b, label_a, label_b in json.load(sys.stdin):
        patch = "".join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), label_a, label_b))
        sys.stdout.write(json.dumps({"name": name, "diff": patch}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _child(int(sys.argv[1]))
