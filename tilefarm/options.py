"""What the commands share: the kernel and target options, their parsing, and how a usage error ends a command."""
from __future__ import annotations

from pathlib import Path
import typer


def fail(message: str, code: int = 2) -> None:
    """Print `message` and end the command (2: a usage, input or connection error; 1: the work itself failed)."""
    typer.echo(message, err=True)
    raise typer.Exit(code)


def describe(error: Exception) -> str:
    """A pydantic ValidationError as `field: why (got value)`, one per problem; other errors as they are."""
    from pydantic import ValidationError

    if not isinstance(error, ValidationError):
        return str(error)
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']} (got {e.get('input')!r})"
                     for e in error.errors())


def parse_params(specs: list[str]) -> dict[str, int | float | str]:
    """`--param M=256 --param dtype=float16` -> {"M": 256, "dtype": "float16"} (int, then float, else string)."""
    params: dict[str, int | float | str] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or not name.isidentifier():
            fail(f"error: --param takes NAME=VALUE, got `{spec}`")
        for convert in (int, float):
            try:
                params[name] = convert(text)
                break
            except ValueError:
                continue
        else:
            params[name] = text
    return params


def parse_core_grid(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        x, y = (int(part) for part in text.lower().split("x"))
    except ValueError:
        fail(f"error: --core-grid {text!r}: expected WxH, e.g. 4x2")
    return x, y


def target_config(target: str, *, partition: str | None = None, core_grid: str | None = None,
                  cb_depth: int | None = None, math_fidelity: str | None = None, blocking: str = "auto",
                  l1_shard: list[str] | None = None):
    """The TargetConfig the target options describe (a usage error when they do not make one)."""
    from pydantic import ValidationError

    from schemas.target import TargetConfig

    try:
        return TargetConfig(arch=target, partition=partition, core_grid=parse_core_grid(core_grid), cb_depth=cb_depth,
                            math_fidelity=math_fidelity, blocking=blocking, l1_shard=list(l1_shard or []))
    except ValidationError as e:
        fail(f"error: invalid target options: {describe(e)}")


def load_inputs(specs: list[str]) -> dict:
    """`-i A=a.npy` -> {"A": ndarray}."""
    import numpy as np

    inputs = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            fail(f"error: --input takes NAME=FILE.npy, got `{spec}`")
        try:
            inputs[name] = np.load(path, allow_pickle=False)
        except (OSError, ValueError) as e:
            fail(f"{path}: error: cannot load input `{name}`: {e}")
    return inputs


def read_source(path: Path) -> str:
    try:
        return path.read_text()
    except (OSError, UnicodeDecodeError) as error:
        fail(f"{path}: error: cannot read source: {error}")


SourceArgument = typer.Argument(..., help="kernel file: TVMScript TIRx with T.tile primitives, or TileLang")
TargetOption = typer.Option("wormhole_b0", "-t", "--target", help="wormhole_b0 | blackhole | grayskull")
EntryOption = typer.Option(None, "--entry", help="kernel or TileLang kernel factory (default: main or the only one)")
ParamOption = typer.Option([], "--param", help="NAME=VALUE argument of a TileLang kernel factory (repeatable)")
InputOption = typer.Option([], "--input", "-i", help="NAME=FILE.npy, once per input buffer")
SeedOption = typer.Option(0, "--seed", help="seed of the random inputs (when no --input is given)")
PartitionOption = typer.Option(None, "--partition", help="contiguous | strided | block [default: chosen with the blocking]")
CoreGridOption = typer.Option(None, "--core-grid", help="override the worker grid, e.g. 4x2")
CbDepthOption = typer.Option(None, "--cb-depth", help="buffered blocks per input circular buffer [default: 2, or "
                                                       "TileLang's num_stages, lowered where L1 is short]")
FidelityOption = typer.Option(None, "--math-fidelity", help="LoFi | HiFi2 | HiFi3 | HiFi4 [default: ttnn's for the "
                                                             "operands' dtype]")
L1ShardOption = typer.Option([], "--l1-shard", help="keep this tensor block-sharded in L1 (each core's shard is the "
                                                     "block it computes or reads; no DRAM traffic for it); repeatable")
BlockingOption = typer.Option("auto", "--blocking", help="auto: blocks and core grid chosen from the problem | "
                                                         "as_written: the kernel's own blocks")

