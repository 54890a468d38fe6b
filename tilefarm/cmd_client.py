"""`tilefarm submit|status|logs|download|jobs|cancel|resubmit|diff|devices`: the service from the command line, over
tilefarm.client (the same client a Python program uses), with rich output on a terminal and plain lines when piped.

Server and key come from --server/--api-key or TILEFARM_SERVER/TILEFARM_API_KEY. Exit codes: 0 the job succeeded
(or the command did its work), 1 the job failed or was cancelled (diagnostics printed as file:line:col: error: ...),
2 a usage, connection, auth or not-found error.
"""
from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import List, Optional

import typer

from .options import (EntryOption, InputOption, ParamOption, SourceArgument, fail, load_inputs, make_target,
                      parse_params, read_source, target_options)

ServerOption = typer.Option(None, "--server", envvar="TILEFARM_SERVER", show_default=False,
                            help="service URL [TILEFARM_SERVER, http://127.0.0.1:8000]")
KeyOption = typer.Option(None, "--api-key", envvar="TILEFARM_API_KEY", help="bearer token [TILEFARM_API_KEY]",
                         show_default=False)
TeamOption = typer.Option(None, "--team", envvar="TILEFARM_TEAM", help="team, when the server runs without auth [TILEFARM_TEAM]")
STATE_STYLES = {"succeeded": "green", "failed": "red", "running": "yellow", "cancelled": "dim", "queued": "blue"}
LEVEL_STYLES = {"INFO": "", "WARN": "yellow", "ERROR": "bold red"}


@contextmanager
def connected(server: str | None, api_key: str | None, team: str | None):
    """A tilefarm.client.Client whose failures end the command with a one-line message and exit code 2."""
    from .client import ApiError, Client, TilefarmError

    try:
        with Client(server, api_key, team) as client:
            yield client
    except ApiError as error:
        detail = error.detail
        if error.errors and detail == "the request is not valid":  # an older server: name the fields here
            detail += ": " + "; ".join(f"{'.'.join(str(p) for p in e.get('loc', []) if p != 'body')}: {e.get('msg')}"
                                       for e in error.errors)
        if error.status == 401:
            detail = f"{detail} (set --api-key or TILEFARM_API_KEY)"
        fail(f"tilefarm: {error.method} {error.path}: {error.status} {detail}")
    except TilefarmError as error:
        fail(f"tilefarm: {error}")


def _console(stderr: bool = True):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False)


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e3:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"


def _elapsed(job) -> float:
    return (job.finished_at or time.time()) - job.created_at


def _phase(job) -> str:
    """`queued (3 ahead)`, `running (emulate 0.4 s of ~2.5 s)`, `succeeded`."""
    progress = job.progress
    if job.status == "queued" and progress.queue_position is not None:
        return f"queued ({progress.queue_position} ahead)" if progress.queue_position else "queued (next)"
    if job.status == "running" and progress.stage:
        typical = f" of ~{_duration(progress.stage_typical_s)}" if progress.stage_typical_s else ""
        return f"running ({progress.stage} {progress.done + 1}/{progress.total}, {_duration(progress.stage_elapsed_s)}{typical})"
    return job.status + (f" ({job.stage})" if job.stage else "")


def wait_for(job, quiet: bool = False):
    """Follow the job to its end, showing its progress: a live line on a terminal, a plain line per change otherwise."""
    if quiet:
        return job.wait()
    console = _console()
    if not console.is_terminal:
        last = None

        def plain(view) -> None:
            nonlocal last
            line = f"{view.id}: {view.status}" + (f" ({view.progress.stage or view.stage})"
                                                  if (view.progress.stage or view.stage) else "")
            if line != last:
                last = line
                print(f"[{_elapsed(view):6.1f}s] {line}", file=sys.stderr, flush=True)
        return job.wait(on_progress=plain)

    from rich.live import Live
    from rich.spinner import Spinner
    from rich.table import Table
    from rich.text import Text

    class Progress:
        def __init__(self):
            self.spinner = Spinner("dots")

        def __rich__(self):
            view = job.view
            table = Table.grid(padding=(0, 1))
            stages = Text()
            for stage in view.stages:
                style = STATE_STYLES.get(stage.state, "dim")
                mark = {"succeeded": "✓", "failed": "✗", "running": "●", "skipped": "-", "cancelled": "-"}.get(stage.state, "·")
                took = f" {_duration(stage.duration_s)}" if stage.duration_s is not None else ""
                stages.append(f"{mark} {stage.name}{took}  ", style=style)
            self.spinner.text = Text(f"{view.id} {_phase(view)}", style="bold")
            table.add_row(self.spinner, stages, Text(f"{_elapsed(view):.1f}s", style="cyan"))
            return table

    with Live(Progress(), console=console, refresh_per_second=8, transient=False):
        return job.wait(on_progress=lambda view: None, poll_s=0.5)


