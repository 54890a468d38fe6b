"""The `tilefarm` command line: one typer app; each command group lives in its own module."""
from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, help="tilefarm: tile-level kernels -> Tenstorrent TT-Metalium")


@app.callback()
def main() -> None:
    """tilefarm: compile tile-level TIRx kernels for Tenstorrent devices, run them, serve them."""


def _register() -> None:
    from . import cmd_compile, cmd_run  # noqa: F401  (register compile, run, verify)
    from .cmd_client import register as register_client
    from .cmd_sdk import register as register_sdk
    from .cmd_service import register as register_service

    register_service(app)
    register_sdk(app)
    register_client(app)


_register()

if __name__ == "__main__":
    app()
