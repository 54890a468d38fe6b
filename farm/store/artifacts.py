"""Artifacts on the filesystem: content-keyed compile caches and per-job directories, each written whole and
atomically (a temporary directory renamed into place), names checked and every path opened without following
links."""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from pathlib import Path

from schemas.jobs import JobRecord
from schemas.values import printable, unicode_problem

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127}(/[A-Za-z0-9_][A-Za-z0-9_.\-]{0,127})?$")
_SEGMENT = re.compile(r"[^\W][\w.\-]{0,127}")  # a plain path segment: a word character first, no '/' or NUL
log = logging.getLogger("tilefarm.store")
CACHE_MANIFEST = "sha256sums.json"   # in every cache entry: {file name: sha256 of its bytes}, written with it
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
MEDIA_TYPES = {".cpp": "text/x-c++src", ".h": "text/x-chdr", ".json": "application/json", ".log": "text/plain",
               ".txt": "text/plain", ".npy": "application/x-npy", ".py": "text/x-python", ".tir": "text/plain",
               ".csv": "text/csv"}


def safe_name(name: str) -> bool:
    """Artifact names: one or two plain path segments, no '..', no absolute paths."""
    return bool(_SAFE_NAME.match(name)) and ".." not in name


class UnsafeName(ValueError):
    """A file or directory name the artifact store refuses to write (absolute, '..', a separator, a link...)."""

    def __init__(self, name: str):
        super().__init__(f"refusing to write {printable(name)[:200]!r}: not a plain name below the job's directory")


def file_name(name: object) -> bool:
    """What put_dir writes: one or two plain segments ('compute.cpp', 'ir/03_TTInferLayout.py'); no '..', no
    absolute path, no dot file, no separator other than one '/'."""
    if not isinstance(name, str) or unicode_problem(name) is not None:
        return False
    segments = name.split("/")
    return len(segments) <= 2 and all(_SEGMENT.fullmatch(s) and ".." not in s for s in segments)


def _open_dirs(start: int, parts, create: bool) -> int:
    """The directory `start`/parts[0]/parts[1]... opened without following a link at any step (created 0755 if
    missing and `create`). The caller closes the fd."""
    fd = os.dup(start)
    try:
        for part in parts:
            if not _SEGMENT.fullmatch(part):
                raise UnsafeName(part)
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            next_fd = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


def media_type(name: str) -> str:
    return MEDIA_TYPES.get(Path(name).suffix, "text/plain" if "/ir/" in f"/{name}" else "application/octet-stream")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_digest(path: Path) -> tuple[int, str]:
    """(size, sha256) of a stored file, read once: files are published whole and never changed in place, so the
    digest of the same inode, size and mtime is remembered (a job page polls its manifest while the job runs)."""
    info = os.stat(path)
    return _digest(str(path), info.st_ino, info.st_size, info.st_mtime_ns)


@functools.lru_cache(maxsize=4096)
def _digest(path: str, inode: int, size: int, mtime_ns: int) -> tuple[int, str]:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return size, digest.hexdigest()


def _compile_meta(files: dict[str, bytes]) -> None:
    """ValueError unless a compile entry holds its artifacts and a meta.json that says who compiled it, with what."""
    if "meta.json" not in files or "tt.plan.json" not in files:
        raise ValueError("no meta.json or tt.plan.json")
    meta = json.loads(files["meta.json"])
    if not (isinstance(meta, dict) and isinstance(meta.get("job_id"), str) and isinstance(meta.get("timings"), dict)
            and all(isinstance(v, (int, float)) for v in meta["timings"].values())):
        raise ValueError("meta.json is not a compile's record")


