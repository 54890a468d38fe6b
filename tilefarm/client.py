"""tilefarm.client: the service's Python client, sync and async, typed with the shared pydantic schemas (schemas/).

    from tilefarm.client import Client

    with Client("http://127.0.0.1:8000") as farm:                 # or TILEFARM_SERVER / TILEFARM_API_KEY
        job = farm.submit(Path("examples/tilelang/gemm.py"), entry="matmul", target="blackhole",
                          params={"M": 256, "N": 256, "K": 128}, inputs={"A": a, "B": b})
        job.wait(on_progress=lambda view: print(view.status, view.progress))
        c = job.outputs()["C"]                                    # NumPy arrays, in each buffer's dtype
        job.download_bundle("out/")                               # artifacts, manifest.json, logs, request.json

`AsyncClient` has the same methods as coroutines (`await farm.submit(...)`, `await job.wait()`,
`async for line in job.follow_logs()`). Every failure is a `TilefarmError`: `ApiError` (the service's
problem+json: `.status`, `.type`, `.detail`, `.problem`) or `ConnectionFailed`. The `tilefarm` CLI is built on this.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import io
import json
import os
import sys
import tarfile
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path, PurePosixPath

import httpx

from schemas.jobs import (TERMINAL, ArtifactManifest, InputArray, JobDiff, JobList, JobOverrides, JobRequest,
                          JobView)
from schemas.target import TargetConfig

DEFAULT_SERVER = "http://127.0.0.1:8000"
USER_AGENT = "tilefarm-client"
Progress = Callable[[JobView], None]


class TilefarmError(Exception):
    """Anything the client could not do."""


class ConnectionFailed(TilefarmError):
    def __init__(self, server: str, error: Exception):
        super().__init__(f"cannot reach {server}: {error}")
        self.server = server


class ApiError(TilefarmError):
    """An error answer of the service (RFC 9457 problem+json)."""

    def __init__(self, method: str, path: str, status: int, problem: dict):
        self.method, self.path, self.status, self.problem = method, path, status, problem
        self.type = problem.get("type", "about:blank")
        self.title = problem.get("title", "")
        self.detail = problem.get("detail") or self.title or f"HTTP {status}"
        self.errors: list[dict] = problem.get("errors") or []
        super().__init__(f"{method} {path}: {status} {self.detail}")


class JobFailed(TilefarmError):
    """Raised by `Job.result()` when the job failed or was cancelled; `.job` is its final view."""

    def __init__(self, job: JobView):
        first = job.diagnostics[0].rendered or job.diagnostics[0].message if job.diagnostics else job.error
        super().__init__(f"job {job.id} {job.status}" + (f": {first}" if first else ""))
        self.job = job


# ---------------------------------------------------------------------------------------------- shared logic

def _kernel(kernel: str | os.PathLike, filename: str | None) -> tuple[str, str]:
    """(source text, file name): a path is read; a str is the source text if it has a newline, else a path."""
    if isinstance(kernel, str) and "\n" in kernel:
        return kernel, filename or "kernel.py"
    path = Path(kernel)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        raise TilefarmError(f"{path}: cannot read source: {error}") from None
    return text, filename or _safe_filename(path.name)


def _safe_filename(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "_.-" else "_" for c in name)
    return cleaned or "kernel.py"


def encode_array(array) -> InputArray:
    """A NumPy array (float32/float16/bfloat16/int) -> the API's input: little-endian bytes as base64."""
    import ml_dtypes  # noqa: F401  (registers bfloat16 with numpy)
    import numpy as np

    array = np.ascontiguousarray(array)
    dtype = array.dtype.name
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.byteswap().view(array.dtype.newbyteorder("<"))
    return InputArray(shape=list(array.shape), dtype=dtype, data=base64.b64encode(array.tobytes()).decode())


