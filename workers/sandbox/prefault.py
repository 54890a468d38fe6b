"""Copy-on-write faults, paid ahead of the job.

A child of the warm zygote shares its ~1 GB address space copy-on-write. The first compile in a child writes a
few thousand of those pages (reference counts, caches, the allocator's free lists), and each write is a page fault
plus a copy: about 10 ms per job, as much as the rest of the sandbox together. The pages are nearly the same
every time, so the zygote learns them once (`learn`: a trial child runs a few compiles and reads which of
its pages became its own in /proc/self/pagemap) and every spare child copies them before its job arrives
(`populate`: one madvise(MADV_POPULATE_WRITE) per range, while the previous job still runs).
"""
from __future__ import annotations

import ctypes
import json
import os
from typing import Callable

PAGE = os.sysconf("SC_PAGE_SIZE")
MADV_POPULATE_WRITE = 23               # Linux 5.14
PRESENT, EXCLUSIVE = 1 << 63, 1 << 56  # pagemap bits: page present, mapped by this process only
MAX_PAGES = 64 * 1024                  # never pre-copy more than 256 MB, whatever the trial reported

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


def learn(trial: Callable[[], object]) -> list[tuple[int, int]]:
    """Run `trial` in a forked child and return the (start, length) ranges of the pages it wrote or added in
    the writable private mappings it shares with us. Empty when the kernel does not tell."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            trial()
            data = json.dumps(_own_pages()).encode()
        except BaseException:
            data = b"[]"
        with os.fdopen(write_end, "wb") as fh:
            fh.write(data)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    try:
        return [(int(start), int(length)) for start, length in json.loads(data)]
    except (ValueError, TypeError):
        return []


def _own_pages() -> list[tuple[int, int]]:
    import numpy as np

    ranges: list[tuple[int, int]] = []
    total = 0
    with open("/proc/self/maps") as fh:
        mappings = [line.split() for line in fh]
    with open("/proc/self/pagemap", "rb", buffering=0) as pagemap:
        for fields in mappings:
            if fields[1] != "rw-p" or (len(fields) > 5 and fields[5].startswith("[v")):  # [vvar], [vsyscall]
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            entries = np.frombuffer(os.pread(pagemap.fileno(), (end - start) // PAGE * 8, start // PAGE * 8), np.uint64)
            own = (entries & np.uint64(PRESENT | EXCLUSIVE)) == np.uint64(PRESENT | EXCLUSIVE)
            if not own.any():
                continue
            edges = np.flatnonzero(np.diff(np.concatenate(([0], own.astype(np.int8), [0]))))
            for first, stop in zip(edges[::2], edges[1::2]):
                ranges.append((start + int(first) * PAGE, int(stop - first) * PAGE))
                total += int(stop - first)
                if total >= MAX_PAGES:
                    return ranges
    return ranges


def populate(ranges: list[tuple[int, int]]) -> int:
    """Take private copies of these pages now (ranges no longer mapped are skipped). Returns the pages done."""
    done = 0
    for start, length in ranges:
        if _libc.madvise(start, length, MADV_POPULATE_WRITE) == 0:
            done += length // PAGE
    return done
