"""tilefarm.client: the service's Python client, sync and async, typed with the shared pydantic schemas (schemas/).

    from tilefarm.client import Client

    with Client("http://127.0.0.1:8000") as farm:                 # or TILEFARM_SERVER / TILEFARM_API_KEY
        job = farm.submit(Path("examples/tilelang/gemm.py"), entry="matmul", target="blackhole",
                          params={"M": 256, "N": 256, "K": 128}, inputs={"A": a, "B": b})
        job.wait(on_progress=lambda view: print(view.status, view.progress))
        c = job.outputs()["C"]                                    # NumPy arrays, in each buffer's dtype
        job.download_bundle("out/")                               # artifacts, manifest.json, logs, request.json
        jobs = farm.submit_many(Path("examples/gemm_ragged.py"), targets=["wormhole_b0", "blackhole"])

`AsyncClient` has the same methods as coroutines (`await farm.submit(...)`, `await job.wait()`,
`async for line in job.follow_logs()`). Both are one implementation: every operation is written once as a
generator of the HTTP requests it makes (`_Call`) that receives their responses; `Client` sends them with
httpx.Client, `AsyncClient` with httpx.AsyncClient, each with the same retry rule.

Retries: a request that could not be sent or whose answer was lost (a connection error), and an answer 429 or 503
with a `Retry-After` of at most `max_retry_wait` seconds, are tried again, up to `retries` times, after Retry-After
(else 0.5, 1, 2... s). Only requests that are safe to repeat are: reads, cancel, and submit/resubmit, which carry an
`Idempotency-Key` made once per call (the service answers a repeated key with the job it made the first time).

Every failure is a `TilefarmError`: `InvalidRequest` (the request cannot be made: a bad target or option, raised
before anything is sent), `ApiError` (the service's problem+json: `.status`, `.type`, `.detail`, `.problem`),
`ConnectionFailed` (with how to start a service or point the client at one) or `JobFailed` (`Job.result()`).
The `tilefarm` CLI is built on this.
"""
from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import io
import json
import logging
import os
import sys
import tarfile
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

import httpx

from schemas.jobs import (TERMINAL, ArtifactManifest, InputArray, JobDiff, JobList, JobOverrides, JobRequest,
                          JobView)
from schemas.target import TargetConfig

DEFAULT_SERVER = "http://127.0.0.1:8000"
USER_AGENT = "tilefarm-client"
Progress = Callable[[JobView], None]
T = TypeVar("T")
log = logging.getLogger("tilefarm.client")


class TilefarmError(Exception):
    """Anything the client could not do."""


class InvalidRequest(TilefarmError, ValueError):
    """The request cannot be made (a target or option the service would refuse); nothing was sent."""


class ConnectionFailed(TilefarmError):
    def __init__(self, server: str, error: Exception):
        super().__init__(f"cannot reach {server}: {error or type(error).__name__}. Is a tilefarm service running "
                         f"there? Start one with `tilefarm serve` (or `make serve` in a checkout), or point the client "
                         f"at yours with --server / TILEFARM_SERVER")
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


# ---------------------------------------------------------------------------------------------- requests

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
    import ml_dtypes
    import numpy as np

    array = np.ascontiguousarray(array)
    if array.dtype.kind == "V" and array.dtype.itemsize == 2:    # np.load of a saved ml_dtypes.bfloat16 array
        array = array.view(ml_dtypes.bfloat16)
    dtype = array.dtype.name
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.byteswap().view(array.dtype.newbyteorder("<"))
    return InputArray(shape=list(array.shape), dtype=dtype, data=base64.b64encode(array.tobytes()).decode())


def _invalid(error: Exception) -> InvalidRequest:
    """A pydantic ValidationError as `field: why (got value)`, one per problem, the way the API's 422 says it."""
    from pydantic import ValidationError

    if not isinstance(error, ValidationError):
        return InvalidRequest(str(error))
    return InvalidRequest("; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']} (got {e.get('input')!r})"
                                    for e in error.errors()))


def make_target(target: str | TargetConfig | dict | None = None, **fields) -> TargetConfig:
    """A TargetConfig from an arch name (or a TargetConfig, or its dict) and target fields given one by one (those
    left None are the compiler's to choose). InvalidRequest names the field that is wrong."""
    from pydantic import ValidationError

    given = {name: value for name, value in fields.items() if value is not None}
    try:
        if isinstance(target, TargetConfig):
            return TargetConfig.model_validate({**target.model_dump(), **given})
        base = target if isinstance(target, dict) else ({"arch": target} if target else {})
        return TargetConfig.model_validate({**base, **given})
    except ValidationError as error:
        raise _invalid(error) from None


