"""The job bundle: the artifacts, manifest.json (checksums, compiler version, target, timings) and the logs."""
from __future__ import annotations

import io
import json
import tarfile
import time
import zipfile

from compiler.version import COMPILER_VERSION
from schemas.jobs import JobRecord
from service.storage import ArtifactStore, JobStore, media_type, sha256


def bundle_files(job: JobRecord, store: JobStore, artifacts: ArtifactStore) -> dict[str, bytes]:
    files = {name: path.read_bytes() for name, path in artifacts.job_files(job).items()}
    files["logs/job.log"] = store.read_log(job.id).encode()
    if "compile.log" in files:
        files["logs/compile.log"] = files.pop("compile.log")
    meta_path = artifacts.cache_dir(job.cache_key, "compile") / "meta.json" if job.cache_key else None
    compiled = json.loads(meta_path.read_text()) if meta_path and meta_path.is_file() else {}
    manifest = {
        "job_id": job.id,
        "status": job.status,
        "compiler_version": compiled.get("compiler_version", COMPILER_VERSION),
        "cache_key": job.cache_key,
        "cache_hit": job.cache_hit,
        "entry": job.entry,
        "target": job.target.model_dump(mode="json"),
        "stages": {s.name: {"state": s.state, "duration_s": s.duration_s} for s in job.stages},
        "compile_timings": job.compile_timings,
        "diagnostics": [d.model_dump() for d in job.diagnostics],
        "header_check": job.header_check,
        "device_run": job.device_run,
        "files": [{"name": name, "size": len(data), "sha256": sha256(data), "media_type": media_type(name)}
                  for name, data in sorted(files.items())],
    }
    files["manifest.json"] = json.dumps(manifest, indent=2).encode()
    return files


def pack(files: dict[str, bytes], fmt: str, root: str) -> bytes:
    buffer = io.BytesIO()
    now = time.time()
    if fmt == "zip":
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for name, data in files.items():
                archive.writestr(f"{root}/{name}", data)
    else:
        with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=6) as archive:
            for name, data in files.items():
                info = tarfile.TarInfo(f"{root}/{name}")
                info.size, info.mtime, info.mode = len(data), now, 0o644
                archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
