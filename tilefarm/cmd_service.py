"""`tilefarm serve` and `tilefarm worker`."""
from __future__ import annotations

import os
import signal

import typer


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def serve(host: str = typer.Option(None, help="Bind address [TILEFARM_HOST, 127.0.0.1]"),
          port: int = typer.Option(None, help="Port [TILEFARM_PORT, 8000]"),
          workers: int = typer.Option(None, help="Embedded mode: local worker processes [TILEFARM_EMBEDDED_WORKERS]")) -> None:
    """Run the HTTP API. Without TILEFARM_BROKER_URL, also a local worker (embedded mode: no Redis needed)."""
    for name, value in (("HOST", host), ("PORT", port), ("EMBEDDED_WORKERS", workers)):
        if value is not None:
            os.environ[f"TILEFARM_{name}"] = str(value)
    import uvicorn

    from service.embedded import LocalWorker, recover
    from farm.settings import get_settings

    settings = get_settings()
    worker = None
    # uvicorn handles SIGTERM, shuts down, then raises it again: with the default action the process would die
    # there, before `finally` stops the embedded worker (left behind, hung in its pool's shutdown)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if settings.embedded:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        os.environ["TILEFARM_DATA_DIR"] = str(settings.data_dir.resolve())  # the worker must see the same files
        recovered = recover(settings)
        if recovered:
            typer.echo(f"re-queued {recovered} unfinished job(s)")
        if settings.embedded_workers:
            worker = LocalWorker(settings)
        typer.echo(f"tilefarm (embedded: data in {settings.data_dir.resolve()}) on http://{settings.host}:{settings.port}")
    try:
        uvicorn.run("service.app:app", host=settings.host, port=settings.port, log_level=settings.log_level.lower(),
                    access_log=False)
    finally:
        if worker is not None:
            worker.stop()


def worker(queues: str = typer.Option("compile", "-Q", "--queues", help="compile, hardware.<arch>, comma-separated"),
           concurrency: int = typer.Option(1, "-c", "--concurrency", help="Pool processes (each imports tvm once)"),
           pool: str = typer.Option("prefork", help="Celery pool"),
           hostname: str = typer.Option(None, "-n", "--hostname", help="Celery node name")) -> None:
    """Run a Celery worker (distributed mode needs TILEFARM_BROKER_URL=redis://...)."""
    from service.embedded import worker_command
    from farm.settings import get_settings

    command = worker_command(queues, concurrency, pool, get_settings().log_level, hostname)
    os.execv(command[0], command)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("worker")(worker)


if __name__ == "__main__":  # `python -m tilefarm.cmd_service serve` works before the CLI registers these
    _app = typer.Typer(no_args_is_help=True)
    register(_app)
    _app()