def build_request(kernel: str | os.PathLike, *, filename: str | None = None, entry: str | None = None,
                  params: dict | None = None, target: str | TargetConfig | dict | None = None,
                  stages: list[str] | None = None, inputs: dict | None = None, dump_ir: bool = False,
                  queue: bool = False, core_grid: tuple[int, int] | None = None, partition: str | None = None,
                  cb_depth: int | None = None, math_fidelity: str | None = None, blocking: str | None = None,
                  fp32_accumulation: bool | None = None, approx_exp: bool | None = None,
                  intermediate_dtype: str | None = None, l1_shard: list[str] | None = None) -> JobRequest:
    """The POST /v1/jobs body. `target` is an arch name, a TargetConfig or its dict; core_grid ... l1_shard, every
    other field of TargetConfig by its name (tests/cli/test_target_fields.py holds them to it), set those fields of
    it. InvalidRequest when the service would refuse it (a field the schemas reject)."""
    from pydantic import ValidationError

    source, name = _kernel(kernel, filename)
    config = make_target(target, core_grid=core_grid, partition=partition, cb_depth=cb_depth,
                         math_fidelity=math_fidelity, blocking=blocking, fp32_accumulation=fp32_accumulation,
                         approx_exp=approx_exp, intermediate_dtype=intermediate_dtype, l1_shard=l1_shard)
    try:
        return JobRequest(source=source, filename=name, entry=entry, params=params or {}, target=config, stages=stages,
                          inputs={k: v if isinstance(v, InputArray) else encode_array(v)
                                  for k, v in (inputs or {}).items()},
                          dump_ir=dump_ir, queue=queue)
    except ValidationError as error:
        raise _invalid(error) from None


def _headers(api_key: str | None, team: str | None) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    if team:
        headers["X-Team"] = team
    return headers


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


@dataclass
class _Call:
    """One HTTP request an operation makes; `idempotent` ones are retried (see the module docstring)."""
    method: str
    path: str
    params: dict | None = None
    json: Any = None
    headers: dict | None = None
    idempotent: bool = True


Flow = Generator[_Call, httpx.Response, T]


@dataclass
class RetryPolicy:
    retries: int = 3                 # tries after the first
    max_retry_wait: float = 60.0     # a Retry-After longer than this is not waited for (a quota until midnight)
    backoff: float = 0.5             # without Retry-After: backoff, 2 * backoff, ...

    def delay(self, call: _Call, attempt: int, outcome: httpx.Response | Exception) -> float | None:
        """Seconds to wait before trying `call` again after `outcome` (its `attempt`-th try), or None: do not."""
        if not call.idempotent or attempt > self.retries:
            return None
        if isinstance(outcome, Exception):
            return self.backoff * 2 ** (attempt - 1)
        if outcome.status_code not in (429, 503):
            return None
        after = outcome.headers.get("Retry-After", "")
        if not after.strip().isdigit() or int(after) > self.max_retry_wait:
            return None  # no promise that waiting helps, or longer than a caller wants to be held
        return float(after)


def _one(call: _Call) -> Flow[httpx.Response]:
    return (yield call)


def _note_retry(call: _Call, outcome: httpx.Response | Exception, delay: float, attempt: int) -> None:
    why = f"{outcome.status_code}" if isinstance(outcome, httpx.Response) else f"{type(outcome).__name__}: {outcome}"
    log.warning("%s %s: %s; trying again in %g s (retry %d)", call.method, call.path, why, delay, attempt)


# ---------------------------------------------------------------------------------------------- shared logic

def _changed(old: JobView | None, new: JobView) -> bool:
    if old is None:
        return True
    # a new state, not the running stage's clock ticking: progress without its elapsed seconds
    ticking = {"stage_elapsed_s"}
    if old.progress.model_dump(exclude=ticking) != new.progress.model_dump(exclude=ticking):
        return True
    keys = ("status", "stage")
    return any(getattr(old, k) != getattr(new, k) for k in keys) or \
        [s.state for s in old.stages] != [s.state for s in new.stages]


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


