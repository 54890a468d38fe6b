"""`tilefarm compile`: source file -> the five artifacts in a directory."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .options import EntryOption, ParamOption, SourceArgument, fail, parse_params, read_source, target_options


@target_options()
def compile(
    source: Path = SourceArgument,
    target=None,
    entry: Optional[str] = EntryOption,
    param: List[str] = ParamOption,
    output: Path = typer.Option(Path("out"), "-o", "--output", help="output directory"),
    dump_ir: bool = typer.Option(False, "--dump-ir", help="write ir/NN_<phase>_<pass>.py after every pass"),
    explain: bool = typer.Option(False, "--explain", help="print the blocks, core grid and partition chosen, and why"),
) -> None:
    """Compile a kernel to reader/compute/writer kernels, main.cpp and tt.plan.json."""
    from compiler.api import compile_source
    from compiler.errors import CompileError

    text = read_source(source)
    config = target
    try:
        result = compile_source(text, filename=str(source), entry=entry, target=config, dump_ir=dump_ir,
                                params=parse_params(param))
    except CompileError as e:
        fail(e.render())
    result.write(output)
    typer.echo(f"{source}: compiled `{result.entry}` for {config.arch} -> {output}/ "
               f"({result.timings['total'] * 1e3:.1f} ms)")
    if explain:
        schedule = result.plan["schedule"]
        typer.echo(f"schedule ({schedule['blocking']} blocking):")
        for line in schedule["explain"]:
            typer.echo(f"  {line}")


def register(app: typer.Typer) -> None:
    app.command("compile")(compile)
