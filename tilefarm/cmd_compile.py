"""`tilefarm compile`: source file -> the five artifacts in a directory."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .cli import app


def _fail(message: str) -> None:
    typer.echo(message, err=True)
    raise typer.Exit(2)


def parse_params(specs: list[str]) -> dict[str, int | float | str]:
    """`--param M=256 --param dtype=float16` -> {"M": 256, "dtype": "float16"} (int, then float, else string)."""
    params: dict[str, int | float | str] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or not name.isidentifier():
            _fail(f"error: --param takes NAME=VALUE, got `{spec}`")
        for convert in (int, float):
            try:
                params[name] = convert(text)
                break
            except ValueError:
                continue
        else:
            params[name] = text
    return params


@app.command()
def compile(
    source: Path = typer.Argument(..., help="kernel file (TVMScript TIRx with T.tile primitives)"),
    target: str = typer.Option("wormhole_b0", "-t", "--target", help="wormhole_b0 | blackhole | grayskull"),
    entry: Optional[str] = typer.Option(None, "--entry", help="kernel or TileLang kernel factory to compile "
                                        "(default: main or the only one)"),
    param: List[str] = typer.Option([], "--param", help="NAME=VALUE argument of a TileLang kernel factory (repeatable)"),
    partition: str = typer.Option("contiguous", "--partition", help="contiguous | strided | block"),
    core_grid: Optional[str] = typer.Option(None, "--core-grid", help="override the worker grid, e.g. 4x2"),
    cb_depth: int = typer.Option(2, "--cb-depth", help="buffered blocks per circular buffer"),
    math_fidelity: str = typer.Option("HiFi4", "--math-fidelity"),
    output: Path = typer.Option(Path("out"), "-o", "--output", help="output directory"),
    dump_ir: bool = typer.Option(False, "--dump-ir", help="write ir/NN_<pass>.py after every pass"),
) -> None:
    """Compile a kernel to reader/compute/writer kernels, main.cpp and tt.plan.json."""
    from pydantic import ValidationError

    from compiler.api import compile_source
    from compiler.errors import CompileError
    from schemas.target import TargetConfig

    try:
        text = source.read_text()
    except (OSError, UnicodeDecodeError) as e:
        _fail(f"{source}: error: cannot read source: {e}")
    try:
        grid = tuple(int(x) for x in core_grid.lower().split("x")) if core_grid else None
        config = TargetConfig(arch=target, partition=partition, core_grid=grid, cb_depth=cb_depth,
                              math_fidelity=math_fidelity)
    except (ValueError, ValidationError) as e:
        _fail(f"error: invalid target options: {e}")
    try:
        result = compile_source(text, filename=str(source), entry=entry, target=config, dump_ir=dump_ir,
                                params=parse_params(param))
    except CompileError as e:
        _fail(e.render())
    result.write(output)
    typer.echo(f"{source}: compiled `{result.entry}` for {config.arch} -> {output}/ "
               f"({result.timings['total'] * 1e3:.1f} ms)")