@dataclass
class _LogStream:
    """Following a job's log (Server-Sent Events) across dropped connections: each `log` event's id is the log's
    byte offset after it, sent back as Last-Event-ID to resume where the stream broke."""
    job_id: str
    last_event_id: str | None = None
    drops: int = 0
    ended: bool = False
    max_drops: int = 5

    def request(self) -> dict:
        headers = {"Last-Event-ID": self.last_event_id} if self.last_event_id else {}
        return {"method": "GET", "url": f"/v1/jobs/{self.job_id}/logs", "params": {"follow": 1}, "headers": headers,
                "timeout": httpx.Timeout(60, connect=5, read=None)}

    def take(self, event) -> str:
        """The text of one event ("" for anything but a log chunk); notes the end and the resume point."""
        if event.event == "end":
            self.ended = True
            return ""
        if event.event != "log":
            return ""
        if event.id:
            self.last_event_id = event.id
        return event.data + "\n"

    def dropped(self, server: str, error: Exception) -> None:
        """The stream broke before its end: resume (up to max_drops times), else ConnectionFailed."""
        self.drops += 1
        if self.drops > self.max_drops:
            raise ConnectionFailed(server, error) from None
        log.warning("log stream of %s dropped (%s); resuming after event %s", self.job_id, error, self.last_event_id)


# ---------------------------------------------------------------------------------------------- operations, once

class _JobOps:
    """A job on the service; `view` is its state when last fetched. The operations as request flows."""

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

    def _refresh(self) -> Flow[JobView]:
        response = yield _Call("GET", f"/v1/jobs/{self.id}")
        self.view = JobView.model_validate(response.json())
        return self.view

    def _wait(self, timeout: float | None = None, on_progress: Progress | None = None,
              poll_s: float = 1.0) -> Flow[JobView]:
        """Until the job ends (or `timeout` seconds: TimeoutError). With `on_progress`, it is called with each new
        state (status, stage, stage progress, queue position), checked every `poll_s`; without, the service's long
        poll is used."""
        deadline = None if timeout is None else time.monotonic() + timeout
        last = None
        while True:
            if on_progress is not None and _changed(last, self.view):
                on_progress(self.view)
                last = self.view
            if self.view.terminal:
                return self.view
            left = 30.0 if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"job {self.id} is still {self.view.status} after {timeout:g} s")
            seconds = min(left, poll_s if on_progress else 30.0)
            response = yield _Call("GET", f"/v1/jobs/{self.id}", params={"wait": round(seconds, 3)})
            self.view = JobView.model_validate(response.json())

    def _result(self, timeout: float | None = None, on_progress: Progress | None = None) -> Flow[JobView]:
        """wait(), then raise JobFailed unless the job succeeded."""
        view = yield from self._wait(timeout, on_progress)
        if view.status != "succeeded":
            raise JobFailed(view)
        return view

    def _logs(self) -> Flow[str]:
        return (yield _Call("GET", f"/v1/jobs/{self.id}/logs")).text

    def _source(self) -> Flow[str]:
        return (yield _Call("GET", f"/v1/jobs/{self.id}/source")).text

    def _artifacts(self) -> Flow[ArtifactManifest]:
        return ArtifactManifest.model_validate((yield _Call("GET", f"/v1/jobs/{self.id}/artifacts")).json())

    def _artifact(self, name: str) -> Flow[bytes]:
        return (yield _Call("GET", f"/v1/jobs/{self.id}/artifacts/{name}")).content

    def _bundle(self, format: str = "tar.gz") -> Flow[bytes]:
        return (yield _Call("GET", f"/v1/jobs/{self.id}/bundle", params={"format": format})).content

    def _download_bundle(self, destination: str | os.PathLike) -> Flow[list[Path]]:
        """The bundle unpacked into `destination`; returns the files written."""
        return unpack_bundle((yield from self._bundle("tar.gz")), destination)

    def _outputs(self) -> Flow[dict]:
        """The emulated (or device) outputs as NumPy arrays in each buffer's dtype, by buffer name."""
        manifest = yield from self._artifacts()
        wanted = [a.name for a in manifest.artifacts if a.name.endswith(".npy") or a.name == "tt.plan.json"]
        fetched = {}
        for name in wanted:
            fetched[name] = yield from self._artifact(name)
        plan = json.loads(fetched["tt.plan.json"]) if "tt.plan.json" in fetched else None
        return _outputs(manifest, fetched.__getitem__, plan)

    def _cancel(self) -> Flow[JobView]:
        self.view = JobView.model_validate((yield _Call("DELETE", f"/v1/jobs/{self.id}")).json())
        return self.view

    def _resubmit(self, *, source: str | None = None, filename: str | None = None, entry: str | None = None,
                  params: dict | None = None, target: str | TargetConfig | dict | None = None,
                  stages: list[str] | None = None, queue: bool | None = None, dump_ir: bool | None = None):
        """The same job again (source, options, inputs), with the given fields changed. A `target` given as an arch
        name, or a dict of some fields, changes those fields of this job's target."""
        from pydantic import ValidationError

        if isinstance(target, (str, dict)):
            target = make_target(self.view.target, **({"arch": target} if isinstance(target, str) else target))
        try:
            body = JobOverrides(source=source, filename=filename, entry=entry, params=params, target=target,
                                stages=stages, queue=queue, dump_ir=dump_ir).model_dump(mode="json", exclude_none=True)
        except ValidationError as error:
            raise _invalid(error) from None
        response = yield _Call("POST", f"/v1/jobs/{self.id}/resubmit", json=body,
                               headers={"Idempotency-Key": uuid.uuid4().hex})
        return type(self)(self.client, JobView.model_validate(response.json()))

    def _diff(self, other: "_JobOps | str", timings: bool = False) -> Flow[JobDiff]:
        """What differs between this job and `other`: options, source, generated code, modelled device time (and,
        with timings=True, the wall-clock fields)."""
        other_id = other.id if isinstance(other, _JobOps) else other
        params = {"timings": "true"} if timings else None
        return JobDiff.model_validate((yield _Call("GET", f"/v1/jobs/{self.id}/diff/{other_id}", params=params)).json())