def print_diagnostics(job, source_path: Path | None = None, source_text: str | None = None) -> None:
    """Located errors, one per line as compilers print them, with the source line and a caret under the column."""
    lines = source_text.splitlines() if source_text is not None else []
    for diag in job.diagnostics:
        file = diag.file or job.filename or "<source>"
        if source_path is not None and file == job.filename:
            file = str(source_path)
        location = ":".join(str(part) for part in (file, diag.line, diag.col) if part is not None)
        typer.echo(f"{location}: error: {diag.message}", err=True)
        if diag.line and 0 < diag.line <= len(lines):
            typer.echo(f"  {lines[diag.line - 1]}", err=True)
            if diag.col:
                typer.echo("  " + " " * (diag.col - 1) + "^", err=True)
        if diag.hint:
            typer.echo(f"  hint: {diag.hint}", err=True)
        if diag.refusal is not None:
            typer.echo(f"  note: {diag.refusal.label}: {diag.refusal.reason}", err=True)
    if not job.diagnostics and job.error:
        typer.echo(f"{source_path or job.filename}: error: {job.error}", err=True)
    if job.status == "cancelled":
        typer.echo(f"job {job.id} was cancelled", err=True)


def print_warnings(job, source_path: Path | None = None) -> None:
    for warning in job.warnings:
        typer.echo(f"{source_path or job.filename}: warning: [{warning.stage}] {warning.message}", err=True)


def _finish(job, output: Path | None, source: Path | None = None, text: str | None = None) -> None:
    view = job.view
    print_warnings(view, source)
    if view.status != "succeeded":
        print_diagnostics(view, source, text)
        raise typer.Exit(1)
    hit = " (cache hit)" if view.cache_hit else ""
    stages = ", ".join(f"{name} {_duration(seconds)}" for name, seconds in view.timings.items())
    typer.echo(f"{view.id}: succeeded{hit} — {stages}")
    if output is not None:
        names = job.download_bundle(output)
        typer.echo(f"{len(names)} files -> {output}/")


def _follow(job, wait: bool, output: Path | None, quiet: bool, source: Path | None = None,
            text: str | None = None) -> None:
    page = f"{job.client.server}/jobs/{job.id}"
    if not (wait or output):
        typer.echo(job.id)
        typer.echo(page, err=True)
        return
    typer.echo(f"submitted {job.id}: {page}", err=True)
    wait_for(job, quiet)
    _finish(job, output, source, text)


@target_options()
def submit(
    source: Path = SourceArgument,
    target=None,
    entry: Optional[str] = EntryOption,
    param: List[str] = ParamOption,
    input: List[str] = InputOption,
    stages: Optional[str] = typer.Option(None, "--stages", help="comma-separated, e.g. compile,emulate [compile,check,"
                                         "emulate: those the arch supports]"),
    dump_ir: bool = typer.Option(False, "--dump-ir", help="keep the IR after every pass in the bundle"),
    queue: bool = typer.Option(False, "--queue", help="hardware: wait for a device instead of failing at once"),
    wait: bool = typer.Option(False, "--wait", "-w", help="follow the job to its end (exit 1 if it fails)"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="download the bundle here (implies --wait)"),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="no progress display"),
    server: Optional[str] = ServerOption, api_key: Optional[str] = KeyOption, team: Optional[str] = TeamOption,
) -> None:
    """Submit a kernel (TIRx or TileLang, with --entry/--param and -i inputs); with --wait, show its progress and print
    located diagnostics if it fails."""
    text = read_source(source)
    from .client import TilefarmError, build_request

    try:
        request = build_request(text, filename=source.name, entry=entry, params=parse_params(param), target=target,
                                inputs=load_inputs(input), dump_ir=dump_ir, queue=queue,
                                stages=[s.strip() for s in stages.split(",") if s.strip()] if stages else None)
    except TilefarmError as error:  # InvalidRequest: the field and why, before anything is sent
        fail(f"error: {error}")
    with connected(server, api_key, team) as client:
        _follow(client.submit(request), wait, output, quiet, source, text)


