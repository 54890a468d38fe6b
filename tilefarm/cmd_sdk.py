"""`tilefarm sdk fetch-headers` and `tilefarm sdk check BUNDLE_DIR` (the real-header check of a compiled bundle)."""
from __future__ import annotations

import json
from pathlib import Path

import typer

sdk_app = typer.Typer(no_args_is_help=True, help="The TT-Metalium SDK: real device headers, kernel checks.")


@sdk_app.command("fetch-headers")
def fetch_headers(force: bool = typer.Option(False, "--force", help="Download and extract again")) -> None:
    """Download the ttnn 0.81.1 wheel (as a file) and extract its TT-Metalium device headers and ttnn's device
    kernels (run by the emulator) into the cache."""
    from compiler.toolchain.sdk_headers import SdkHeadersError, fetch_headers as fetch

    try:
        result = fetch(force=force)
    except SdkHeadersError as error:
        typer.echo(f"error: {error}", err=True)
        raise typer.Exit(1)
    if result.fetched:
        typer.echo(f"fetched {result.wheel_bytes / 1e6:.1f} MB in {result.download_seconds:.2f} s, extracted "
                   f"{result.members} files in {result.extract_seconds:.2f} s -> {result.root}, {result.kernels_root}")
    else:
        typer.echo(f"already present: {result.root}, {result.kernels_root}")


@sdk_app.command("check")
def check(bundle_dir: Path = typer.Argument(..., help="A compiled bundle (reader/compute/writer.cpp, tt.plan.json)"),
          arch: str = typer.Option(None, "--arch", "-t", help="Default: the plan's target arch"),
          as_json: bool = typer.Option(False, "--json", help="Print the report as JSON")) -> None:
    """Compile the bundle's kernels against the real TT-Metalium 0.81.1 headers. Exit 1 when a kernel fails."""
    from compiler.toolchain.header_check import HeaderCheckUnavailable, check_bundle
    from compiler.toolchain.sdk_headers import SdkHeadersError

    plan_path = bundle_dir / "tt.plan.json"
    if not plan_path.is_file():
        typer.echo(f"{bundle_dir}: error: not a compiled bundle (no tt.plan.json)", err=True)
        raise typer.Exit(2)
    try:
        plan = json.loads(plan_path.read_text())
        artifacts = {k["file"]: (bundle_dir / k["file"]).read_bytes() for k in plan["kernels"]}
    except (OSError, ValueError, KeyError) as error:
        typer.echo(f"{bundle_dir}: error: unreadable bundle: {error}", err=True)
        raise typer.Exit(2)
    artifacts["tt.plan.json"] = plan_path.read_bytes()
    try:
        report = check_bundle(artifacts, arch=arch)
    except (HeaderCheckUnavailable, SdkHeadersError) as error:
        typer.echo(f"error: the check cannot run here: {error}", err=True)
        raise typer.Exit(2)
    typer.echo(json.dumps(report.to_dict(), indent=2) if as_json else report.render().rstrip())
    raise typer.Exit(0 if report.passed else 1)


def register(app: typer.Typer) -> None:
    app.add_typer(sdk_app, name="sdk")