class _ClientOps:
    """The /v1 API: settings and the operations as request flows (the sync and async clients only send them)."""

    def __init__(self, server: str | None, api_key: str | None, team: str | None, timeout: float,
                 retries: int, max_retry_wait: float):
        self.server = (server or os.environ.get("TILEFARM_SERVER") or DEFAULT_SERVER).rstrip("/")
        api_key = api_key if api_key is not None else os.environ.get("TILEFARM_API_KEY")
        self._options = {"base_url": self.server, "headers": _headers(api_key, team),
                         "timeout": httpx.Timeout(timeout, connect=5)}
        self.retry = RetryPolicy(retries=retries, max_retry_wait=max_retry_wait)

    Job: type = _JobOps

    def _actions(self, flow: Flow[T]) -> Generator[_Call | float, httpx.Response | Exception | None, T]:
        """A flow's requests with the retry rule applied, as the actions a client performs: a _Call to send (it is
        sent back the response, or the httpx error it raised) or a number of seconds to sleep; returns the flow's
        value. The only I/O loop, shared by the sync and async clients."""
        try:
            call = next(flow)
            while True:
                attempt = 0
                while True:
                    attempt += 1
                    outcome = yield call
                    delay = self.retry.delay(call, attempt, outcome)
                    if delay is None:
                        break
                    _note_retry(call, outcome, delay, attempt)
                    yield delay
                if isinstance(outcome, Exception):
                    raise ConnectionFailed(self.server, outcome) from None
                call = flow.send(_check(outcome))
        except StopIteration as done:
            return done.value

    def _submit(self, kernel: str | os.PathLike | JobRequest, *, filename: str | None = None,
                entry: str | None = None, params: dict | None = None,
                target: str | TargetConfig | dict | None = None, stages: list[str] | None = None,
                inputs: dict | None = None, dump_ir: bool = False, queue: bool = False,
                core_grid: tuple[int, int] | None = None, partition: str | None = None, cb_depth: int | None = None,
                math_fidelity: str | None = None, blocking: str | None = None,
                fp32_accumulation: bool | None = None, approx_exp: bool | None = None,
                intermediate_dtype: str | None = None, l1_shard: list[str] | None = None,
                idempotency_key: str | None = None):
        """Submit a kernel (TIRx or TileLang): a path, its source text, or a JobRequest. `target`: an arch name, a
        TargetConfig or its dict; the target fields (core_grid, partition, cb_depth, math_fidelity, blocking,
        fp32_accumulation, approx_exp, intermediate_dtype, l1_shard: TargetConfig's own) change that target. Inputs are {buffer name: NumPy array}. InvalidRequest
        before anything is sent when the schemas refuse it; the submit is retried safely (one Idempotency-Key per
        call)."""
        request = kernel if isinstance(kernel, JobRequest) else build_request(
            kernel, filename=filename, entry=entry, params=params, target=target, stages=stages, inputs=inputs,
            dump_ir=dump_ir, queue=queue, core_grid=core_grid, partition=partition, cb_depth=cb_depth,
            math_fidelity=math_fidelity, blocking=blocking, fp32_accumulation=fp32_accumulation, approx_exp=approx_exp,
            intermediate_dtype=intermediate_dtype, l1_shard=l1_shard)
        headers = {"Idempotency-Key": idempotency_key or uuid.uuid4().hex}
        response = yield _Call("POST", "/v1/jobs", json=request.model_dump(mode="json", exclude_none=True),
                               headers=headers)
        return self.Job(self, JobView.model_validate(response.json()))

    def _submit_many(self, kernel: str | os.PathLike, *, targets: list[str | TargetConfig | dict],
                     wait: bool = True, timeout: float | None = None, **options):
        """One job per target (the same kernel and options), then, with wait=True, wait until every one has ended
        (they run meanwhile). Returns the jobs in the order of `targets`; see each one's `.view.status`."""
        jobs = []
        for target in targets:
            jobs.append((yield from self._submit(kernel, target=target, **options)))
        if wait:
            deadline = None if timeout is None else time.monotonic() + timeout
            for job in jobs:  # long polls, one after the other: the jobs run at the same time all along
                yield from job._wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
        return jobs

    def _get(self, job_id: str, wait: float = 0) -> Flow[JobView]:
        params = {"wait": round(wait, 3)} if wait > 0 else None
        return JobView.model_validate((yield _Call("GET", f"/v1/jobs/{job_id}", params=params)).json())

    def _job(self, job_id: str):
        return self.Job(self, (yield from self._get(job_id)))

    def _jobs(self, *, status: str | None = None, target: str | None = None, team: str | None = None,
              limit: int = 20, cursor: str | None = None) -> Flow[JobList]:
        params = {k: v for k, v in {"status": status, "target": target, "team": team, "limit": limit,
                                    "cursor": cursor}.items() if v is not None}
        return JobList.model_validate((yield _Call("GET", "/v1/jobs", params=params)).json())

    def _targets(self) -> Flow[dict]:
        return (yield _Call("GET", "/v1/targets")).json()

    def _devices(self) -> Flow[list[dict]]:
        return (yield _Call("GET", "/v1/devices")).json()


