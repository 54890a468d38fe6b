"""Targets, the device farm, health, readiness and metrics."""
from __future__ import annotations

import time
import typing

from fastapi import APIRouter, Depends, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import CollectorRegistry

from compiler.target import DATA_FORMATS, DEVICES
from schemas.jobs import DeviceRecord
from schemas.target import MathFidelity, PartitionPolicy
from service.deps import queue_dep, settings_dep, store_dep
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
def devices(store=Depends(store_dep), settings=Depends(settings_dep)) -> list[DeviceRecord]:
    stale = time.time() - 3 * settings.heartbeat_s
    return [d.model_copy(update={"state": "offline"}) if d.last_heartbeat < stale else d for d in store.devices()]


@router.get("/healthz", summary="The process is up")
def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz", summary="The broker and the job store answer")
def readyz(store=Depends(store_dep), queue=Depends(queue_dep)) -> dict:
    checks = {}
    for name, ping in (("store", store.ping), ("broker", queue.ping)):
        try:
            ping()
            checks[name] = "ok"
        except Exception as error:
            checks[name] = f"{type(error).__name__}: {error}"
    if any(v != "ok" for v in checks.values()):
        raise Problem(503, "not ready", checks=checks, headers={"Retry-After": "2"})
    return {"status": "ready", "checks": checks}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(store=Depends(store_dep), queue=Depends(queue_dep)) -> Response:
    registry = CollectorRegistry()
    registry.register(StoreCollector(store, queue))
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