def build_request(kernel: str | os.PathLike, *, filename: str | None = None, entry: str | None = None,
                  params: dict | None = None, target: str | TargetConfig | dict | None = None,
                  stages: list[str] | None = None, inputs: dict | None = None, dump_ir: bool = False,
                  queue: bool = False, **target_options) -> JobRequest:
    """The POST /v1/jobs body. `target` is an arch name (with `target_options` such as core_grid=(4, 2),
    partition=, cb_depth=, math_fidelity=), a TargetConfig, or its dict."""
    source, name = _kernel(kernel, filename)
    if isinstance(target, TargetConfig):
        config = target.model_copy(update=target_options)
    elif isinstance(target, dict):
        config = TargetConfig.model_validate({**target, **target_options})
    else:
        config = TargetConfig.model_validate({**({"arch": target} if target else {}), **target_options})
    return JobRequest(source=source, filename=name, entry=entry, params=params or {}, target=config, stages=stages,
                      inputs={k: v if isinstance(v, InputArray) else encode_array(v) for k, v in (inputs or {}).items()},
                      dump_ir=dump_ir, queue=queue)


def _headers(api_key: str | None, team: str | None) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if team:
        headers["X-Team"] = team
    return headers


def _connection(server: str | None, api_key: str | None, team: str | None, timeout: float) -> tuple[str, dict]:
    """(server URL, httpx client arguments): defaults from TILEFARM_SERVER and TILEFARM_API_KEY."""
    server = (server or os.environ.get("TILEFARM_SERVER") or DEFAULT_SERVER).rstrip("/")
    api_key = api_key if api_key is not None else os.environ.get("TILEFARM_API_KEY")
    return server, {"base_url": server, "headers": _headers(api_key, team), "timeout": httpx.Timeout(timeout, connect=5)}


def _check(response: httpx.Response) -> httpx.Response:
    if response.status_code >= 400:
        try:
            problem = response.json()
            if not isinstance(problem, dict):
                raise ValueError
        except ValueError:
            problem = {"detail": response.text[:300] or response.reason_phrase}
        raise ApiError(response.request.method, response.request.url.path, response.status_code, problem)
    return response


def _changed(old: JobView | None, new: JobView) -> bool:
    if old is None:
        return True
    keys = ("status", "stage", "progress")
    return any(getattr(old, k) != getattr(new, k) for k in keys) or \
        [s.state for s in old.stages] != [s.state for s in new.stages]


def _log_chunk(event) -> str:
    """The text of a `log` event of the log stream (lines, each ending in a newline); "" for any other event."""
    return event.data + "\n" if event.event == "log" else ""


