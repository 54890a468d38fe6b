"""`tilefarm submit|status|logs|download|jobs|devices`: the service's command-line client (httpx + rich).

Server and key come from --server/--api-key or TILEFARM_SERVER/TILEFARM_API_KEY. Exit codes: 0 the job succeeded
(or the command did its work), 1 the job failed or was cancelled (diagnostics printed as file:line:col: error: ...),
2 a usage, connection, auth or not-found error.
"""
from __future__ import annotations

import io
import json
import re
import sys
import tarfile
import time
from pathlib import Path
from typing import Optional

import typer

DEFAULT_SERVER = "http://127.0.0.1:8000"
TERMINAL = {"succeeded", "failed", "cancelled"}

ServerOption = typer.Option(DEFAULT_SERVER, "--server", envvar="TILEFARM_SERVER", help="service URL [TILEFARM_SERVER]")
KeyOption = typer.Option(None, "--api-key", envvar="TILEFARM_API_KEY", help="bearer token [TILEFARM_API_KEY]",
                         show_default=False)
TeamOption = typer.Option(None, "--team", envvar="TILEFARM_TEAM", help="team, when the server runs without auth [TILEFARM_TEAM]")


def _die(message: str, code: int = 2) -> None:
    typer.echo(f"tilefarm: {message}", err=True)
    raise typer.Exit(code)


