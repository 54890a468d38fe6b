"""Targets, the device farm, health, readiness and metrics."""
from __future__ import annotations

import time
import typing

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from compiler.target import DATA_FORMATS, DEVICES
from schemas.jobs import DeviceRecord, rfc3339
from schemas.target import MathFidelity, PartitionPolicy
from farm import readiness
from service.deps import QueueDep, SettingsDep, StoreDep
from service.metrics import StoreCollector
from service.problems import Problem

router = APIRouter(tags=["system"])


@router.get("/v1/targets", summary="Architectures and their limits")
def targets() -> dict:
    return {"targets": [
        {"arch": d.arch, "display_name": d.display_name, "core_grid": list(d.core_grid), "num_cores": d.num_cores,
         "l1_bytes": d.l1_bytes, "l1_available_for_cbs": d.l1_available_for_cbs, "dram_banks": d.dram_banks,
         "num_cbs": d.num_cbs, "dram_alignment": d.dram_alignment, "supported_by_sdk": d.supported_by_sdk}
        for d in DEVICES.values()],
        "data_formats": sorted(DATA_FORMATS), "partition_policies": list(typing.get_args(PartitionPolicy)),
        "math_fidelities": list(typing.get_args(MathFidelity)), "cb_depth": {"min": 1, "max": 8}}


@router.get("/v1/devices", response_model=list[DeviceRecord], summary="Hardware workers and their devices")
def devices(store: StoreDep, settings: SettingsDep) -> list[DeviceRecord]:
    stale = time.time() - 3 * settings.heartbeat_s
    return [d.model_copy(update={"state": "offline"}) if d.last_heartbeat < stale else d for d in store.devices()]


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict:  # answered by the event loop itself: no thread, no store
    return {"status": "ok"}


def _worker_view(entry: dict) -> dict:
    """A worker's marker as /readyz shows it: warm or not, and its warm-up steps (each with its state, the seconds
    it took and what it is expected to take), with about how long is left."""
    left = readiness.seconds_left(entry)
    return {"host": entry.get("host"), "pid": entry.get("pid"), "warm": bool(entry.get("warm")),
            "taking_work": bool(entry.get("beating")),
            "detail": entry.get("detail"), "warm_up_s": entry.get("warm_up_s"), "since": rfc3339(entry["since"]),
            "seconds_left": None if entry.get("warm") or left is None else round(left, 1),
            "steps": [{k: step.get(k) for k in ("name", "state", "seconds", "expected_s")}
                      for step in entry.get("steps") or []]}


@router.get("/readyz", summary="Ready for jobs: the job store and broker answer and (embedded mode) the local "
                                "worker is warm, so a job sent now starts at once; the body lists each worker's "
                                "warm-up steps and about how long is left")
def readyz(store: StoreDep, queue: QueueDep, settings: SettingsDep) -> dict:
    checks = {}
    for name, ping in (("store", store.ping), ("broker", queue.ping)):
        try:
            ping()
            checks[name] = "ok"
        except Exception as error:
            checks[name] = f"{type(error).__name__}: {error}"
    # a worker counts when warm and beating: it and its main process ran within the last 3 heartbeats (a SIGSTOPped
    # or hung worker is not ready, however warm it was)
    silent_s = 3 * settings.heartbeat_s
    found = readiness.workers(settings.data_dir, beat_within_s=silent_s)
    warm = [w for w in found if w.get("warm") and w.get("beating")]
    # (warm, but its main process never beat: its consumer is starting, still part of the warm-up)
    stalled = [f"{w['host']} pid {w['pid']}" for w in found if w.get("warm") and not w.get("beating")
               and w.get("consuming")]
    failed = [f"{w['host']} pid {w['pid']}: {w['detail']}" for w in found if readiness.failed(w)]
    checks["workers"] = f"{len(warm)} warm" + (
        f"; not taking work (no heartbeat for {silent_s:g} s): {', '.join(stalled)}" if stalled else "") + (
        f"; warm-up failed: {'; '.join(failed)}" if failed else "")
    workers = [_worker_view(w) for w in found]
    # embedded: the service's own worker must be warm; distributed: workers come and go on other hosts (informative)
    wanted = settings.embedded and settings.embedded_workers > 0
    if any(checks[name] != "ok" for name in ("store", "broker")) or (wanted and not warm):
        detail = "not ready"
        if wanted and not warm and stalled:
            detail = f"not ready: the worker is not taking work (no heartbeat for {silent_s:g} s: stopped or hung)"
        elif wanted and not warm:
            running = [f"{step['name']} ({i + 1}/{len(w['steps'])})" for w in workers
                       for i, step in enumerate(w["steps"]) if step["state"] == "running"]
            left = [w["seconds_left"] for w in workers if w["seconds_left"] is not None]
            detail = "not ready: the worker is warming up (compiler, sandbox, emulator runtime)" + (
                f": {running[0]}" if running else "") + (f", about {min(left):.0f} s left" if left else "")
        raise Problem(503, detail, type_="/problems/unavailable", checks=checks, workers=workers,
                      headers={"Retry-After": "1"})
    return {"status": "ready", "checks": checks, "workers": [w for w in workers if w["warm"] and w["taking_work"]]}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(store: StoreDep) -> Response:
    registry = CollectorRegistry()
    registry.register(StoreCollector(store))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