def _waiting(view: JobView, timeout: float | None, on_progress: Progress | None, poll_s: float):
    """The wait loop without its I/O: yields how long the next GET may long-poll, is sent the view it got, returns
    the final view (shared by Job.wait and AsyncJob.wait)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    last = None
    while True:
        if on_progress is not None and _changed(last, view):
            on_progress(view)
            last = view
        if view.terminal:
            return view
        left = 30.0 if deadline is None else deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"job {view.id} is still {view.status} after {timeout:g} s")
        view = yield min(left, poll_s if on_progress else 30.0)


def _outputs(manifest: ArtifactManifest, fetch: Callable[[str], bytes], plan: dict | None) -> dict:
    import ml_dtypes
    import numpy as np

    dtypes = {b["name"]: b["dtype"] for b in (plan or {}).get("buffers", [])}
    numpy_dtypes = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
    names = [a.name for a in manifest.artifacts if a.name.endswith(".npy")]
    # the device's outputs when the job ran on one, else the emulator's
    chosen = [n for n in names if n.startswith("hardware/")] or [n for n in names if n.startswith("emulate/")]
    arrays = {}
    for name in chosen:
        buffer = Path(name).stem
        array = np.load(io.BytesIO(fetch(name)), allow_pickle=False)
        kind = numpy_dtypes.get(dtypes.get(buffer, ""))
        arrays[buffer] = array.astype(kind) if kind is not None else array  # exact: the values are of that type
    return arrays


# What a bundle may unpack to: far above any job's (the service caps a job's artifacts at MAX_JOB_BYTES, 256 MiB by
# default; inputs at 64 MiB), far below what a hostile archive would make (a 204 KB tar.gz held 200 MB of zeros)
MAX_BUNDLE_BYTES = 1 << 30
MAX_BUNDLE_MEMBERS = 20_000
_CHUNK = 1 << 20


class BundleRefused(TilefarmError):
    """A bundle that is not one the service makes: a link, a device, a path out of the destination, or more
    members or bytes than any job has. Nothing of it is left in the destination."""


def _member_path(name: str) -> PurePosixPath | None:
    """The member's path below the bundle's top folder, or None for the top folder itself; BundleRefused for any
    name that is not plain relative segments."""
    if "\\" in name or "\0" in name:
        raise BundleRefused(f"bundle member {name[:200]!r} has a backslash or NUL in its name")
    path = PurePosixPath(name)
    if path.is_absolute() or any(part in ("", ".", "..") for part in name.rstrip("/").split("/")):
        raise BundleRefused(f"bundle member {name[:200]!r} is not a plain relative path")
    return PurePosixPath(*path.parts[1:]) if len(path.parts) > 1 else None


def unpack_bundle(data: bytes, destination: str | os.PathLike, *, max_bytes: int = MAX_BUNDLE_BYTES,
                  max_members: int = MAX_BUNDLE_MEMBERS) -> list[Path]:
    """A tar.gz bundle -> files under `destination` (its top folder dropped). Read as a stream, member by member:
    only plain files and folders with plain relative names (no links, devices, FIFOs or sparse files, nothing
    absolute or through '..'), at most `max_members` of them and `max_bytes` unpacked, each file written through
    no link (mode 0644, whatever the archive says). Anything else raises BundleRefused and removes what this call
    wrote."""
    destination = Path(destination)
    destination.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    made: list[Path] = []
    try:
        _unpack(data, destination, max_bytes, max_members, written, made)
    except BaseException as error:
        for path in written:
            path.unlink(missing_ok=True)
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        if isinstance(error, (tarfile.TarError, EOFError, OSError, zlib.error)):
            raise BundleRefused(f"the bundle is not a tar.gz this client can unpack here: {error}") from None
        raise
    return sorted(set(written))


def _unpack(data: bytes, destination: Path, max_bytes: int, max_members: int, written: list[Path],
            made: list[Path]) -> None:
    total = 0
    with tarfile.open(fileobj=io.BytesIO(data), mode="r|gz") as archive:
        for count, member in enumerate(archive, 1):
            if count > max_members:
                raise BundleRefused(f"the bundle has more than {max_members} members")
            relative = _member_path(member.name)
            if not (member.isfile() or member.isdir()) or member.issparse():
                kind = "a link" if member.issym() or member.islnk() else "a device, FIFO or sparse file"
                raise BundleRefused(f"bundle member {member.name[:200]!r} is {kind}, which bundles never hold")
            if relative is None:
                continue
            target = destination.joinpath(*relative.parts)
            folders = [destination.joinpath(*relative.parts[:i]) for i in range(1, len(relative.parts) + member.isdir())]
            for path in [*folders, target]:
                if path.is_symlink():
                    raise BundleRefused(f"bundle member {member.name[:200]!r} would be written through the link {path}")
            for folder in folders:
                if not folder.is_dir():
                    folder.mkdir()
                    made.append(folder)
            if member.isdir():
                continue
            total += member.size
            if total > max_bytes:
                raise BundleRefused(f"the bundle unpacks to more than {max_bytes} bytes")
            source = archive.extractfile(member)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
            written.append(target)
            with os.fdopen(fd, "wb") as out:
                while chunk := source.read(_CHUNK):
                    out.write(chunk)


class _JobHandle:
    """A job on the service; `view` is its state when last fetched."""

    def __init__(self, client, view: JobView):
        self.client, self.view = client, view

    @property
    def id(self) -> str:
        return self.view.id

    @property
    def status(self) -> str:
        return self.view.status

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} {self.view.status}>"


# ---------------------------------------------------------------------------------------------- sync

class Job(_JobHandle):
    """A job on the service (sync); `view` is its state when last fetched."""

    def refresh(self) -> JobView:
        self.view = self.client.get(self.id)
        return self.view

    def wait(self, timeout: float | None = None, on_progress: Progress | None = None,
             poll_s: float = 1.0) -> JobView:
        """Until the job ends (or `timeout` seconds). With `on_progress`, it is called with each new state (status,
        stage, stage progress, queue position), checked every `poll_s`; without, the service's long poll is used."""
        steps = _waiting(self.view, timeout, on_progress, poll_s)
        try:
            seconds = next(steps)
            while True:
                self.view = self.client.get(self.id, wait=seconds)
                seconds = steps.send(self.view)
        except StopIteration as done:
            return done.value

    def result(self, timeout: float | None = None, on_progress: Progress | None = None) -> JobView:
        """wait(), then raise JobFailed unless the job succeeded."""
        view = self.wait(timeout, on_progress)
        if view.status != "succeeded":
            raise JobFailed(view)
        return view

    def logs(self) -> str:
        return self.client.request("GET", f"/v1/jobs/{self.id}/logs").text

    def follow_logs(self) -> Iterator[str]:
        """The log as it grows (Server-Sent Events), chunk by chunk, until the job ends; then refreshes `view`."""
        from httpx_sse import connect_sse

        try:
            with connect_sse(self.client.http, "GET", f"/v1/jobs/{self.id}/logs", params={"follow": 1},
                             timeout=httpx.Timeout(60, connect=5, read=None)) as source:
                if source.response.status_code >= 400:
                    source.response.read()
                    _check(source.response)
                for event in source.iter_sse():
                    if event.event == "end":
                        break
                    yield _log_chunk(event)
        except httpx.HTTPError as error:
            raise ConnectionFailed(self.client.server, error) from None
        self.refresh()

    def source(self) -> str:
        return self.client.request("GET", f"/v1/jobs/{self.id}/source").text

    def artifacts(self) -> ArtifactManifest:
        return ArtifactManifest.model_validate(self.client.request("GET", f"/v1/jobs/{self.id}/artifacts").json())

    def artifact(self, name: str) -> bytes:
        return self.client.request("GET", f"/v1/jobs/{self.id}/artifacts/{name}").content

    def bundle(self, format: str = "tar.gz") -> bytes:
        return self.client.request("GET", f"/v1/jobs/{self.id}/bundle", params={"format": format}).content

    def download_bundle(self, destination: str | os.PathLike) -> list[Path]:
        """The bundle unpacked into `destination`; returns the files written."""
        return unpack_bundle(self.bundle("tar.gz"), destination)

    def outputs(self) -> dict:
        """The emulated (or device) outputs as NumPy arrays in each buffer's dtype, by buffer name."""
        manifest = self.artifacts()
        names = {a.name for a in manifest.artifacts}
        plan = json.loads(self.artifact("tt.plan.json")) if "tt.plan.json" in names else None
        return _outputs(manifest, self.artifact, plan)

    def cancel(self) -> JobView:
        self.view = JobView.model_validate(self.client.request("DELETE", f"/v1/jobs/{self.id}").json())
        return self.view

    def resubmit(self, **overrides) -> "Job":
        """The same job again (source, options, inputs), with e.g. source=, params=, target=, stages= changed."""
        body = JobOverrides.model_validate(overrides).model_dump(mode="json", exclude_none=True)
        view = JobView.model_validate(self.client.request("POST", f"/v1/jobs/{self.id}/resubmit", json=body).json())
        return Job(self.client, view)

    def diff(self, other: "Job | str") -> JobDiff:
        other_id = other.id if isinstance(other, Job) else other
        return JobDiff.model_validate(self.client.request("GET", f"/v1/jobs/{self.id}/diff/{other_id}").json())