class Client:
    """The /v1 API over httpx; every failure becomes a one-line message and exit code 2."""

    def __init__(self, server: str, api_key: str | None, team: str | None = None):
        import httpx

        headers = {"User-Agent": "tilefarm-cli"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        if team:
            headers["X-Team"] = team
        self.server = server.rstrip("/")
        self.http = httpx.Client(base_url=self.server, headers=headers, timeout=httpx.Timeout(60, connect=5))

    def request(self, method: str, path: str, **kwargs):
        import httpx

        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            _die(f"cannot reach {self.server}: {error}")
        if response.status_code >= 400:
            self.fail(response)
        return response

    def fail(self, response) -> None:
        try:
            problem = response.json()
            detail = problem.get("detail") or problem.get("title")
            errors = problem.get("errors") or (detail if isinstance(detail, list) else [])
            if isinstance(detail, list):
                detail = "the request is not valid"
            if errors:  # validation: say which field and why
                detail = f"{detail}: " + "; ".join(
                    f"{'.'.join(str(p) for p in e.get('loc', []) if p != 'body')}: {e.get('msg')}" for e in errors)
        except ValueError:
            detail = response.text[:200]
        if response.status_code == 401:
            detail = f"{detail} (set --api-key or TILEFARM_API_KEY)"
        _die(f"{response.request.method} {response.request.url.path}: {response.status_code} {detail}")

    def job(self, job_id: str, wait: float = 0) -> dict:
        return self.request("GET", f"/v1/jobs/{job_id}", params={"wait": wait} if wait else None).json()

    def stream(self, path: str, **kwargs):
        import httpx

        try:
            return self.http.stream("GET", path, timeout=httpx.Timeout(60, connect=5, read=None), **kwargs)
        except httpx.HTTPError as error:
            _die(f"cannot reach {self.server}: {error}")


def _console():
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _elapsed(job: dict) -> float:
    start = job.get("created_at") or time.time()
    return (job.get("finished_at") or time.time()) - start


def _phase(job: dict) -> str:
    return f"{job['status']}" + (f" ({job['stage']})" if job.get("stage") else "")


def wait_for(client: Client, job: dict, quiet: bool = False) -> dict:
    """Poll the job until it ends, showing stage and elapsed time: a rich live line on a TTY, plain lines otherwise."""
    console = _console()
    if quiet:
        while job["status"] not in TERMINAL:
            job = client.job(job["id"], wait=5)
        return job
    if not console.is_terminal:
        last = None
        while True:
            if _phase(job) != last:
                last = _phase(job)
                print(f"[{_elapsed(job):6.1f}s] {job['id']}: {last}", file=sys.stderr, flush=True)
            if job["status"] in TERMINAL:
                return job
            job = client.job(job["id"], wait=1)

    from rich.live import Live
    from rich.spinner import Spinner
    from rich.table import Table
    from rich.text import Text

    class Progress:
        def __init__(self):
            self.spinner = Spinner("dots")

        def __rich__(self):
            table = Table.grid(padding=(0, 1))
            stages = Text()
            for stage in job["stages"]:
                style = {"succeeded": "green", "failed": "red", "running": "yellow"}.get(stage["state"], "dim")
                mark = {"succeeded": "✓", "failed": "✗", "running": "●", "skipped": "-", "cancelled": "-"}.get(stage["state"], "·")
                took = f" {_duration(stage['duration_s'])}" if stage.get("duration_s") is not None else ""
                stages.append(f"{mark} {stage['name']}{took}  ", style=style)
            self.spinner.text = Text(f"{job['id']} {_phase(job)}", style="bold")
            table.add_row(self.spinner, stages, Text(f"{_elapsed(job):.1f}s", style="cyan"))
            return table

    with Live(Progress(), console=console, refresh_per_second=8, transient=False):
        while job["status"] not in TERMINAL:
            job = client.job(job["id"], wait=1)
    return job


def print_diagnostics(job: dict, source_path: Path | None = None, source_text: str | None = None) -> None:
    """Located errors, one per line as compilers print them, with the source line and a caret under the column."""
    lines = source_text.splitlines() if source_text is not None else []
    for diag in job.get("diagnostics") or []:
        file = diag.get("file") or job.get("filename") or "<source>"
        if source_path is not None and file == job.get("filename"):
            file = str(source_path)
        location = ":".join(str(part) for part in (file, diag.get("line"), diag.get("col")) if part is not None)
        typer.echo(f"{location}: error: {diag['message']}", err=True)
        line = diag.get("line")
        if line and 0 < line <= len(lines):
            typer.echo(f"  {lines[line - 1]}", err=True)
            if diag.get("col"):
                typer.echo("  " + " " * (diag["col"] - 1) + "^", err=True)
        if diag.get("hint"):
            typer.echo(f"  hint: {diag['hint']}", err=True)
    if not job.get("diagnostics") and job.get("error"):
        typer.echo(f"{source_path or job.get('filename')}: error: {job['error']}", err=True)
    if job["status"] == "cancelled":
        typer.echo(f"job {job['id']} was cancelled", err=True)


def download_bundle(client: Client, job_id: str, output: Path) -> list[str]:
    """The job's bundle, unpacked into `output` (the archive's top folder dropped)."""
    data = client.request("GET", f"/v1/jobs/{job_id}/bundle", params={"format": "tar.gz"}).content
    output.mkdir(parents=True, exist_ok=True)
    names = []
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as archive:
        for member in archive.getmembers():
            if not member.isfile():
                continue
            relative = member.name.split("/", 1)[1] if "/" in member.name else member.name
            target = (output / relative).resolve()
            if output.resolve() not in target.parents:
                _die(f"bundle member {member.name!r} escapes {output}")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(archive.extractfile(member).read())
            names.append(relative)
    return sorted(names)


def _finish(client: Client, job: dict, output: Path | None, source: Path | None = None, text: str | None = None) -> None:
    if job["status"] != "succeeded":
        print_diagnostics(job, source, text)
        raise typer.Exit(1)
    hit = " (cache hit)" if job.get("cache_hit") else ""
    stages = ", ".join(f"{name} {_duration(seconds)}" for name, seconds in job["timings"].items())
    typer.echo(f"{job['id']}: succeeded{hit} — {stages}")
    if output is not None:
        names = download_bundle(client, job["id"], output)
        typer.echo(f"{len(names)} files -> {output}/")


def submit(
    source: Path = typer.Argument(..., help="kernel file (TVMScript TIRx with T.tile primitives)"),
    target: str = typer.Option("wormhole_b0", "-t", "--target", help="wormhole_b0 | blackhole | grayskull"),
    entry: Optional[str] = typer.Option(None, "--entry", help="kernel to compile (default: main or the only one)"),
    stages: Optional[str] = typer.Option(None, "--stages", help="comma-separated, e.g. compile,emulate [the server's default]"),
    partition: str = typer.Option("contiguous", "--partition", help="contiguous | strided | block"),
    core_grid: Optional[str] = typer.Option(None, "--core-grid", help="override the worker grid, e.g. 4x2"),
    cb_depth: int = typer.Option(2, "--cb-depth", help="buffered blocks per circular buffer"),
    math_fidelity: str = typer.Option("HiFi4", "--math-fidelity"),
    dump_ir: bool = typer.Option(False, "--dump-ir", help="keep the IR after every pass in the bundle"),
    wait: bool = typer.Option(False, "--wait", "-w", help="follow the job to its end (exit 1 if it fails)"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="download the bundle here (implies --wait)"),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="no progress display"),
    server: str = ServerOption, api_key: Optional[str] = KeyOption, team: Optional[str] = TeamOption,
) -> None:
    """Submit a kernel to the service; with --wait, show its progress and print located diagnostics if it fails."""
    try:
        text = source.read_text()
    except (OSError, UnicodeDecodeError) as error:
        _die(f"{source}: cannot read source: {error}")
    body: dict = {
        "source": text, "filename": re.sub(r"[^A-Za-z0-9_.\-]", "_", source.name) or "kernel.py",
        "dump_ir": dump_ir,
        "target": {"arch": target, "partition": partition, "cb_depth": cb_depth, "math_fidelity": math_fidelity},
    }
    if stages:
        body["stages"] = [s.strip() for s in stages.split(",") if s.strip()]
    if entry:
        body["entry"] = entry
    if core_grid:
        try:
            body["target"]["core_grid"] = [int(x) for x in core_grid.lower().split("x")]
        except ValueError:
            _die(f"--core-grid {core_grid!r}: expected WxH, e.g. 4x2")
    client = Client(server, api_key, team)
    job = client.request("POST", "/v1/jobs", json=body).json()
    if not (wait or output):
        typer.echo(job["id"])
        typer.echo(f"{client.server}/jobs/{job['id']}", err=True)
        return
    typer.echo(f"submitted {job['id']}: {client.server}/jobs/{job['id']}", err=True)
    job = wait_for(client, job, quiet)
    _finish(client, job, output, source, text)


