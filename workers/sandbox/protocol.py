"""What the worker (client.py) and the zygote (zygote.py) agree on: the job's limits and the files of an answer."""
from __future__ import annotations

import json
from dataclasses import dataclass

JOB_DIR = "/tmp/job"          # the child's only writable place (inside its mount namespace)
RESULT = "result.json"        # the op's answer, in the job's out/ directory
MEASURES = "measures.json"    # which restrictions were in force, written before the op runs
MAX_RESULT_BYTES = 64 * 1024 * 1024     # everything a job answers, together
MAX_INPUT_BYTES = 1024 * 1024 * 1024    # everything a job is given (the API's array limits are far below)


class SandboxError(Exception):
    """The sandbox itself failed (zygote gone, child killed by a signal, result missing)."""


class SandboxTimeout(SandboxError):
    def __init__(self, message: str, stderr: str = ""):
        super().__init__(message)
        self.stderr = stderr


class SandboxInterrupted(SandboxError):
    """The worker stopped the job (its stage's time limit, a cancel, a lost lease): its child was killed; `reply` is
    the zygote's last word on it (`killed`: on our request; an answer that crossed the request is dropped)."""

    def __init__(self, message: str, reply: dict):
        super().__init__(message)
        self.reply = reply


@dataclass
class Limits:
    cpu_s: int = 120
    memory_bytes: int = 4 * 1024**3        # address space the job may add to the zygote's
    file_bytes: int = 256 * 1024**2
    open_files: int = 256
    processes: int = 512                   # threads count: the emulator runs one per core
    wall_s: float = 150.0
    tmpfs_bytes: int = 512 * 1024**2       # everything the job writes, together


# ------------------------------------------------------------------------------------------ messages
# Every message between the worker, the zygote and a child is one JSON line followed by the bytes of the files it
# lists ({"files": [[name, size], ...]}, in that order). Nothing crosses as a path: the job has no host directory.

MAX_HEADER_BYTES = 4 * 1024 * 1024        # the JSON line (a kernel source travels in it)


def pack(header: dict, files: dict[str, bytes]) -> bytes:
    listed = [[name, len(data)] for name, data in files.items()]
    return json.dumps({**header, "files": listed}).encode() + b"\n" + b"".join(files.values())


def check_name(name: object) -> str:
    """A file name as one path component: no separators, no dot files, printable."""
    if (not isinstance(name, str) or not name or len(name) > 200 or "/" in name or "\0" in name
            or name.startswith(".") or not name.isprintable()):
        raise SandboxError(f"bad file name in a sandbox message: {str(name)[:80]!r}")
    return name


def listed_sizes(header: dict, budget: int) -> list[tuple[str, int]]:
    listed = header.get("files", [])
    if not isinstance(listed, list):
        raise SandboxError("bad file list in a sandbox message")
    sizes = []
    for item in listed:
        if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], int) and item[1] >= 0):
            raise SandboxError("bad file entry in a sandbox message")
        sizes.append((check_name(item[0]), item[1]))
    if sum(size for _, size in sizes) > budget:
        raise SandboxError(f"the sandbox's files exceed {budget} bytes")
    return sizes


def split(sizes: list[tuple[str, int]], blob: bytes) -> dict[str, bytes]:
    files, offset = {}, 0
    for name, size in sizes:
        files[name] = blob[offset:offset + size]
        offset += size
    return files


def read_message(stream, budget: int = MAX_RESULT_BYTES) -> tuple[dict, dict[str, bytes]]:
    """One message from a binary stream; EOFError when the stream ends first."""
    line = stream.readline(MAX_HEADER_BYTES)
    if not line.endswith(b"\n"):
        raise EOFError("the sandbox message ended early")
    try:
        header = json.loads(line)
    except ValueError as error:
        raise SandboxError(f"a sandbox message is not JSON: {error}") from None
    if not isinstance(header, dict):
        raise SandboxError("a sandbox message is not a JSON object")
    sizes = listed_sizes(header, budget)
    total = sum(size for _, size in sizes)
    blob = stream.read(total) if total else b""
    if len(blob) < total:
        raise EOFError("the sandbox message ended early")
    return header, split(sizes, blob)
