"""`tilefarm serve` and `tilefarm worker`."""
from __future__ import annotations

import os
import signal
import threading
import time

import typer


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _say(text: str) -> None:
    typer.echo(f"tilefarm: {text}", err=True)


STILL_S = 30.0


def report_warm_up(data_dir, url: str, stop: threading.Event, interval_s: float = 0.5) -> None:
    """Say on the console what the embedded worker's warm-up is doing and about how long is left (its steps, as
    /readyz shows them): every step once, in order, even one that began and ended between two looks; then that the
    service is ready (or why the warm-up failed). Once `stop` is set it looks one last time (serve sets it and waits
    for this before it stops the worker, whose marker goes with it): a warm-up that ended after the previous look is
    still said, however soon the service is stopped after it."""
    from farm import readiness

    announced: set[tuple[int, str]] = set()
    still: dict[tuple[int, str], float] = {}  # a long step is said again every STILL_S, with how long it has taken
    stopping = False
    while not stopping:
        stopping = stop.wait(interval_s)
        found = readiness.workers(data_dir)
        now = time.time()
        for worker in found:
            steps = worker.get("steps") or []
            left = readiness.seconds_left(worker)
            for number, step in enumerate(steps, 1):
                key = (worker.get("pid"), step.get("name"))
                if step.get("state") in ("pending", "skipped"):
                    continue
                if key not in announced:
                    announced.add(key)
                    still[key] = now
                    soon = f" (about {left:.0f} s left)" if left is not None and step.get("state") == "running" else ""
                    _say(f"warming up {number}/{len(steps)}: {step.get('name')}{soon}")
                elif step.get("state") == "running" and now - still[key] >= STILL_S:
                    still[key] = now
                    expected = f"; expected about {step['expected_s']:.0f} s" if step.get("expected_s") else ""
                    _say(f"  still: {step.get('name')} ({now - step.get('started_at', now):.0f} s so far{expected})")
            if readiness.failed(worker):
                _say(f"the worker's warm-up failed: {worker.get('detail')} (jobs will say why too)")
                return
        warm = [w for w in found if w.get("warm")]
        if warm:
            _say(f"ready at {url} (warm-up took {max(w.get('warm_up_s') or 0 for w in warm):.1f} s): the dashboard "
                 "is there; `tilefarm submit FILE --wait` sends a job")
            return


def serve(host: str = typer.Option(None, help="Bind address [TILEFARM_HOST, 127.0.0.1]"),
          port: int = typer.Option(None, help="Port [TILEFARM_PORT, 8000]"),
          workers: int = typer.Option(None, help="Embedded mode: local worker processes [TILEFARM_EMBEDDED_WORKERS]")) -> None:
    """Run the HTTP API. Without TILEFARM_BROKER_URL, also a local worker (embedded mode: no Redis needed)."""
    for name, value in (("HOST", host), ("PORT", port), ("EMBEDDED_WORKERS", workers)):
        if value is not None:
            os.environ[f"TILEFARM_{name}"] = str(value)
    import gc

    import uvicorn

    # the app's imports (FastAPI, pydantic, the routes: most of this process's start) made with the cyclic collector
    # off, then frozen out of every later collection: the collector's runs over a heap that only grows were ~20% of
    # their CPU; uvicorn.run finds the module imported
    gc.disable()
    import service.app  # noqa: F401
    gc.freeze()
    gc.enable()
    from service.embedded import LocalWorker, recover
    from farm.settings import get_settings

    settings = get_settings()
    worker = reporter = None
    warm_up_said = threading.Event()
    # uvicorn handles SIGTERM, shuts down, then raises it again: with the default action the process would die
    # there, before `finally` stops the embedded worker (left behind, hung in its pool's shutdown)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if settings.embedded:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        os.environ["TILEFARM_DATA_DIR"] = str(settings.data_dir.resolve())  # the worker must see the same files
        unfinished = recover(settings)
        if unfinished:
            _say(f"{unfinished} job(s) left unfinished by the last run: the worker's reconciler runs them (again)")
        url = f"http://{settings.host}:{settings.port}"
        if settings.embedded_workers:
            worker = LocalWorker(settings)
            reporter = threading.Thread(target=report_warm_up, args=(settings.data_dir, url, warm_up_said),
                                        daemon=True, name="warm-up-report")
            reporter.start()
        _say(f"embedded mode (data in {settings.data_dir.resolve()}) on {url}: the API answers now; its worker "
             "warms up first (GET /readyz shows each step)")
    try:
        uvicorn.run("service.app:app", host=settings.host, port=settings.port, log_level=settings.log_level.lower(),
                    access_log=False)
    finally:
        warm_up_said.set()
        if reporter is not None:
            reporter.join()  # its last look, while the worker's marker is still there
        if worker is not None:
            typer.echo(f"embedded worker {worker.stop()}", err=True)


def worker(queues: str = typer.Option(None, "-Q", "--queues", show_default=False,
                                      help="Queues, comma-separated: compile (the default), hardware.<arch>"),
           concurrency: int = typer.Option(1, "-c", "--concurrency", help="Pool processes (each imports tvm once)"),
           pool: str = typer.Option("prefork", help="Celery pool"),
           hostname: str = typer.Option(None, "-n", "--hostname", help="Celery node name")) -> None:
    """Run a Celery worker (distributed mode needs TILEFARM_BROKER_URL=redis://...)."""
    from farm.queue import COMPILE_QUEUE  # imported here, not for the option's default: `tilefarm --help` stays quick
    from farm.settings import get_settings
    from service.embedded import worker_command

    command = worker_command(queues or COMPILE_QUEUE, concurrency, pool, get_settings().log_level, hostname)
    os.execv(command[0], command)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("worker")(worker)


if __name__ == "__main__":  # `python -m tilefarm.cmd_service serve` works before the CLI registers these
    _app = typer.Typer(no_args_is_help=True)
    register(_app)
    _app()
