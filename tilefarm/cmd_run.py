"""`tilefarm run` (a compiled bundle on the emulator) and `tilefarm verify` (compile + emulate + reference)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import List, Optional

import typer

from .cli import app


def _fail(message: str, code: int = 2) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(code)


def _load_inputs(specs: list[str]) -> dict:
    import numpy as np

    inputs = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            _fail(f"error: --input takes NAME=FILE.npy, got `{spec}`")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            _fail(f"{path}: error: cannot load input `{name}`: {e}")
    return inputs


def _save_outputs(outputs: dict, directory: Path) -> list[Path]:
    import numpy as np

    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, array in outputs.items():
        path = directory / f"{name}.npy"
        np.save(path, np.asarray(array, dtype=np.float32))  # bf16/fp16 values are exact in float32
        written.append(path)
    return written


@app.command()
def run(
    bundle: Path = typer.Argument(..., help="directory written by `tilefarm compile`"),
    input: List[str] = typer.Option([], "--input", "-i", help="NAME=FILE.npy, once per input buffer"),
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
        _fail(f"{bundle}: error: not a compiled bundle ({e})")
    inputs = _load_inputs(input)
    if not inputs:
        _fail("error: no inputs given; pass --input NAME=FILE.npy for: " +
              ", ".join(b["name"] for b in plan["buffers"] if b["role"] == "input"))
    try:
        outcome = emulate(artifacts, target=TargetConfig(arch=plan["target"]["arch"]), inputs=inputs)
    except CompileError as e:
        _fail(e.render(), 1 if e.stage == "emulate" and "emulation failed" in e.message else 2)
    for path in _save_outputs(outcome.outputs, output_dir or bundle / "outputs"):
        typer.echo(f"wrote {path}")
    if report:
        typer.echo(json.dumps(outcome.report, indent=2))


@app.command()
def verify(
    source: Path = typer.Argument(..., help="kernel file"),
    target: str = typer.Option("wormhole_b0", "-t", "--target", help="wormhole_b0 | blackhole"),
    entry: Optional[str] = typer.Option(None, "--entry", help="kernel or TileLang kernel factory"),
    param: List[str] = typer.Option([], "--param", help="NAME=VALUE argument of a TileLang kernel factory (repeatable)"),
    seed: int = typer.Option(0, "--seed", help="seed of the random inputs"),
    partition: str = typer.Option("contiguous", "--partition"),
) -> None:
    """Compile, run on the emulator with random inputs, run the NumPy reference, and compare."""
    from compiler.api import compile_source, emulate
    from compiler.errors import CompileError
    from schemas.target import TargetConfig

    from .cmd_compile import parse_params

    params = parse_params(param)
    try:
        text = source.read_text()
        config = TargetConfig(arch=target, partition=partition)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        _fail(f"{source}: error: {e}")
    try:
        result = compile_source(text, filename=str(source), entry=entry, target=config, params=params)
        outcome = emulate(result.artifacts, target=config, source=text, filename=str(source), entry=result.entry, seed=seed,
                          params=params)
    except CompileError as e:
        _fail(e.render(), 1 if e.stage == "emulate" else 2)
    typer.echo(outcome.verification.render())
    t = outcome.timings
    typer.echo(f"compile {result.timings['total'] * 1e3:.0f} ms, emulator build {t['emulator_build'] * 1e3:.0f} ms, "
               f"run {t['emulator_run'] * 1e3:.0f} ms, reference {t['reference'] * 1e3:.0f} ms")
    if not outcome.passed:
        raise typer.Exit(1)