class Client:
    """The /v1 API over one httpx connection pool. Server and key default to TILEFARM_SERVER, TILEFARM_API_KEY."""

    def __init__(self, server: str | None = None, api_key: str | None = None, team: str | None = None,
                 timeout: float = 60.0, transport: httpx.BaseTransport | None = None):
        self.server, options = _connection(server, api_key, team, timeout)
        self.http = httpx.Client(transport=transport, **options)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise ConnectionFailed(self.server, error) from None
        return _check(response)

    def submit(self, kernel: str | os.PathLike, *, idempotency_key: str | None = None, **options) -> Job:
        """Submit a kernel (TIRx or TileLang): a path, or the source text. Options: filename, entry, params,
        target (arch name, TargetConfig or dict), core_grid/partition/cb_depth/math_fidelity, stages,
        inputs ({name: ndarray}), dump_ir, queue."""
        request = kernel if isinstance(kernel, JobRequest) else build_request(kernel, **options)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        body = request.model_dump(mode="json", exclude_none=True)
        return Job(self, JobView.model_validate(self.request("POST", "/v1/jobs", json=body, headers=headers).json()))

    def get(self, job_id: str, wait: float = 0) -> JobView:
        params = {"wait": round(wait, 3)} if wait > 0 else None
        return JobView.model_validate(self.request("GET", f"/v1/jobs/{job_id}", params=params).json())

    def job(self, job_id: str) -> Job:
        return Job(self, self.get(job_id))

    def jobs(self, *, status: str | None = None, target: str | None = None, team: str | None = None,
             limit: int = 20, cursor: str | None = None) -> JobList:
        params = {k: v for k, v in {"status": status, "target": target, "team": team, "limit": limit,
                                    "cursor": cursor}.items() if v is not None}
        return JobList.model_validate(self.request("GET", "/v1/jobs", params=params).json())

    def targets(self) -> dict:
        return self.request("GET", "/v1/targets").json()

    def devices(self) -> list[dict]:
        return self.request("GET", "/v1/devices").json()


