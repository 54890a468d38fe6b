"""The job bundle: the artifacts, the source, request.json (everything to submit it again), manifest.json (checksums,
compiler version, the full options, timings, warnings) and the logs."""
from __future__ import annotations

import io
import json
import tarfile
import time
import zipfile

from compiler.version import COMPILER_VERSION
from schemas.jobs import JobRecord
from farm.store import ArtifactStore, JobStore, media_type, sha256


def bundle_files(job: JobRecord, store: JobStore, artifacts: ArtifactStore) -> dict[str, bytes]:
    from service.jobs import request_of

    files = {name: path.read_bytes() for name, path in artifacts.job_files(job).items()}
    # the request as submitted, minus the inputs' bytes (inputs/ holds them): `POST /v1/jobs` of request.json with
    # the source put back in makes the same job
    request = request_of(job).model_dump(mode="json", exclude={"source", "inputs"})
    request["source_file"] = f"source/{job.filename}"
    request["inputs"] = {name: meta.model_dump() for name, meta in job.inputs.items()}
    files[f"source/{job.filename}"] = job.source.encode()
    files.update(_inputs(job, artifacts))
    files["request.json"] = json.dumps(request, indent=2).encode()
    files["logs/job.log"] = store.read_log(job.id).encode()
    if "compile.log" in files:
        files["logs/compile.log"] = files.pop("compile.log")
    cached = artifacts.compiled(job.cache_key) if job.cache_key else None
    compiled = cached[1] if cached else {}
    manifest = {
        "job_id": job.id,
        "status": job.status,
        "compiler_version": compiled.get("compiler_version", job.compiler_version or COMPILER_VERSION),
        "cache_key": job.cache_key,
        "cache_hit": job.cache_hit,
        "entry": job.entry,
        "params": job.params,
        "filename": job.filename,
        "target": job.target.model_dump(mode="json"),
        "dump_ir": job.dump_ir,
        "resubmitted_from": job.resubmitted_from,
        "stages": {s.name: {"state": s.state, "duration_s": s.duration_s} for s in job.stages},
        "compile_timings": job.compile_timings,
        "diagnostics": [d.model_dump() for d in job.diagnostics],
        "warnings": [w.model_dump() for w in job.warnings],
        "header_check": job.header_check,
        "device_run": job.device_run,
        "files": [{"name": name, "size": len(data), "sha256": sha256(data), "media_type": media_type(name)}
                  for name, data in sorted(files.items())],
    }
    files["manifest.json"] = json.dumps(manifest, indent=2).encode()
    return files


def _inputs(job: JobRecord, artifacts: ArtifactStore) -> dict[str, bytes]:
    """The job's emulation inputs as inputs/<name>.npy (kept as raw bytes of their dtype; bfloat16 widened to float32,
    exactly, since a .npy of ml_dtypes' bfloat16 needs ml_dtypes to be read)."""
    if not job.inputs:
        return {}
    import ml_dtypes
    import numpy as np

    files = {}
    for name, meta in job.inputs.items():
        raw = (artifacts.job_dir(job.id, "inputs") / f"{name}.bin").read_bytes()
        buffer = io.BytesIO()
        array = np.frombuffer(raw, dtype=np.dtype(meta.dtype)).reshape(meta.shape)
        np.save(buffer, array.astype(np.float32) if array.dtype == ml_dtypes.bfloat16 else array)
        files[f"inputs/{name}.npy"] = buffer.getvalue()
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
