"""The `tilefarm` command line: one typer app; each command group lives in its own module and registers itself here
through its `register(app)` (the one way a command joins the app)."""
from __future__ import annotations

import typer

from . import cmd_client, cmd_compile, cmd_run, cmd_sdk, cmd_service

app = typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None,
                  help="tilefarm: tile-level kernels -> Tenstorrent TT-Metalium")


@app.callback()
def main() -> None:
    """tilefarm: compile tile-level TIRx or TileLang kernels for Tenstorrent devices, run them, serve them."""


for _module in (cmd_compile, cmd_run, cmd_service, cmd_sdk, cmd_client):
    _module.register(app)

if __name__ == "__main__":
    app()
