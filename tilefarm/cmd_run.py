"""`tilefarm run` (a compiled bundle on the emulator) and `tilefarm verify` (compile + emulate + reference)."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import List, Optional

import typer

from .cmd_client import KeyOption, ServerOption, TeamOption, connected
from .options import (EntryOption, InputOption, ParamOption, SeedOption, SourceArgument, fail, load_inputs,
                      parse_params, read_source, target_options)


def _save_outputs(outputs: dict, directory: Path) -> list[Path]:
    import numpy as np

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, array in outputs.items():
        path = directory / f"{name}.npy"
        np.save(path, np.asarray(array, dtype=np.float32))  # bf16/fp16 values are exact in float32
        written.append(path)
    return written


def run(
    bundle: Path = typer.Argument(..., help="directory written by `tilefarm compile`"),
    input: List[str] = InputOption,
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", help="where to write NAME.npy (default: BUNDLE/outputs)"),
    report: bool = typer.Option(False, "--report", help="print the emulator's per-core counters as JSON"),
) -> None:
    """Run a compiled bundle on the emulated device; writes every output buffer as NAME.npy (float32)."""
    from compiler.api import emulate
    from compiler.errors import CompileError
    from schemas.target import TargetConfig

    try:
        artifacts = {p.name: p.read_bytes() for p in bundle.iterdir() if p.is_file()}
        plan = json.loads(artifacts["tt.plan.json"])
    except (OSError, KeyError, ValueError) as e:
        fail(f"{bundle}: error: not a compiled bundle ({e})")
    inputs = load_inputs(input)
    if not inputs:
        fail("error: no inputs given; pass --input NAME=FILE.npy for: " +
             ", ".join(b["name"] for b in plan["buffers"] if b["role"] == "input" or b.get("accumulate")))
    try:
        outcome = emulate(artifacts, target=TargetConfig(arch=plan["target"]["arch"]), inputs=inputs)
    except CompileError as e:
        fail(e.render(), 1 if e.stage == "emulate" and "emulation failed" in e.message else 2)
    for path in _save_outputs(outcome.outputs, output_dir or bundle / "outputs"):
        typer.echo(f"wrote {path}")
    for warning in outcome.report.get("warnings") or []:
        typer.echo(f"{bundle}: warning: {warning}", err=True)
    if report:
        typer.echo(json.dumps(outcome.report, indent=2))


def _compile_and_emulate(source: Path, config, entry: str | None, param: list[str], input: list[str], seed: int,
                         timing_only: bool = False):
    """(compile result, emulation outcome, source text) of a kernel file; usage and compile errors end the command."""
    from compiler.api import compile_source, emulate
    from compiler.errors import CompileError
    from compiler.target import DEVICES

    if not DEVICES[config.arch].supported_by_sdk:  # the emulator models the 0.81.1 SDK, which dropped it
        fail(f"error: {config.arch} cannot be emulated: the TT-Metalium 0.81.1 SDK no longer supports "
             f"{DEVICES[config.arch].display_name}; `tilefarm compile -t {config.arch}` compiles for it")
    params = parse_params(param)
    text = read_source(source)
    inputs = load_inputs(input) or None
    try:
        result = compile_source(text, filename=str(source), entry=entry, target=config, params=params)
        outcome = emulate(result.artifacts, target=config, source=text, filename=str(source), entry=result.entry,
                          seed=seed, params=params, inputs=inputs, timing_only=timing_only)
    except CompileError as e:
        fail(e.render(), 1 if e.stage == "emulate" else 2)
    for warning in outcome.report.get("warnings") or []:
        typer.echo(f"{source}: warning: {warning}", err=True)
    return result, outcome, text


@target_options()
def verify(
    source: Path = SourceArgument,
    target=None,
    entry: Optional[str] = EntryOption,
    param: List[str] = ParamOption,
    input: List[str] = InputOption,
    seed: int = SeedOption,
    profile: bool = typer.Option(False, "--profile", help="also print where the modelled device time goes"),
) -> None:
    """Compile, run on the emulator (random inputs unless given), run the NumPy reference, and compare."""
    config = target
    result, outcome, text = _compile_and_emulate(source, config, entry, param, input, seed)
    typer.echo(outcome.verification.render())
    t = outcome.timings
    typer.echo(f"compile {result.timings['total'] * 1e3:.0f} ms, emulator build {t['emulator_build'] * 1e3:.0f} ms, "
               f"run {t['emulator_run'] * 1e3:.0f} ms, reference {t['reference'] * 1e3:.0f} ms")
    if profile:
        from compiler.api import profile as profile_of

        print_profile(profile_of(result.artifacts, outcome.report), text)
    if not outcome.passed:
        raise typer.Exit(1)


JOB_ID = re.compile(r"^[0-9a-f]{12,64}$")


@target_options()
def profile(
    source: Path = typer.Argument(..., help="kernel file (TIRx or TileLang), or the id of a service job whose "
                                            "emulate stage ran"),
    target=None,
    entry: Optional[str] = EntryOption,
    param: List[str] = ParamOption,
    input: List[str] = InputOption,
    seed: int = SeedOption,
    timing_only: bool = typer.Option(False, "--timing-only", help="skip the arithmetic (large shapes): the same "
                                                                   "device time; outputs are not computed or checked"),
    as_json: bool = typer.Option(False, "--json", help="print profile.json (one JSON object) instead of tables"),
    trace: Optional[Path] = typer.Option(None, "--trace", help="also write the per-core, per-RISC timeline here as "
                                                               "Trace Event Format JSON (open it in Perfetto's UI or "
                                                               "chrome://tracing)"),
    csv: Optional[Path] = typer.Option(None, "--csv", help="also write the program as a row of tt-metal's "
                                                           "ops_perf_results CSV here (tt-perf-report, ttnn-visualizer)"),
    server: Optional[str] = ServerOption, api_key: Optional[str] = KeyOption, team: Optional[str] = TeamOption,
) -> None:
    """Where the modelled device time goes (the emulator's timing model): per core and RISC, DRAM traffic against
    the minimum, matrix-engine utilization, cycles per line of your source, and the bottleneck. SOURCE may be a
    service job's id: its emulate stage's profile is shown (the target options are the job's own)."""
    from compiler.api import profile as profile_of

    passed = True
    if not source.exists() and JOB_ID.match(str(source)):
        found, plan, text = _job_profile(str(source), server, api_key, team)
    else:
        result, outcome, text = _compile_and_emulate(source, target, entry, param, input, seed, timing_only)
        found, plan, passed = profile_of(result.artifacts, outcome.report), result.plan, outcome.passed
    if as_json:
        typer.echo(json.dumps(found))
    else:
        print_profile(found, text)
    _write_exports(found, plan, trace, csv)
    if not passed:
        raise typer.Exit(1)


def _job_profile(job_id: str, server: str | None, api_key: str | None, team: str | None) -> tuple[dict, dict, str]:
    """(profile.json, tt.plan.json, source text) of a service job."""
    from .client import ApiError

    with connected(server, api_key, team) as client:
        job = client.job(job_id)
        try:
            found = json.loads(job.artifact("emulate/profile.json"))
        except ApiError as error:
            if error.status != 404:
                raise
            ran = next((s.state for s in job.view.stages if s.name == "emulate"), "not asked for")
            fail(f"job {job_id} has no profile: its emulate stage is {ran} (a job's profile is made when its emulate "
                 "stage runs: submit with --stages compile,emulate)", 1)
        return found, json.loads(job.artifact("tt.plan.json")), job.source()


def _write_exports(found: dict, plan: dict, trace: Path | None, csv: Path | None) -> None:
    from compiler.api import profile_exports

    if trace is None and csv is None:
        return
    exports = profile_exports(found, plan)
    for path, name in ((trace, "trace.json"), (csv, "ops_perf_results.csv")):
        if path is not None:
            path.write_bytes(exports[name])
            typer.echo(f"wrote {path}", err=True)


def _console():
    """Rich output; piped (not a terminal), wide enough that a source line is printed whole."""
    from rich.console import Console

    console = Console(highlight=False)
    return console if console.is_terminal else Console(highlight=False, width=200)


def print_profile(found: dict, source_text: str) -> None:
    """The profile as rich tables: the summary, each RISC across the cores, and the source's costliest lines. Every
    text from the user's kernel is printed as text (rich.text.Text), never read as rich markup."""
    from rich.table import Table
    from rich.text import Text

    console = _console()
    ratio = found["dram_read_ratio"]
    console.print(Text.assemble(
        (found["kernel"], "bold"), f" on {found['arch']} ({found['cores_used']} of {found['grid_cores']} cores"
        f"{', timing only' if found['timing_only'] else ''}): device time ",
        (f"{found['device_time_ns'] / 1000:.2f} us", "bold"),
        f" ({found['device_cycles']:.0f} cycles, of which program dispatch {found['dispatch_cycles']:.0f}); matrix "
        f"engine {found['matrix_utilization']:.1%}" + (f" at {found['math_fidelity']}" if found["math_fidelity"] else "")
        + f"; DRAM read {found['dram_read_bytes'] / 1e6:.2f} MB" + (f" ({ratio:.1f}x the minimum)" if ratio is not None
                                                                      else "")))
    console.print(Text.assemble("bottleneck: ", (found["bottleneck"], "bold")))
    riscs = Table("RISC", "kernel", "busy", "wait CB", "wait NoC", "wait pipe", "idle",
                  title="per RISC, mean over cores, share of the kernel time")
    rows: dict[tuple[str, str], list[dict]] = {}
    for core in found["cores"]:
        for r in core["riscs"]:
            rows.setdefault((r["risc"], r["kernel"]), []).append(r)
    total = found["kernel_cycles"] or 1.0
    for (risc, kernel), entries in rows.items():
        mean = {k: sum(e[k] for e in entries) / len(entries) / total for k in ("busy", "wait_cb", "wait_noc",
                                                                               "wait_pipe", "idle")}
        riscs.add_row(Text(risc), Text(kernel), *(f"{mean[k]:.0%}" for k in ("busy", "wait_cb", "wait_noc",
                                                                              "wait_pipe", "idle")))
    console.print(riscs)
    lines = source_text.splitlines()
    table = Table("line", "cycles, all cores x RISCs", "share", "busy", "waiting", "source",
                  title="your source, by modelled cycles")
    for row in sorted(found["lines"], key=lambda r: -r["cycles"])[:15]:
        if row["line"] == 0:
            text = "(not a line of yours: code the compiler added, see below)"
        else:
            text = lines[row["line"] - 1].strip() if 0 < row["line"] <= len(lines) else "(past the end of the source)"
        table.add_row(str(row["line"] or "-"), f"{row['cycles']:.0f}", f"{row['share']:.1%}", f"{row['busy']:.0f}",
                      f"{row['wait']:.0f}", Text(text))
    console.print(table)
    console.print(Text(
        "cycles: each line's device calls, summed over every RISC of every core that ran them (busy + waiting), so "
        "they add up to far more than the device time; share: of all of them. Program dispatch is not a line: it "
        "is in the device time above.", style="dim"))
    unmapped = found.get("unmapped") or []
    if unmapped:
        total_unmapped = sum(u["cycles"] for u in unmapped) or 1.0
        console.print(Text("(not a line of yours), by the call it makes:", style="bold"))
        for call in unmapped[:5]:
            where = ", ".join(call["where"][:3]) + (" ..." if len(call["where"]) > 3 else "")
            console.print(Text(f"  {call['cycles'] / total_unmapped:.0%} {call['call']} ({where}): {call['purpose']}"))


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("verify")(verify)
    app.command("profile")(profile)