@target_options(changes=True)
def resubmit(
    job_id: str = typer.Argument(..., help="the job to run again (same source, options and inputs)"),
    target=None,
    source: Optional[Path] = typer.Option(None, "--source", help="with this kernel file instead"),
    entry: Optional[str] = EntryOption,
    param: List[str] = typer.Option([], "--param", help="NAME=VALUE: change one factory parameter (repeatable)"),
    stages: Optional[str] = typer.Option(None, "--stages", help="other stages, comma-separated"),
    wait: bool = typer.Option(False, "--wait", "-w", help="follow the new job to its end"),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="download the new job's bundle here"),
    quiet: bool = typer.Option(False, "-q", "--quiet", help="no progress display"),
    server: Optional[str] = ServerOption, api_key: Optional[str] = KeyOption, team: Optional[str] = TeamOption,
) -> None:
    """Run a job again, as it was or with some of it changed (edit and resubmit); prints the new job's id."""
    overrides: dict = {"entry": entry}
    text = read_source(source) if source else None
    if text is not None:
        overrides.update(source=text, filename=source.name)
    if stages:
        overrides["stages"] = [s.strip() for s in stages.split(",") if s.strip()]
    with connected(server, api_key, team) as client:
        original = client.job(job_id)
        if param:
            overrides["params"] = {**original.view.params, **parse_params(param)}
        if target:  # the target options given change those fields of the original's target, the rest stays
            overrides["target"] = make_target({**original.view.target.model_dump(), **target}).model_dump()
        _follow(original.resubmit(**overrides), wait, output, quiet, source, text)


def status(job_id: str = typer.Argument(..., help="job id"),
           as_json: bool = typer.Option(False, "--json", help="the job as the API returns it"),
           wait: bool = typer.Option(False, "--wait", "-w", help="wait for the job to end"),
           server: Optional[str] = ServerOption, api_key: Optional[str] = KeyOption,
           team: Optional[str] = TeamOption) -> None:
    """A job's status, progress, stages, warnings and diagnostics. Exit 1 if it failed or was cancelled."""
    with connected(server, api_key, team) as client:
        job = client.job(job_id)
        if wait:
            wait_for(job, quiet=as_json)
        view = job.view
        if as_json:
            typer.echo(view.model_dump_json(indent=2))
        else:
            params = " ".join(f"{k}={v}" for k, v in view.params.items())
            typer.echo(f"{view.id}  {_phase(view)}  {view.filename}{':' + view.entry if view.entry else ''}"
                       f"{' ' + params if params else ''} for {view.target.arch}  team {view.team}"
                       f"{'  cache hit' if view.cache_hit else ''}")
            for stage in view.stages:
                detail = f"  {stage.detail}" if stage.detail else ""
                typer.echo(f"  {stage.name:<9} {stage.state:<10} {_duration(stage.duration_s)}{detail}")
            if view.terminal:
                typer.echo(f"  total     {_duration(_elapsed(view))}")
            print_warnings(view)
        if view.status in ("failed", "cancelled"):
            if not as_json:
                print_diagnostics(view, None, job.source() if view.diagnostics else None)
            raise typer.Exit(1)


def _print_log(text: str, console) -> None:
    """Log lines: as they are when piped (grep-able); on a terminal, time, stage and level in colour."""
    if not console.is_terminal:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from rich.text import Text

    from schemas.logs import parse_log_line

    for raw in text.splitlines():
        line = parse_log_line(raw)
        shown = Text()
        if line.time:
            shown.append(line.time[11:23] + " ", style="dim")
            shown.append(f"{(line.stage or '-'):<8} ", style="cyan")
            shown.append(f"{line.level:<5} ", style=LEVEL_STYLES.get(line.level, "") or "dim")
        style = LEVEL_STYLES.get(line.level, "")
        shown.append(line.text, style="bold" if line.text.startswith("== stage") and not style else style)
        console.print(shown, soft_wrap=True)


