"""The `tilefarm` command line: one typer app; each command group lives in its own module."""
from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, help="tilefarm: tile-level kernels -> Tenstorrent TT-Metalium")


def _register() -> None:
    from . import cmd_compile  # noqa: F401  (registers compile/run/verify)


_register()

if __name__ == "__main__":
    app()
