"""`tilefarm run` (a compiled bundle on the emulator) and `tilefarm verify` (compile + emulate + reference)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .options import (BlockingOption, CbDepthOption, CoreGridOption, EntryOption, FidelityOption, InputOption,
                      L1ShardOption, ParamOption, PartitionOption, SeedOption, SourceArgument, fail, load_inputs,
                      parse_params, read_source, target_config)


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


def verify(
    source: Path = SourceArgument,
    target: str = typer.Option("wormhole_b0", "-t", "--target", help="wormhole_b0 | blackhole"),
    entry: Optional[str] = EntryOption,
    param: List[str] = ParamOption,
    input: List[str] = InputOption,
    seed: int = SeedOption,
    partition: Optional[str] = PartitionOption,
    core_grid: Optional[str] = CoreGridOption,
    cb_depth: Optional[int] = CbDepthOption,
    math_fidelity: Optional[str] = FidelityOption,
    blocking: str = BlockingOption,
    l1_shard: List[str] = L1ShardOption,
    profile: bool = typer.Option(False, "--profile", help="also print where the modelled device time goes"),
) -> None:
    """Compile, run on the emulator (random inputs unless given), run the NumPy reference, and compare."""
    config = target_config(target, partition=partition, core_grid=core_grid, cb_depth=cb_depth,
                           math_fidelity=math_fidelity, blocking=blocking, l1_shard=l1_shard)
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


def profile(
    source: Path = SourceArgument,
    target: str = typer.Option("wormhole_b0", "-t", "--target", help="wormhole_b0 | blackhole"),
    entry: Optional[str] = EntryOption,
    param: List[str] = ParamOption,
    input: List[str] = InputOption,
    seed: int = SeedOption,
    partition: Optional[str] = PartitionOption,
    core_grid: Optional[str] = CoreGridOption,
    cb_depth: Optional[int] = CbDepthOption,
    math_fidelity: Optional[str] = FidelityOption,
    blocking: str = BlockingOption,
    l1_shard: List[str] = L1ShardOption,
    timing_only: bool = typer.Option(False, "--timing-only", help="skip the arithmetic (large shapes): the same "
                                                                   "device time; outputs are not computed or checked"),
    as_json: bool = typer.Option(False, "--json", help="print profile.json (one JSON object) instead of tables"),
) -> None:
    """Where the modelled device time goes (the emulator's timing model): per core and RISC, DRAM traffic against
    the minimum, matrix-engine utilization, cycles per line of your source, and the bottleneck."""
    from compiler.api import profile as profile_of

    config = target_config(target, partition=partition, core_grid=core_grid, cb_depth=cb_depth,
                           math_fidelity=math_fidelity, blocking=blocking, l1_shard=l1_shard)
    result, outcome, text = _compile_and_emulate(source, config, entry, param, input, seed, timing_only)
    found = profile_of(result.artifacts, outcome.report)
    if as_json:
        typer.echo(json.dumps(found))
    else:
        print_profile(found, text)
    if not outcome.passed:
        raise typer.Exit(1)


def print_profile(found: dict, source_text: str) -> None:
    """The profile as rich tables: the summary, each RISC across the cores, and the source's costliest lines."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    ratio = found["dram_read_ratio"]
    console.print(f"[bold]{found['kernel']}[/] on {found['arch']} ({found['cores_used']} of {found['grid_cores']} "
                  f"cores{', timing only' if found['timing_only'] else ''}): device time "
                  f"[bold]{found['device_time_ns'] / 1000:.2f} us[/] ({found['device_cycles']:.0f} cycles, dispatch "
                  f"{found['dispatch_cycles']:.0f}); matrix engine {found['matrix_utilization']:.1%}"
                  + (f" at {found['math_fidelity']}" if found["math_fidelity"] else "")
                  + f"; DRAM read {found['dram_read_bytes'] / 1e6:.2f} MB"
                  + (f" ({ratio:.1f}x the minimum)" if ratio is not None else ""))
    console.print(f"bottleneck: [bold]{found['bottleneck']}[/]")
    riscs = Table("RISC", "kernel", "busy", "wait CB", "wait NoC", "wait pipe", "idle", title="per RISC, mean over cores")
    rows: dict[tuple[str, str], list[dict]] = {}
    for core in found["cores"]:
        for r in core["riscs"]:
            rows.setdefault((r["risc"], r["kernel"]), []).append(r)
    total = found["kernel_cycles"] or 1.0
    for (risc, kernel), entries in rows.items():
        mean = {k: sum(e[k] for e in entries) / len(entries) / total for k in ("busy", "wait_cb", "wait_noc",
                                                                               "wait_pipe", "idle")}
        riscs.add_row(risc, kernel, *(f"{mean[k]:.0%}" for k in ("busy", "wait_cb", "wait_noc", "wait_pipe", "idle")))
    console.print(riscs)
    lines = source_text.splitlines()
    table = Table("line", "cycles", "share", "busy", "wait", "source", title="your source, by modelled cycles")
    for row in sorted(found["lines"], key=lambda r: -r["cycles"])[:15]:
        text = lines[row["line"] - 1].strip() if 0 < row["line"] <= len(lines) else "(not mapped to a line)"
        table.add_row(str(row["line"]), f"{row['cycles']:.0f}", f"{row['share']:.1%}", f"{row['busy']:.0f}",
                      f"{row['wait']:.0f}", text[:70])
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("verify")(verify)
    app.command("profile")(profile)
