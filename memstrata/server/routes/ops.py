"""Health (the process answers), readiness (the store and the session store answer,
disk left, the worker runs, not draining) and Prometheus metrics. None of them needs a key."""

from __future__ import annotations

import os
import shutil

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ...errors import MemstrataError
from .. import schemas as s
from .common import Svc

router = APIRouter(tags=["ops"])

#: Free space beside a SQLite store under which the service is not ready: a write
#: then fails (SQLITE_FULL) rather than being acknowledged, so a balancer should send
#: traffic elsewhere before that.
MIN_FREE_DISK_MB = 100


def free_disk_mb(url: str) -> float | None:
    """Free space (MB) on the file system of a SQLite store's file; None for a store
    whose disk this process cannot see (PostgreSQL, in memory)."""
    if not url.startswith("sqlite:///"):
        return None
    try:
        return shutil.disk_usage(os.path.dirname(os.path.abspath(url[len("sqlite:///"):]))).free / 2**20
    except OSError:
        return None


@router.get("/healthz", response_model=s.StatusOut, name="ops.health", responses={})
def health() -> dict[str, str]:
    """200 while the process serves requests."""
    return {"status": "ok"}


@router.get("/readyz", response_model=s.StatusOut, name="ops.ready",
            responses={503: {"model": s.StatusOut, "description": "Not ready"}})
def ready(svc: Svc) -> Response:
    """200 when the store and the session store (Redis) answer, a SQLite store's disk
    has at least 100 MB free and (with an in-process worker) the worker runs; 503 while
    shutting down."""
    checks: dict[str, str] = {}
    try:
        svc.memory.store.get_meta("embedder")
        checks["store"] = "ok"
    except MemstrataError as exc:
        checks["store"] = f"failing: {exc}"
    try:
        svc.memory.session_manager.sessions.ping()
        checks["sessions"] = "ok"
    except MemstrataError as exc:
        checks["sessions"] = f"failing: {exc}"
    free = free_disk_mb(svc.memory.store.url)
    if free is not None:
        checks["disk"] = "ok" if free >= MIN_FREE_DISK_MB else \
            f"failing: {free:.0f} MB free beside the store, under {MIN_FREE_DISK_MB} MB"
    if svc.memory.settings.worker == "thread":
        checks["worker"] = "ok" if svc.memory.worker.running or not svc.draining else "stopped"
    if svc.draining:
        checks["shutdown"] = "draining"
    ok = all(v == "ok" for v in checks.values())
    return JSONResponse({"status": "ok" if ok else "unavailable", "checks": checks},
                        status_code=200 if ok else 503)


@router.get("/metrics", name="ops.metrics", response_class=Response,
            responses={200: {"content": {CONTENT_TYPE_LATEST: {}}, "description": "Prometheus text"}})
def metrics(svc: Svc) -> Response:
    """Request latency histograms, requests in flight, job queue depth, LLM calls and
    tokens, proxied calls."""
    return Response(generate_latest(svc.metrics.registry), media_type=CONTENT_TYPE_LATEST)
