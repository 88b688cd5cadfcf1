"""The HTTP app factory: engine lifecycle, routes and error handlers (threading: see state.py)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from service.api.errors import install_error_handlers
from service.api.preview import STATIC
from service.api.preview import router as preview_router
from service.api.routes import router
from service.api.state import Engine, EngineLoader, ServiceState
from service.config import Settings, get_settings

logger = logging.getLogger(__name__)


def load_engine(settings: Settings) -> Engine:
    # Imported here so that importing the API (tests, OpenAPI export) does not load ONNX Runtime.
    from service.pipeline.engine import FoleyEngine

    return FoleyEngine.load(settings)


def create_app(
    settings: Settings | None = None, *, engine_loader: EngineLoader = load_engine
) -> FastAPI:
    settings = settings or get_settings()
    app = FastAPI(
        title="foley",
        summary="Video in, Foley audio out.",
        version="0.1.0",
        lifespan=_lifespan(settings, engine_loader),
    )
    install_error_handlers(app)
    app.include_router(router)
    app.include_router(preview_router)
    app.mount("/static/preview", StaticFiles(directory=STATIC), name="preview-static")
    return app


def _lifespan(settings: Settings, engine_loader: EngineLoader):
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if settings.work_dir is not None:
            settings.work_dir.mkdir(parents=True, exist_ok=True)
        state = ServiceState(settings, anyio.CapacityLimiter(settings.max_concurrent_renders))
        app.state.foley = state
        # Serve (healthz) while the model loads; readyz turns 200 once `state.engine` is set.
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_load, state, engine_loader)
            yield
            tasks.cancel_scope.cancel()
        if state.preview is not None:
            state.preview.stop()

    return lifespan


async def _load(state: ServiceState, engine_loader: EngineLoader) -> None:
    def load_and_warm() -> Engine:
        engine = engine_loader(state.settings)
        engine.warmup()
        return engine

    try:
        # abandon_on_cancel: a shutdown during loading need not wait for the load to finish.
        engine = await anyio.to_thread.run_sync(load_and_warm, abandon_on_cancel=True)
    except Exception as exc:
        # Not swallowed: /healthz and /readyz answer 503 engine_unavailable with this reason.
        logger.exception("the engine failed to load")
        state.load_error = f"{type(exc).__name__}: {exc}"
        return
    state.engine = engine
    logger.info("ready: tier %s, model version %s", engine.tier.name, engine.tier.version)
