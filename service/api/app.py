"""The HTTP app factory: engine lifecycle, routes and error handlers (threading: see state.py)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from service.api.docs import DOCS_STATIC
from service.api.docs import router as docs_router
from service.api.errors import install_error_handlers
from service.api.exports import router as exports_router
from service.api.head import HeadAsGet
from service.api.logs import RequestIds
from service.api.metrics import Metrics
from service.api.metrics import install as install_metrics
from service.api.preview import STATIC
from service.api.preview import router as preview_router
from service.api.probes import router as probes_router
from service.api.routes import router
from service.api.state import ServiceState
from service.cache import Cache, create_cache
from service.config import Settings, get_settings
from service.jobs.manager import JobManager
from service.jobs.queues import create_job_manager
from service.pipeline.loading import EngineLoader, Engines, load_engine
from service.pipeline.tiers import installed_tiers

logger = logging.getLogger(__name__)
JOB_SWEEP_INTERVAL_S = 60.0
# (settings, the app's cache, the app's engines): in-process jobs render with the app's engines
JobManagerFactory = Callable[[Settings, Cache, Engines], JobManager]


def create_app(
    settings: Settings | None = None,
    *,
    engine_loader: EngineLoader | None = None,
    job_manager: JobManagerFactory = create_job_manager,
    cache: Cache | None = None,
) -> FastAPI:
    """The app. `engine_loader` loads a tier's engine (default: `load_engine`); every tier keeps
    its pipeline memo in the app's cache (one store, one budget). `cache` replaces the one the
    settings ask for; it is then the caller's to close."""
    settings = settings or get_settings()
    metrics = Metrics()
    app = FastAPI(
        title="foley",
        summary="Video in, Foley audio out.",
        version="0.1.0",
        lifespan=_lifespan(settings, engine_loader, job_manager, cache, metrics),
        docs_url=None,  # served below from the service's own assets, not a CDN
        redoc_url=None,
    )
    install_error_handlers(app)
    install_metrics(app, metrics)
    app.add_middleware(HeadAsGet)
    app.add_middleware(RequestIds)  # outermost: logs and metrics of the request carry its id
    app.include_router(probes_router)
    app.include_router(router)
    app.include_router(preview_router)
    app.include_router(exports_router)
    app.include_router(docs_router)
    app.mount("/static/preview", StaticFiles(directory=STATIC), name="preview-static")
    app.mount("/static/docs", StaticFiles(directory=DOCS_STATIC), name="docs-static")
    _name_the_tiers(app, installed_tiers(settings))
    return app


def _name_the_tiers(app: FastAPI, tiers: list[str]) -> None:
    """The schema's `tier` parameters and form fields list this deployment's tiers: a client
    (or a generated test) sees which names are taken, not any string."""
    if not tiers:
        return
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        schema = generate()  # FastAPI keeps it as app.openapi_schema
        for item in schema["paths"].values():
            for operation in item.values():
                for parameter in operation.get("parameters", []):
                    if parameter["name"] == "tier":
                        parameter["schema"] = {
                            "anyOf": [{"type": "string", "enum": tiers}, {"type": "null"}],
                            "title": "Tier",
                        }
                content = operation.get("requestBody", {}).get("content", {})
                for body in content.values():
                    field = body["schema"].get("properties", {}).get("tier")
                    if field is not None:
                        field["enum"] = tiers
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def _lifespan(
    settings: Settings,
    engine_loader: EngineLoader | None,
    job_manager: JobManagerFactory,
    cache: Cache | None,
    metrics: Metrics,
) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.work_dir is not None:
            settings.work_dir.mkdir(parents=True, exist_ok=True)
        state = ServiceState(
            settings,
            anyio.CapacityLimiter(settings.max_concurrent_renders),
            cache if cache is not None else create_cache(settings),
            loader=engine_loader or load_engine,
            metrics=metrics,
        )
        app.state.foley = state
        logger.info("cache: %s", state.cache.name)
        state.jobs = job_manager(settings, state.cache, state.engines)
        metrics.watch(state)
        # Serve (healthz) while the model loads; readyz turns 200 once `state.engine` is set.
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_load, state)
            tasks.start_soon(_sweep_jobs, state.jobs)
            yield
            tasks.cancel_scope.cancel()
        if state.preview is not None:
            state.preview.stop()
        if cache is None:
            state.cache.close()
        state.jobs.close()

    return lifespan


async def _sweep_jobs(jobs: JobManager) -> None:
    """Remove expired results and abandoned uploads now and then, and put the jobs of lost
    workers back in the queue."""
    while True:
        try:
            await anyio.to_thread.run_sync(jobs.sweep, abandon_on_cancel=True)
            await anyio.to_thread.run_sync(jobs.reap, abandon_on_cancel=True)
        except Exception:
            logger.exception("sweeping expired export jobs failed")
        await anyio.sleep(JOB_SWEEP_INTERVAL_S)


async def _load(state: ServiceState) -> None:
    try:
        # abandon_on_cancel: a shutdown during loading need not wait for the load to finish.
        engine = await anyio.to_thread.run_sync(state.engines, abandon_on_cancel=True)
    except Exception as exc:
        # Not swallowed: /healthz and /readyz answer 503 engine_unavailable with this reason.
        logger.exception("the engine failed to load")
        state.load_error = f"{type(exc).__name__}: {exc}"
        return
    state.engine = engine
    logger.info("ready: tier %s, model version %s", engine.tier.name, engine.tier.version)