# ---------------------------------------------------------------------------------------------- async

class AsyncJob(_JobHandle):
    """A job on the service (async); `view` is its state when last fetched."""

    async def refresh(self) -> JobView:
        self.view = await self.client.get(self.id)
        return self.view

    async def wait(self, timeout: float | None = None, on_progress: Progress | None = None,
                   poll_s: float = 1.0) -> JobView:
        steps = _waiting(self.view, timeout, on_progress, poll_s)
        try:
            seconds = next(steps)
            while True:
                self.view = await self.client.get(self.id, wait=seconds)
                seconds = steps.send(self.view)
        except StopIteration as done:
            return done.value

    async def result(self, timeout: float | None = None, on_progress: Progress | None = None) -> JobView:
        view = await self.wait(timeout, on_progress)
        if view.status != "succeeded":
            raise JobFailed(view)
        return view

    async def logs(self) -> str:
        return (await self.client.request("GET", f"/v1/jobs/{self.id}/logs")).text

    async def follow_logs(self) -> AsyncIterator[str]:
        from httpx_sse import aconnect_sse

        try:
            async with aconnect_sse(self.client.http, "GET", f"/v1/jobs/{self.id}/logs", params={"follow": 1},
                                    timeout=httpx.Timeout(60, connect=5, read=None)) as source:
                if source.response.status_code >= 400:
                    await source.response.aread()
                    _check(source.response)
                async for event in source.aiter_sse():
                    if event.event == "end":
                        break
                    yield _log_chunk(event)
        except httpx.HTTPError as error:
            raise ConnectionFailed(self.client.server, error) from None
        await self.refresh()

    async def source(self) -> str:
        return (await self.client.request("GET", f"/v1/jobs/{self.id}/source")).text

    async def artifacts(self) -> ArtifactManifest:
        response = await self.client.request("GET", f"/v1/jobs/{self.id}/artifacts")
        return ArtifactManifest.model_validate(response.json())

    async def artifact(self, name: str) -> bytes:
        return (await self.client.request("GET", f"/v1/jobs/{self.id}/artifacts/{name}")).content

    async def bundle(self, format: str = "tar.gz") -> bytes:
        return (await self.client.request("GET", f"/v1/jobs/{self.id}/bundle", params={"format": format})).content

    async def download_bundle(self, destination: str | os.PathLike) -> list[Path]:
        return unpack_bundle(await self.bundle("tar.gz"), destination)

    async def outputs(self) -> dict:
        manifest = await self.artifacts()
        names = [a.name for a in manifest.artifacts if a.name.endswith(".npy") or a.name == "tt.plan.json"]
        fetched = dict(zip(names, await asyncio.gather(*(self.artifact(n) for n in names))))
        plan = json.loads(fetched["tt.plan.json"]) if "tt.plan.json" in fetched else None
        return _outputs(manifest, fetched.__getitem__, plan)

    async def cancel(self) -> JobView:
        self.view = JobView.model_validate((await self.client.request("DELETE", f"/v1/jobs/{self.id}")).json())
        return self.view

    async def resubmit(self, **overrides) -> "AsyncJob":
        body = JobOverrides.model_validate(overrides).model_dump(mode="json", exclude_none=True)
        response = await self.client.request("POST", f"/v1/jobs/{self.id}/resubmit", json=body)
        return AsyncJob(self.client, JobView.model_validate(response.json()))

    async def diff(self, other: "AsyncJob | str") -> JobDiff:
        other_id = other.id if isinstance(other, AsyncJob) else other
        return JobDiff.model_validate((await self.client.request("GET", f"/v1/jobs/{self.id}/diff/{other_id}")).json())


