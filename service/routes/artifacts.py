"""/v1/jobs/{id}/artifacts and /bundle: what a job produced."""
from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Header, Response
from fastapi.responses import FileResponse

from schemas.jobs import ArtifactEntry, ArtifactManifest
from service import jobs
from service.bundle import bundle_files, pack
from service.deps import ArtifactsDep, ScopeDep, StoreDep
from service.problems import Problem
from farm.store import file_digest, media_type, safe_name

router = APIRouter(prefix="/v1/jobs/{job_id}", tags=["artifacts"])


@router.get("/artifacts", response_model=ArtifactManifest, summary="Manifest of the job's artifacts")
def list_artifacts(job_id: str, team: ScopeDep, store: StoreDep, artifacts: ArtifactsDep) -> ArtifactManifest:
    job = jobs.load(job_id, store, team)
    entries = []
    for name, path in artifacts.job_files(job).items():
        size, digest = file_digest(path)
        entries.append(ArtifactEntry(name=name, size=size, sha256=digest, media_type=media_type(name)))
    return ArtifactManifest(job_id=job.id, artifacts=entries)


@router.get("/artifacts/{name:path}", summary="One artifact (ETag; If-None-Match gives 304)",
            responses={200: {"content": {"application/octet-stream": {}}}, 304: {"description": "not modified"}})
def get_artifact(job_id: str, name: str, team: ScopeDep, store: StoreDep, artifacts: ArtifactsDep,
                 if_none_match: str | None = Header(default=None)):
    if not safe_name(name):
        raise Problem(400, f"invalid artifact name {name!r}", type_="/problems/bad-artifact-name")
    job = jobs.load(job_id, store, team)
    path = artifacts.job_files(job).get(name)
    if path is None:
        raise Problem(404, f"job {job_id} has no artifact {name!r}", type_="/problems/not-found")
    etag = f'"{file_digest(path)[1]}"'
    headers = {"ETag": etag, "Cache-Control": "private, max-age=31536000, immutable"}
    if if_none_match and etag in [tag.strip() for tag in if_none_match.split(",")] + ['"*"']:
        return Response(status_code=304, headers=headers)
    return FileResponse(path, media_type=media_type(name), headers=headers)  # streamed, not read whole


@router.get("/bundle", summary="Everything in one archive: artifacts, manifest.json, logs, IR dumps, emulator output",
            responses={200: {"content": {"application/gzip": {}, "application/zip": {}}}})
def get_bundle(job_id: str, team: ScopeDep, store: StoreDep, artifacts: ArtifactsDep,
               format: Literal["tar.gz", "zip"] = "tar.gz") -> Response:
    job = jobs.load(job_id, store, team)
    if not job.terminal:
        raise Problem(409, f"job {job_id} is {job.status}; the bundle is ready when it ends",
                      type_="/problems/job-not-finished", headers={"Retry-After": "1"})
    data = pack(bundle_files(job, store, artifacts), format, root=f"tilefarm-{job.id}")
    filename = f"tilefarm-{job.id}.{format}"
    return Response(data, media_type="application/zip" if format == "zip" else "application/gzip",
                    headers={"Content-Disposition": f'attachment; filename="{filename}"'})