def logs(job_id: str = typer.Argument(..., help="job id"),
         follow: bool = typer.Option(False, "-f", "--follow", help="stream the log until the job ends"),
         server: Optional[str] = ServerOption, api_key: Optional[str] = KeyOption,
         team: Optional[str] = TeamOption) -> None:
    """A job's log (time, stage, level, text; in colour on a terminal); -f follows it as it grows (Server-Sent
    Events) and exits with the job's outcome."""
    console = _console(stderr=False)
    with connected(server, api_key, team) as client:
        job = client.job(job_id)
        if not follow:
            _print_log(job.logs(), console)
            return
        for chunk in job.follow_logs():
            _print_log(chunk, console)
    if job.view.status in ("failed", "cancelled"):
        raise typer.Exit(1)


def cancel(job_id: str = typer.Argument(..., help="job id"),
           server: Optional[str] = ServerOption, api_key: Optional[str] = KeyOption,
           team: Optional[str] = TeamOption) -> None:
    """Cancel a queued or running job (a running stage is interrupted within ~50 ms)."""
    with connected(server, api_key, team) as client:
        view = client.job(job_id).cancel()
    typer.echo(f"{view.id}: {view.status}" + (" (cancel requested)" if not view.terminal else ""))


def download(job_id: str = typer.Argument(..., help="job id"),
             output: Optional[Path] = typer.Option(None, "-o", "--output", help="directory [tilefarm-<id>]"),
             server: Optional[str] = ServerOption, api_key: Optional[str] = KeyOption,
             team: Optional[str] = TeamOption) -> None:
    """Download a finished job's bundle (artifacts, manifest.json, request.json, logs, outputs) into a directory."""
    output = output or Path(f"tilefarm-{job_id}")
    with connected(server, api_key, team) as client:
        for path in client.job(job_id).download_bundle(output):
            typer.echo(str(path))


def _modelled(found) -> list[str]:
    """The modelled device figures and the verdicts of two jobs, as lines."""
    lines = []
    perf = found.performance
    if perf is not None:
        us = lambda ns: "-" if ns is None else f"{ns / 1000:.2f} us"  # noqa: E731
        pct = lambda u: "-" if u is None else f"{u:.1%}"  # noqa: E731
        speed = f" ({perf.speedup:.2f}x)" if perf.speedup else ""
        lines += [f"modelled device time: {us(perf.device_time_ns[0])} -> {us(perf.device_time_ns[1])}{speed}",
                  f"matrix-engine utilization: {pct(perf.matrix_utilization[0])} -> {pct(perf.matrix_utilization[1])}",
                  f"cores: {perf.cores_used[0]} -> {perf.cores_used[1]}; math fidelity: {perf.math_fidelity[0]} -> "
                  f"{perf.math_fidelity[1]}"]
        if perf.bottleneck[0] != perf.bottleneck[1]:
            lines += [f"bottleneck: {perf.bottleneck[0]}", f"        -> {perf.bottleneck[1]}"]
    verdicts = found.verification
    if any(verdicts):
        said = ["-" if v is None else ("passed" if v.passed else "FAILED") + (
            f", worst {v.worst.name} max abs err {v.worst.max_abs_err:.3g}" if v.worst is not None
            and isinstance(v.worst.max_abs_err, float) else "") for v in verdicts]
        lines.append(f"verification: {said[0]} -> {said[1]}")
    return lines


