"""Page faults, paid ahead of the job.

A child of the warm zygote shares its ~0.5 GB address space copy-on-write. The first compile in a child writes a
few thousand of those pages (reference counts, caches, the allocator's free lists), and each write is a page fault
plus a copy: about 10 ms per job, as much as the rest of the sandbox together; it also reads code and data pages
of the shared libraries, whose page table entries a fork does not copy (a few hundred more faults). The pages are
nearly the same every time, so the zygote learns them once (`learn`: a trial child runs a few compiles and reads
in /proc/self/pagemap which pages became its own and which file pages it touched) and every spare child takes
them before its job arrives (`populate`: madvise MADV_POPULATE_WRITE / MADV_POPULATE_READ per range, while the
previous job still runs). Measured: ~2,650 pages copied, the first compile's faults 263 -> ~10.
"""
from __future__ import annotations

import ctypes
import json
import os
from dataclasses import dataclass, field
from typing import Callable

PAGE = os.sysconf("SC_PAGE_SIZE")
MADV_POPULATE_READ, MADV_POPULATE_WRITE = 22, 23   # Linux 5.14
PRESENT, EXCLUSIVE = 1 << 63, 1 << 56  # pagemap bits: page present, mapped by this process only
MAX_PAGES = 64 * 1024                  # never pre-copy more than 256 MB, whatever the trial reported

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)


@dataclass
class Hot:
    """What a compile touches in a fresh child: pages it writes (copied ahead) and file pages it reads (mapped
    ahead: a child's page tables for read-only file mappings start empty, each first touch is a fault)."""
    write: list[tuple[int, int]] = field(default_factory=list)
    read: list[tuple[int, int]] = field(default_factory=list)

    @property
    def pages(self) -> int:
        return sum(length for _, length in self.write) // PAGE


def learn(trial: Callable[[], object]) -> Hot:
    """Run `trial` in a forked child and return the pages it wrote or added in the writable private mappings it
    shares with us, and the pages it read in read-only file mappings. Empty when the kernel does not tell."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            trial()
            data = json.dumps(_touched_pages()).encode()
        except BaseException:
            data = b"{}"
        with os.fdopen(write_end, "wb") as fh:
            fh.write(data)
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        data = fh.read()
    os.waitpid(pid, 0)
    try:
        found = json.loads(data)
        return Hot(*([(int(start), int(length)) for start, length in found.get(kind, [])] for kind in ("write", "read")))
    except (ValueError, TypeError, AttributeError):
        return Hot()


def _touched_pages() -> dict[str, list[tuple[int, int]]]:
    import numpy as np

    found: dict[str, list[tuple[int, int]]] = {"write": [], "read": []}
    budget = {"write": MAX_PAGES, "read": MAX_PAGES}
    with open("/proc/self/maps") as fh:
        mappings = [line.split() for line in fh]
    with open("/proc/self/pagemap", "rb", buffering=0) as pagemap:
        for fields in mappings:
            path = fields[5] if len(fields) > 5 else ""
            if fields[1] == "rw-p" and not path.startswith("[v"):  # not [vvar], [vsyscall]
                kind, want = "write", PRESENT | EXCLUSIVE  # pages now ours: written (or added) by the trial
            elif "w" not in fields[1] and path.startswith("/"):
                kind, want = "read", PRESENT  # fork copies no page table entries here: present = touched
            else:
                continue
            start, end = (int(x, 16) for x in fields[0].split("-"))
            entries = np.frombuffer(os.pread(pagemap.fileno(), (end - start) // PAGE * 8, start // PAGE * 8), np.uint64)
            hit = (entries & np.uint64(want)) == np.uint64(want)
            if not hit.any():
                continue
            edges = np.flatnonzero(np.diff(np.concatenate(([0], hit.astype(np.int8), [0]))))
            for first, stop in zip(edges[::2], edges[1::2]):
                if budget[kind] <= 0:
                    break
                found[kind].append((start + int(first) * PAGE, int(stop - first) * PAGE))
                budget[kind] -= int(stop - first)
    return found


def populate(hot: Hot) -> int:
    """Take private copies of the pages written, map the pages read (ranges no longer mapped are skipped).
    Returns the pages copied."""
    for start, length in hot.read:
        _libc.madvise(start, length, MADV_POPULATE_READ)
    done = 0
    for start, length in hot.write:
        if _libc.madvise(start, length, MADV_POPULATE_WRITE) == 0:
            done += length // PAGE
    return done