def _sync(flow: Callable[..., Flow[T]]) -> Callable[..., T]:
    """An operation as a method of the sync client or job: runs its flow with the client's httpx.Client."""
    @functools.wraps(flow)
    def method(self, *args, **kwargs):
        client = self if isinstance(self, Client) else self.client
        return client._run(flow(self, *args, **kwargs))
    method.__name__ = method.__qualname__ = flow.__name__.lstrip("_")
    return method


def _async(flow: Callable[..., Flow[T]]) -> Callable[..., T]:
    """The same operation as a coroutine of the async client or job."""
    @functools.wraps(flow)
    async def method(self, *args, **kwargs):
        client = self if isinstance(self, AsyncClient) else self.client
        return await client._run(flow(self, *args, **kwargs))
    method.__name__ = method.__qualname__ = flow.__name__.lstrip("_")
    return method


JOB_OPERATIONS = ("refresh", "wait", "result", "logs", "source", "artifacts", "artifact", "bundle", "download_bundle",
                  "outputs", "cancel", "resubmit", "diff")
CLIENT_OPERATIONS = ("submit", "submit_many", "get", "job", "jobs", "targets", "devices")


def _with_operations(wrap: Callable, names: tuple[str, ...]):
    def decorate(cls):
        for name in names:
            setattr(cls, name, wrap(getattr(cls, f"_{name}")))
        return cls
    return decorate


# ---------------------------------------------------------------------------------------------- sync

@_with_operations(_sync, JOB_OPERATIONS)
class Job(_JobOps):
    """A job on the service (sync): refresh, wait, result, logs, follow_logs, source, artifacts, artifact, bundle,
    download_bundle, outputs, cancel, resubmit, diff."""

    def follow_logs(self) -> Iterator[str]:
        """The log as it grows (Server-Sent Events), chunk by chunk, until the job ends, resuming after a dropped
        connection where it broke; then refreshes `view`."""
        from httpx_sse import connect_sse

        stream = _LogStream(self.id)
        while not stream.ended:
            try:
                request = stream.request()
                with connect_sse(self.client.http, request.pop("method"), request.pop("url"), **request) as source:
                    if source.response.status_code >= 400:
                        source.response.read()
                        _check(source.response)
                    for event in source.iter_sse():
                        if text := stream.take(event):
                            yield text
                        if stream.ended:
                            break
                if not stream.ended:
                    raise httpx.RemoteProtocolError("the stream ended without its end event")
            except httpx.HTTPError as error:
                stream.dropped(self.client.server, error)
        self.refresh()