class ArtifactStore:
    """Files under data_dir. Every directory appears whole (written under tmp/, then renamed) or not at all.

    cache/<key>/compile/   the artifacts + compile.log + meta.json, shared by every job with that cache key
    cache/<key>/ir/        IR dumps (only when some job asked for them)
    quarantine/            cache entries that failed their check on read, set aside with why (for an operator)

    A cache entry (put_cache/read_cache) carries the sha256 of each of its files and is checked on every read: a
    truncated, edited or incomplete entry is set aside and reads as missing, so the next job rebuilds it instead of
    failing on it for ever.
    jobs/<id>/inputs/      emulation inputs (.bin) as submitted
    jobs/<id>/check/       real-header check report (header_check.json)
    jobs/<id>/emulate/     emulator outputs and report
    jobs/<id>/hardware/    device outputs (.npy), stdout/stderr, report.json
    """

    def __init__(self, root: str | Path):
        self.root = Path(root).resolve()
        for sub in ("cache", "jobs", "tmp"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    @staticmethod
    def _key_dir_name(key: str) -> str:
        return key if re.fullmatch(r"[A-Za-z0-9_\-]{1,128}", key) else sha256(key.encode())

    def cache_dir(self, key: str, part: str) -> Path:
        return self.root / "cache" / self._key_dir_name(key) / part

    def job_dir(self, job_id: str, part: str) -> Path:
        return self.root / "jobs" / job_id / part

    def put_dir(self, final: Path, files: dict[str, bytes]) -> bool:
        """Atomically publish `files` as directory `final` (below the store's root); False if it already existed
        (content-addressed: the same). Names are one or two plain path segments (file_name); every directory is
        opened relative to the root without following links and every file is created new (O_EXCL): nothing is
        written outside `final`, whatever the names say."""
        for name in files:
            if not file_name(name):
                raise UnsafeName(name)
        try:
            parts = final.relative_to(self.root).parts
        except ValueError:
            raise UnsafeName(str(final)) from None
        if not parts or not all(_SEGMENT.fullmatch(part) for part in parts):
            raise UnsafeName(str(final))
        root = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            parent = _open_dirs(root, parts[:-1], create=True)
            try:
                try:  # already published (content-addressed): the same files
                    os.close(os.open(parts[-1], _DIR_FLAGS, dir_fd=parent))
                    return False
                except FileNotFoundError:
                    pass
                tmp_name = uuid.uuid4().hex
                tmp_parent = _open_dirs(root, ("tmp",), create=True)
                try:
                    self._write_tree(tmp_parent, tmp_name, files)
                    try:
                        os.rename(tmp_name, parts[-1], src_dir_fd=tmp_parent, dst_dir_fd=parent)
                        return True
                    except OSError:  # a concurrent writer won the race; its directory is complete and identical
                        shutil.rmtree(tmp_name, dir_fd=tmp_parent, ignore_errors=True)
                        return False
                finally:
                    os.close(tmp_parent)
            finally:
                os.close(parent)
        finally:
            os.close(root)

    @staticmethod
    def _write_tree(parent: int, name: str, files: dict[str, bytes]) -> None:
        os.mkdir(name, 0o755, dir_fd=parent)
        top = os.open(name, _DIR_FLAGS, dir_fd=parent)
        try:
            for path, data in files.items():
                *dirs, file = path.split("/")
                where = _open_dirs(top, dirs, create=True) if dirs else top
                try:
                    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644,
                                 dir_fd=where)
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(data)
                finally:
                    if where != top:
                        os.close(where)
        finally:
            os.close(top)

    def put_cache(self, key: str, part: str, files: dict[str, bytes]) -> bool:
        """Publish a cache entry with its checksums (False: an entry that checks out was already there)."""
        sums = {name: sha256(data) for name, data in files.items()}
        return self.put_dir(self.cache_dir(key, part), {**files, CACHE_MANIFEST: json.dumps(sums, indent=1).encode()})

    def read_cache(self, key: str, part: str, check=None) -> dict[str, bytes] | None:
        """The entry's files, if they are exactly those its checksums name (and `check(files)`, the caller's own
        test of their content, raises no ValueError); None for a missing entry, and for a corrupt one, which is set
        aside (quarantine/) so that its next writer rebuilds it."""
        directory = self.cache_dir(key, part)
        try:
            identity = os.stat(directory, follow_symlinks=False)
            files = self.read_dir(directory)
        except OSError:  # missing, or set aside by another reader meanwhile
            return None
        try:
            if not files:
                raise ValueError("the entry is empty")
            sums = json.loads(files.pop(CACHE_MANIFEST, b"null"))
            if not isinstance(sums, dict):
                raise ValueError(f"no checksums ({CACHE_MANIFEST} missing or not an object)")
            if set(sums) != set(files):
                raise ValueError(f"files {sorted(set(sums) ^ set(files))[:5]} are missing or not checksummed")
            bad = [name for name, data in files.items() if sums[name] != sha256(data)]
            if bad:
                raise ValueError(f"{', '.join(sorted(bad)[:5])} differ from their checksums")
            if check is not None:
                check(files)
        except ValueError as error:
            self._set_aside(directory, identity, f"cache entry {key}/{part}: {printable(error)[:500]}")
            return None
        return files

    def compiled(self, key: str, with_ir: bool = False) -> tuple[dict[str, bytes], dict] | None:
        """A compile's cache entry: (its files, meta.json as a dict) when it checks out, and its IR dumps' entry
        too when `with_ir`; None when the source must be compiled (again)."""
        found = self.read_cache(key, "compile", check=_compile_meta)
        if found is None or (with_ir and self.read_cache(key, "ir") is None):
            return None
        return found, json.loads(found["meta.json"])

    def _set_aside(self, directory: Path, identity: os.stat_result, reason: str) -> None:
        """Move a corrupt entry out of the way (unless another reader already did, or a writer already replaced it)."""
        log.warning("%s; set aside, it will be rebuilt", reason)
        quarantine = self.root / "quarantine"
        quarantine.mkdir(exist_ok=True)
        try:
            now = os.stat(directory, follow_symlinks=False)
            if (now.st_ino, now.st_dev) != (identity.st_ino, identity.st_dev):
                return
            aside = quarantine / f"{directory.parent.name}-{directory.name}-{uuid.uuid4().hex[:8]}"
            os.rename(directory, aside)
            (quarantine / f"{aside.name}.why").write_text(reason + "\n")
        except OSError:
            pass

    @staticmethod
    def read_dir(directory: Path) -> dict[str, bytes]:
        if not directory.is_dir():
            return {}
        return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}

    def has(self, directory: Path) -> bool:
        return directory.is_dir()

    def job_files(self, job: JobRecord) -> dict[str, Path]:
        """Every downloadable file of a job, by artifact name."""
        files: dict[str, Path] = {}
        if job.cache_key:
            compile_dir = self.cache_dir(job.cache_key, "compile")
            if compile_dir.is_dir():
                files.update({p.name: p for p in sorted(compile_dir.iterdir())
                              if p.is_file() and p.name not in ("meta.json", CACHE_MANIFEST)})
            ir_dir = self.cache_dir(job.cache_key, "ir")
            if job.dump_ir and ir_dir.is_dir():
                files.update({f"ir/{p.name}": p for p in sorted(ir_dir.iterdir()) if p.is_file() and p.name != CACHE_MANIFEST})
        for part in ("check", "emulate", "hardware"):  # real-header check report, emulator / device outputs
            part_dir = self.job_dir(job.id, part)
            if part_dir.is_dir():
                files.update({f"{part}/{p.name}": p for p in sorted(part_dir.iterdir()) if p.is_file()})
        return files

    def sweep_tmp(self, older_than_s: float = 3600) -> None:
        """Remove what writers that died mid-write left behind."""
        cutoff = time.time() - older_than_s
        for path in (self.root / "tmp").iterdir():
            if path.stat().st_mtime < cutoff:
                shutil.rmtree(path, ignore_errors=True)