def diff(job_a: str = typer.Argument(..., help="first job"), job_b: str = typer.Argument(..., help="second job"),
         stat: bool = typer.Option(False, "--stat", help="only which files differ"),
         timings: bool = typer.Option(False, "--timings", help="also the wall-clock figures (stage and pass seconds, "
                                                               "the emulator's run times): they differ on every run"),
         server: Optional[str] = ServerOption, api_key: Optional[str] = KeyOption,
         team: Optional[str] = TeamOption) -> None:
    """What differs between two jobs, most telling first: the options, the source, the modelled device time and
    utilization, the verdicts, the generated code, then the other artifacts (without their wall-clock fields unless
    --timings). Exit 1 if anything does."""
    with connected(server, api_key, team) as client:
        found = client.job(job_a).diff(job_b, timings=timings)
    for name, (a, b) in found.request.items():
        typer.echo(f"{name}: {json.dumps(a)} -> {json.dumps(b)}")
    source_changed = found.source or found.source_note
    if source_changed:
        typer.echo("source: changed" if stat else (found.source.rstrip("\n") if found.source
                                                  else f"source: changed ({found.source_note})"))
    for line in _modelled(found):
        typer.echo(line)
    changed = [f for f in [*found.code, *found.files] if f.status != "same"]
    for name, (a, b) in (found.timings or {}).items():
        typer.echo(f"{name}: {a} -> {b}")
    if stat:
        for f in changed:
            typer.echo(f"{f.name}: {f.status} ({f.sizes[0]} -> {f.sizes[1]} bytes)")
    else:
        for patch in [f.diff or f"{f.name}: {f.status}{f' ({f.note})' if f.note else ''}\n" for f in changed]:
            sys.stdout.write(patch if patch.endswith("\n") else patch + "\n")
    if found.request or source_changed or changed:
        raise typer.Exit(1)


def jobs(status: Optional[str] = typer.Option(None, "--status", help="queued|running|succeeded|failed|cancelled"),
         target: Optional[str] = typer.Option(None, "-t", "--target", help="arch"),
         of_team: Optional[str] = typer.Option(None, "--of-team", help="only this team's jobs (admin, or no auth)"),
         limit: int = typer.Option(20, "-n", "--limit", min=1, max=200),
         as_json: bool = typer.Option(False, "--json", help="the list as the API returns it"),
         server: Optional[str] = ServerOption, api_key: Optional[str] = KeyOption,
         team: Optional[str] = TeamOption) -> None:
    """Recent jobs, newest first, with filters."""
    with connected(server, api_key, team) as client:
        found = client.jobs(status=status, target=target, team=of_team, limit=limit)
    if as_json:
        typer.echo(found.model_dump_json(indent=2))
        return
    rows = [(j.id, j.status, _phase(j).removeprefix(j.status).strip(" ()"), j.target.arch, j.team,
             j.filename + (f":{j.entry}" if j.entry else ""), _age(j.created_at),
             _duration(j.finished_at - j.started_at) if j.finished_at and j.started_at else "-",
             "hit" if j.cache_hit else "", str(len(j.warnings)) if j.warnings else "") for j in found.items]
    _table(["ID", "STATUS", "STAGE", "TARGET", "TEAM", "FILE", "AGE", "DURATION", "CACHE", "WARN"], rows,
           styles=STATE_STYLES)


def devices(server: Optional[str] = ServerOption, api_key: Optional[str] = KeyOption,
            team: Optional[str] = TeamOption) -> None:
    """Hardware workers: state, current job, last heartbeat."""
    from schemas.jobs import DeviceRecord

    with connected(server, api_key, team) as client:
        found = [DeviceRecord.model_validate(d) for d in client.devices()]
    rows = [(d.id, d.state, d.arch, str(d.device_count), d.host, d.current_job or "-", _age(d.last_heartbeat))
            for d in found]
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
    console = _console(stderr=False)
    if not rows:
        typer.echo(empty, err=True)
        return
    if console.is_terminal:
        from rich.table import Table
        from rich.text import Text

        table = Table(box=None, header_style="bold dim", pad_edge=False)
        for header in headers:
            table.add_column(header, no_wrap=True)
        for row in rows:  # file names, entries, teams are the users' own: text, never rich markup
            table.add_row(*(Text(str(v)) for v in row), style=styles.get(row[1], ""))
        console.print(table)
        return
    widths = [max(len(str(v)) for v in column) for column in zip(headers, *rows)]
    for row in [headers, *rows]:
        typer.echo("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())


def register(app: typer.Typer) -> None:
    for command in (submit, status, logs, cancel, resubmit, download, diff, jobs, devices):
        app.command(command.__name__)(command)