@_with_operations(_sync, CLIENT_OPERATIONS)
class Client(_ClientOps):
    """The /v1 API over one httpx connection pool. Server and key default to TILEFARM_SERVER, TILEFARM_API_KEY."""

    Job = Job

    def __init__(self, server: str | None = None, api_key: str | None = None, team: str | None = None,
                 timeout: float = 60.0, transport: httpx.BaseTransport | None = None, *, retries: int = 3,
                 max_retry_wait: float = 60.0):
        super().__init__(server, api_key, team, timeout, retries, max_retry_wait)
        self.http = httpx.Client(transport=transport, **self._options)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.http.close()

    def _run(self, flow: Flow[T]) -> T:
        actions = self._actions(flow)
        try:
            action = next(actions)
            while True:
                if isinstance(action, float):
                    time.sleep(action)
                    action = actions.send(None)
                    continue
                try:
                    outcome = self.http.request(action.method, action.path, params=action.params, json=action.json,
                                                headers=action.headers)
                except httpx.HTTPError as error:
                    outcome = error
                action = actions.send(outcome)
        except StopIteration as done:
            return done.value

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        """Any other request, with the client's server, key and retry rule (reads only are retried)."""
        return self._run(_one(_Call(method, path, idempotent=method in ("GET", "HEAD"), **kwargs)))


# ---------------------------------------------------------------------------------------------- async

@_with_operations(_async, JOB_OPERATIONS)
class AsyncJob(_JobOps):
    """A job on the service (async): the same methods as Job, as coroutines."""

    async def follow_logs(self) -> AsyncIterator[str]:
        from httpx_sse import aconnect_sse

        stream = _LogStream(self.id)
        while not stream.ended:
            try:
                request = stream.request()
                async with aconnect_sse(self.client.http, request.pop("method"), request.pop("url"),
                                        **request) as source:
                    if source.response.status_code >= 400:
                        await source.response.aread()
                        _check(source.response)
                    async for event in source.aiter_sse():
                        if text := stream.take(event):
                            yield text
                        if stream.ended:
                            break
                if not stream.ended:
                    raise httpx.RemoteProtocolError("the stream ended without its end event")
            except httpx.HTTPError as error:
                stream.dropped(self.client.server, error)
        await self.refresh()


@_with_operations(_async, CLIENT_OPERATIONS)
class AsyncClient(_ClientOps):
    """Client's async twin over httpx.AsyncClient (the same operations, as coroutines)."""

    Job = AsyncJob

    def __init__(self, server: str | None = None, api_key: str | None = None, team: str | None = None,
                 timeout: float = 60.0, transport: httpx.AsyncBaseTransport | None = None, *, retries: int = 3,
                 max_retry_wait: float = 60.0):
        super().__init__(server, api_key, team, timeout, retries, max_retry_wait)
        self.http = httpx.AsyncClient(transport=transport, **self._options)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def close(self) -> None:
        await self.http.aclose()

    async def _run(self, flow: Flow[T]) -> T:
        actions = self._actions(flow)
        try:
            action = next(actions)
            while True:
                if isinstance(action, float):
                    await asyncio.sleep(action)
                    action = actions.send(None)
                    continue
                try:
                    outcome = await self.http.request(action.method, action.path, params=action.params,
                                                      json=action.json, headers=action.headers)
                except httpx.HTTPError as error:
                    outcome = error
                action = actions.send(outcome)
        except StopIteration as done:
            return done.value

    async def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        return await self._run(_one(_Call(method, path, idempotent=method in ("GET", "HEAD"), **kwargs)))


__all__ = ["ApiError", "AsyncClient", "AsyncJob", "BundleRefused", "Client", "ConnectionFailed", "InvalidRequest", "Job",
           "JobFailed",
           "RetryPolicy", "TERMINAL", "TilefarmError", "build_request", "encode_array", "make_target",
           "unpack_bundle"]
