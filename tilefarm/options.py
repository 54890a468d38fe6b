"""What the commands share: the kernel and target options, their parsing, and how a usage error ends a command."""
from __future__ import annotations

import functools
import inspect
import typing
from pathlib import Path
from typing import List, Optional

import typer


def fail(message: str, code: int = 2) -> None:
    """Print `message` and end the command (2: a usage, input or connection error; 1: the work itself failed)."""
    typer.echo(message, err=True)
    raise typer.Exit(code)


def parse_params(specs: list[str]) -> dict[str, int | float | str]:
    """`--param M=256 --param dtype=float16` -> {"M": 256, "dtype": "float16"} (int, then float, else string)."""
    from schemas.jobs import param_value

    params: dict[str, int | float | str] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or not name.isidentifier():
            fail(f"error: --param takes NAME=VALUE, got `{spec}`")
        params[name] = param_value(text)
    return params


def parse_core_grid(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        x, y = (int(part) for part in text.lower().split("x"))
    except ValueError:
        fail(f"error: --core-grid {text!r}: expected WxH, e.g. 4x2")
    return x, y


# The target options, declared once: every command that generates or asks for code takes them (target_options)
TARGET_OPTIONS: dict[str, tuple[object, object]] = {
    "arch": (str, typer.Option("wormhole_b0", "-t", "--target", help="wormhole_b0 | blackhole | grayskull",
                               show_default=True)),
    "partition": (Optional[str], typer.Option(None, "--partition", help="contiguous | strided | block | zigzag "
                                                                         "[default: chosen with the blocking]")),
    "core_grid": (Optional[str], typer.Option(None, "--core-grid", help="at most this worker grid, e.g. 4x2")),
    "cb_depth": (Optional[int], typer.Option(None, "--cb-depth", help="buffered blocks per input circular buffer "
                                                                       "[default: 2, or TileLang's num_stages, lowered "
                                                                       "where L1 is short]")),
    "math_fidelity": (Optional[str], typer.Option(None, "--math-fidelity", help="LoFi | HiFi2 | HiFi3 | HiFi4 "
                                                                                 "[default: ttnn's for the operands' "
                                                                                 "dtype]")),
    "blocking": (Optional[str], typer.Option(None, "--blocking", help="auto: blocks and core grid chosen from the "
                                                                      "problem [default] | as_written: the kernel's "
                                                                      "own blocks")),
    "fp32_accumulation": (Optional[bool], typer.Option(None, "--fp32-accumulation/--no-fp32-accumulation",
                                                       help="fp32 DST accumulation [default: on when any tile of the "
                                                            "kernel is float32]", show_default=False)),
    "approx_exp": (Optional[bool], typer.Option(None, "--approx-exp/--precise-exp",
                                                help="exp with the LLK's approximate exp (within 3.13%, ~6x fewer "
                                                     "SFPU instructions, ttnn SDPA's default) [default: precise]",
                                                show_default=False)),
    "intermediate_dtype": (Optional[str], typer.Option(None, "--intermediate-dtype",
                                                       help="declared [default] | bfloat16: float32 matmul outputs "
                                                            "no loop carries (attention's scores) held in bfloat16 "
                                                            "in L1, as ttnn's SDPA holds them; tolerances count it")),
    "l1_shard": (List[str], typer.Option([], "--l1-shard", help="keep this tensor block-sharded in L1 (each core's "
                                                                 "shard is the block it computes or reads; no DRAM "
                                                                 "traffic for it); repeatable")),
}


def target_fields(values: dict) -> dict:
    """The TargetConfig fields the options gave (an option left out is the compiler's to choose)."""
    fields = {name: value for name, value in values.items() if value is not None and value != []}
    if "core_grid" in fields:
        fields["core_grid"] = parse_core_grid(fields["core_grid"])
    return fields


def make_target(fields: dict):
    """The TargetConfig the target options describe (a usage error naming the option's field when they do not make
    one): the client's own rule (tilefarm.client.make_target), so the CLI and a Python program agree."""
    from .client import InvalidRequest, make_target as target_of

    try:
        return target_of(None, **fields)
    except InvalidRequest as error:
        fail(f"error: invalid target options: {error}")


def target_options(*, changes: bool = False):
    """Give a command the target options (TARGET_OPTIONS): its own `target` parameter then receives the TargetConfig
    they make, or with changes=True (resubmit) the dict of the fields the user gave (-t has no default there)."""
    def decorate(command):
        own = inspect.signature(command)
        if "target" not in own.parameters:
            raise TypeError(f"{command.__name__} has no `target` parameter to receive the target")
        added = []
        for name, (annotation, option) in TARGET_OPTIONS.items():
            if changes and name == "arch":
                option = typer.Option(None, "-t", "--target", help="another arch")
                annotation = Optional[str]
            added.append(inspect.Parameter(f"target_{name}", inspect.Parameter.KEYWORD_ONLY, default=option,
                                           annotation=annotation))
        kept = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own.parameters.values() if p.name != "target"]
        hints = typing.get_type_hints(command)

        @functools.wraps(command)
        def run(**kwargs):
            given = {name: kwargs.pop(f"target_{name}") for name in TARGET_OPTIONS}
            fields = target_fields(given)
            return command(target=fields if changes else make_target(fields), **kwargs)

        del run.__wrapped__  # typer must read the signature below, not the command's own
        run.__signature__ = own.replace(parameters=kept[:1] + added + kept[1:])
        run.__annotations__ = {**{p.name: hints.get(p.name, p.annotation) for p in kept},
                               **{p.name: p.annotation for p in added}}
        return run
    return decorate


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
EntryOption = typer.Option(None, "--entry", help="kernel or TileLang kernel factory (default: main or the only one)")
ParamOption = typer.Option([], "--param", help="NAME=VALUE argument of a TileLang kernel factory (repeatable)")
InputOption = typer.Option([], "--input", "-i", help="NAME=FILE.npy, once per input buffer")
SeedOption = typer.Option(0, "--seed", help="seed of the random inputs (when no --input is given)")