def status(job_id: str = typer.Argument(..., help="job id"),
           as_json: bool = typer.Option(False, "--json", help="the job as the API returns it"),
           wait: bool = typer.Option(False, "--wait", "-w", help="wait for the job to end"),
           server: str = ServerOption, api_key: Optional[str] = KeyOption, team: Optional[str] = TeamOption) -> None:
    """A job's status, stages and diagnostics. Exit 1 if it failed or was cancelled."""
    client = Client(server, api_key, team)
    job = client.job(job_id)
    if wait:
        job = wait_for(client, job, quiet=as_json)
    if as_json:
        typer.echo(json.dumps(job, indent=2))
    else:
        target = job["target"]
        typer.echo(f"{job['id']}  {_phase(job)}  {job['filename']} for {target['arch']}  team {job.get('team', '-')}"
                   f"  {'cache hit' if job['cache_hit'] else ''}".rstrip())
        for stage in job["stages"]:
            detail = f"  {stage['detail']}" if stage.get("detail") else ""
            typer.echo(f"  {stage['name']:<9} {stage['state']:<10} {_duration(stage.get('duration_s'))}{detail}")
        if job["status"] in TERMINAL:
            typer.echo(f"  total     {_duration(_elapsed(job))}")
    if job["status"] in ("failed", "cancelled"):
        if not as_json:
            source = client.request("GET", f"/v1/jobs/{job_id}/source").text if job.get("diagnostics") else None
            print_diagnostics(job, None, source)
        raise typer.Exit(1)