class AsyncClient:
    """Client's async twin over httpx.AsyncClient."""

    def __init__(self, server: str | None = None, api_key: str | None = None, team: str | None = None,
                 timeout: float = 60.0, transport: httpx.AsyncBaseTransport | None = None):
        self.server, options = _connection(server, api_key, team, timeout)
        self.http = httpx.AsyncClient(transport=transport, **options)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self.http.aclose()

    async def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        try:
            response = await self.http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            raise ConnectionFailed(self.server, error) from None
        return _check(response)

    async def submit(self, kernel: str | os.PathLike, *, idempotency_key: str | None = None, **options) -> AsyncJob:
        request = kernel if isinstance(kernel, JobRequest) else build_request(kernel, **options)
        headers = {"Idempotency-Key": idempotency_key} if idempotency_key else None
        body = request.model_dump(mode="json", exclude_none=True)
        response = await self.request("POST", "/v1/jobs", json=body, headers=headers)
        return AsyncJob(self, JobView.model_validate(response.json()))

    async def get(self, job_id: str, wait: float = 0) -> JobView:
        params = {"wait": round(wait, 3)} if wait > 0 else None
        return JobView.model_validate((await self.request("GET", f"/v1/jobs/{job_id}", params=params)).json())

    async def job(self, job_id: str) -> AsyncJob:
        return AsyncJob(self, await self.get(job_id))

    async def jobs(self, *, status: str | None = None, target: str | None = None, team: str | None = None,
                   limit: int = 20, cursor: str | None = None) -> JobList:
        params = {k: v for k, v in {"status": status, "target": target, "team": team, "limit": limit,
                                    "cursor": cursor}.items() if v is not None}
        return JobList.model_validate((await self.request("GET", "/v1/jobs", params=params)).json())

    async def targets(self) -> dict:
        return (await self.request("GET", "/v1/targets")).json()

    async def devices(self) -> list[dict]:
        return (await self.request("GET", "/v1/devices")).json()


__all__ = ["ApiError", "AsyncClient", "AsyncJob", "Client", "ConnectionFailed", "Job", "JobFailed", "TERMINAL",
           "TilefarmError", "build_request", "encode_array", "unpack_bundle"]
