"""`tilefarm run` (a compiled bundle on the emulator) and `tilefarm verify` (compile + emulate + reference)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .options import (EntryOption, InputOption, ParamOption, PartitionOption, SourceArgument, describe, fail,
                      load_inputs, parse_params, read_source)


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
             ", ".join(b["name"] for b in plan["buffers"] if b["role"] == "input"))
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


def verify(
    source: Path = SourceArgument,
    target: str = typer.Option("wormhole_b0", "-t", "--target", help="wormhole_b0 | blackhole"),
    entry: Optional[str] = EntryOption,
    param: List[str] = ParamOption,
    input: List[str] = InputOption,
    seed: int = typer.Option(0, "--seed", help="seed of the random inputs (when no --input is given)"),
    partition: Optional[str] = PartitionOption,
) -> None:
    """Compile, run on the emulator (random inputs unless given), run the NumPy reference, and compare."""
    from compiler.target import DEVICES
    from schemas.target import TargetConfig

    params = parse_params(param)
    text = read_source(source)
    try:
        config = TargetConfig(arch=target, partition=partition)
    except ValueError as e:
        fail(f"error: invalid target options: {describe(e)}")
    if not DEVICES[config.arch].supported_by_sdk:  # the emulator models the 0.81.1 SDK, which dropped it
        fail(f"error: {config.arch} cannot be emulated: the TT-Metalium 0.81.1 SDK no longer supports "
             f"{DEVICES[config.arch].display_name}; `tilefarm compile -t {config.arch}` compiles for it")
    inputs = load_inputs(input) or None

    from compiler.api import compile_source, emulate
    from compiler.errors import CompileError

    try:
        result = compile_source(text, filename=str(source), entry=entry, target=config, params=params)
        outcome = emulate(result.artifacts, target=config, source=text, filename=str(source), entry=result.entry,
                          seed=seed, params=params, inputs=inputs)
    except CompileError as e:
        fail(e.render(), 1 if e.stage == "emulate" else 2)
    typer.echo(outcome.verification.render())
    for warning in outcome.report.get("warnings") or []:
        typer.echo(f"{source}: warning: {warning}", err=True)
    t = outcome.timings
    typer.echo(f"compile {result.timings['total'] * 1e3:.0f} ms, emulator build {t['emulator_build'] * 1e3:.0f} ms, "
               f"run {t['emulator_run'] * 1e3:.0f} ms, reference {t['reference'] * 1e3:.0f} ms")
    if not outcome.passed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("run")(run)
    app.command("verify")(verify)
