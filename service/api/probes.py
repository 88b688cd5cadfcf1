"""Probes: liveness, readiness and the process's metrics, open to every caller (no API key)."""

from __future__ import annotations

import dataclasses

import anyio
from fastapi import APIRouter
from fastapi.responses import Response

from service.api.deps import State
from service.api.schemas import BackendStatus, ErrorResponse, Health, Ready

router = APIRouter()


@router.get("/healthz", responses={503: {"model": ErrorResponse}})
async def healthz(state: State) -> Health:
    """Liveness: 200 while the process serves, 503 if the model failed to load."""
    state.check_alive()
    return Health()


@router.get("/readyz", responses={503: {"model": ErrorResponse}}, response_model_exclude_none=True)
async def readyz(state: State) -> Ready:
    """Readiness: 503 until the model is loaded and warmed up. Then 200, with status `degraded`
    while the cache (renders go on without it) or the export queue's store (exports are refused,
    renders go on) is not answering."""
    engine = state.ready_engine()
    down = {}
    if not state.cache.healthy:
        down["cache"] = "unavailable"
    if state.jobs is not None and not await anyio.to_thread.run_sync(state.jobs.healthy):
        down["jobs"] = "unavailable"
    backend = BackendStatus(**dataclasses.asdict(engine.backend.info()))
    ready = Ready(tier=engine.tier.name, model_version=engine.tier.version, backend=backend)
    return ready.model_copy(update={"status": "degraded", **down}) if down else ready


@router.get("/metrics", response_class=Response, responses={200: {"content": {"text/plain": {}}}})
async def metrics(state: State) -> Response:
    """Prometheus metrics of this process (service.api.metrics). Open like the probes. Collected
    in a worker thread: a gauge asks the export store (Redis), which must not hold the loop."""
    return await anyio.to_thread.run_sync(state.metrics.exposition)
