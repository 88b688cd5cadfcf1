"""What the routes share: the engine (once loaded), the render limiter and the cache.

Threading: the event loop only moves bytes. The engine is loaded, warmed up and run in worker
threads, and live preview sessions in the preview worker's one thread (service.preview).
`engine.render` may be called from several threads at once (its contract), and
`ServiceState.limiter` bounds how many renders run together. The only shared mutable state is
`engine`/`load_error`, each written once by the loader task, `preview`, started once on the
event loop, and the engines of the other tiers (`engines`, thread-safe); per-request values
(paths, options) travel as arguments. `cache` is set at startup and is itself thread-safe
(service.cache.base).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import anyio
from fastapi import Request

from service.api.errors import EngineUnavailable, UploadsBusy
from service.api.metrics import Metrics
from service.cache import Cache, NoCache
from service.config import Settings
from service.errors import Busy, NotReady
from service.jobs.manager import JobManager
from service.pipeline.loading import Engine, EngineLoader, Engines, load_engine
from service.preview.worker import PreviewWorker


@dataclass
class Allowance:
    """A bounded total of work in progress (uploads, seconds of video to render), taken without
    waiting, on the event loop only. The first taker always gets in: one render longer than the
    whole allowance still runs, alone."""

    size: float
    what: str
    refusal: type[Busy] = Busy
    used: float = 0.0

    @contextmanager
    def take(self, amount: float = 1.0) -> Iterator[None]:
        if self.used > 0 and self.used + amount > self.size:
            raise self.refusal(f"{self.size:g} {self.what} are already in progress; retry later")
        self.used += amount
        try:
            yield
        finally:
            self.used -= amount


@dataclass
class ServiceState:
    settings: Settings
    limiter: anyio.CapacityLimiter
    cache: Cache = field(default_factory=NoCache)  # rendered results (service.api.results)
    engine: Engine | None = None  # set once, after load and warmup
    load_error: str | None = None  # set once if loading failed: never ready
    preview: PreviewWorker | None = None  # started with the first live session
    preview_tenants: dict[str, int] = field(default_factory=dict)  # live sessions per tenant
    jobs: JobManager | None = None  # export jobs: set once at startup
    uploads: Allowance = field(init=False)  # being received
    # Seconds of video in the renders running or waiting: a render's cost is its length.
    rendering: Allowance = field(init=False)
    loader: EngineLoader = load_engine
    metrics: Metrics = field(default_factory=Metrics)
    # Every tier's engine, the default's included; their pipeline caches use `cache`.
    engines: Engines = field(init=False)

    def __post_init__(self) -> None:
        settings = self.settings
        self.uploads = Allowance(settings.max_concurrent_uploads, "uploads", UploadsBusy)
        self.rendering = Allowance(settings.max_rendering_video_s, "s of video to render")
        self.engines = Engines(settings, loader=self.loader, cache=self.cache)

    def engine_for(self, tier: str | None) -> Engine:
        """The engine that renders `tier` (None: the default one), another tier's loaded and
        warmed on first use. Blocks while it loads: call from a worker thread."""
        self.ready_engine()
        return self.engines(tier)

    def preview_worker(self) -> PreviewWorker:
        """The live preview worker, started on first use (on the event loop: no race)."""
        engine = self.ready_engine()
        if self.preview is None:
            settings = self.settings
            self.preview = PreviewWorker(
                engine.tier,
                engine.backend,
                max_sessions=settings.preview_max_sessions,
                queue_frames=settings.preview_queue_frames,
                batch_window_s=settings.preview_batch_window_ms / 1000,
                static_threshold=settings.static_threshold,
            )
        return self.preview

    def check_alive(self) -> None:
        if self.load_error is not None:
            raise EngineUnavailable(f"the model failed to load: {self.load_error}")

    def ready_engine(self) -> Engine:
        self.check_alive()
        if self.engine is None:
            raise NotReady("the model is still loading")
        return self.engine

    def check_capacity(self) -> None:
        queued = self.settings.max_queued_renders
        if self.limiter.statistics().tasks_waiting >= queued:
            raise Busy(f"{queued} renders are already waiting; retry later")


def get_state(request: Request) -> ServiceState:
    state: ServiceState = request.app.state.foley  # set by service.api.app
    return state