def logs(job_id: str = typer.Argument(..., help="job id"),
         follow: bool = typer.Option(False, "-f", "--follow", help="stream the log until the job ends"),
         server: str = ServerOption, api_key: Optional[str] = KeyOption, team: Optional[str] = TeamOption) -> None:
    """A job's log; -f follows it as it grows (Server-Sent Events) and exits with the job's outcome."""
    client = Client(server, api_key, team)
    if not follow:
        sys.stdout.write(client.request("GET", f"/v1/jobs/{job_id}/logs").text)
        return
    final = None
    with client.stream(f"/v1/jobs/{job_id}/logs", params={"follow": 1}) as response:
        if response.status_code >= 400:
            response.read()
            client.fail(response)
        event, data = None, []
        for line in response.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
            elif line == "":
                if event == "log":
                    sys.stdout.write("".join(f"{d}\n" for d in data))
                    sys.stdout.flush()
                elif event == "end":
                    final = json.loads("\n".join(data)).get("status")
                event, data = None, []
                if final:
                    break
    if final in ("failed", "cancelled"):
        raise typer.Exit(1)


def download(job_id: str = typer.Argument(..., help="job id"),
             output: Optional[Path] = typer.Option(None, "-o", "--output", help="directory [tilefarm-<id>]"),
             server: str = ServerOption, api_key: Optional[str] = KeyOption, team: Optional[str] = TeamOption) -> None:
    """Download a finished job's bundle (artifacts, manifest.json, logs, emulator output) into a directory."""
    client = Client(server, api_key, team)
    output = output or Path(f"tilefarm-{job_id}")
    names = download_bundle(client, job_id, output)
    for name in names:
        typer.echo(f"{output}/{name}")


def jobs(status: Optional[str] = typer.Option(None, "--status", help="queued|running|succeeded|failed|cancelled"),
         target: Optional[str] = typer.Option(None, "-t", "--target", help="arch"),
         limit: int = typer.Option(20, "-n", "--limit", min=1, max=200),
         server: str = ServerOption, api_key: Optional[str] = KeyOption, team: Optional[str] = TeamOption) -> None:
    """Recent jobs, newest first."""
    client = Client(server, api_key, team)
    params = {"limit": limit, **({"status": status} if status else {}), **({"target": target} if target else {})}
    items = client.request("GET", "/v1/jobs", params=params).json()["items"]
    rows = [(j["id"], j["status"], j.get("stage") or "", j["target"]["arch"], j.get("team", ""), j["filename"],
             _age(j["created_at"]), _duration(j["finished_at"] - j["started_at"]) if j.get("finished_at") and j.get("started_at") else "-",
             "hit" if j["cache_hit"] else "") for j in items]
    _table(["ID", "STATUS", "STAGE", "TARGET", "TEAM", "FILE", "AGE", "DURATION", "CACHE"], rows,
           styles={"succeeded": "green", "failed": "red", "running": "yellow", "cancelled": "dim"})


def devices(server: str = ServerOption, api_key: Optional[str] = KeyOption, team: Optional[str] = TeamOption) -> None:
    """Hardware workers: state, current job, last heartbeat."""
    client = Client(server, api_key, team)
    found = client.request("GET", "/v1/devices").json()
    rows = [(d["id"], d["state"], d["arch"], str(d["device_count"]), d["host"], d.get("current_job") or "-",
             _age(d["last_heartbeat"])) for d in found]
    _table(["DEVICE", "STATE", "ARCH", "CHIPS", "HOST", "CURRENT JOB", "HEARTBEAT"], rows,
           styles={"idle": "green", "busy": "yellow", "offline": "red"}, empty="no hardware workers have reported")


def _age(timestamp: float) -> str:
    seconds = time.time() - timestamp
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit} ago"
    return f"{int(seconds)}s ago"


def _table(headers: list[str], rows: list[tuple], styles: dict[str, str], empty: str = "no jobs") -> None:
    """A rich table on a terminal; tab-free aligned plain columns when piped (grep/awk friendly)."""
    from rich.console import Console

    console = Console()
    if not rows:
        typer.echo(empty, err=True)
        return
    if console.is_terminal:
        from rich.table import Table

        table = Table(box=None, header_style="bold dim", pad_edge=False)
        for header in headers:
            table.add_column(header, no_wrap=True)
        for row in rows:
            table.add_row(*row, style=styles.get(row[1], ""))
        console.print(table)
        return
    widths = [max(len(str(v)) for v in column) for column in zip(headers, *rows)]
    for row in [headers, *rows]:
        typer.echo("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())


def register(app: typer.Typer) -> None:
    for command in (submit, status, logs, download, jobs, devices):
        app.command(command.__name__)(command)
