"""Prometheus metrics of one service process, at `GET /metrics` (prometheus_client's text format;
each app has its own registry, so two apps in one process, as in the tests, count apart).

    foley_http_requests_total{route, method, status}        requests answered
    foley_http_request_duration_seconds{route, method}      until the response starts
    foley_errors_total{code}                                 error answers, by their code
                                                             (decode failures among them)
    foley_render_stage_duration_seconds{tier, stage}         each stage of each offline render
    foley_render_real_time_factor{tier}                      render seconds per video second
    foley_cache_lookups_total{cache, result}                 hit / miss: `result` (whole
                                                             renders), `features` (encoder
                                                             frames), `windows` (window memo)
    foley_cache_breaker_state{state}                         1 for the cache store's breaker
                                                             state (closed, open, half-open)
    foley_preview_sessions_open                              live sessions open now
    foley_preview_sessions_total{outcome}                    opened, or refused with the code
    foley_preview_frames_waiting                             frames received, not yet run
    foley_preview_chunks_total, foley_preview_chunks_late_total   audio chunks sent; over LATE_S
    foley_export_jobs_active                                 export jobs queued or running
    foley_export_*                                           the jobs this process ran and
                                                             ended: service.jobs.metrics

`route` is the route's template (`/v1/exports/{job_id}`), never the raw path: label values stay
few whatever clients send.
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from fastapi import FastAPI, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from service.pipeline.types import RenderResult

if TYPE_CHECKING:
    from service.api.state import ServiceState
    from service.jobs.metrics import JobMetrics

LATE_S = 0.1  # a live chunk sent this long after the frame that completed it is late
_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
_RTF = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2)


class Metrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter(
            "foley_http_requests", "HTTP requests answered", ["route", "method", "status"],
            registry=r,
        )  # fmt: skip
        self.request_seconds = Histogram(
            "foley_http_request_duration_seconds", "Time until the response starts",
            ["route", "method"], buckets=_SECONDS, registry=r,
        )  # fmt: skip
        self.errors = Counter("foley_errors", "Error answers by code", ["code"], registry=r)
        self.stage_seconds = Histogram(
            "foley_render_stage_duration_seconds", "Each stage of an offline render",
            ["tier", "stage"], buckets=_SECONDS, registry=r,
        )  # fmt: skip
        self.real_time_factor = Histogram(
            "foley_render_real_time_factor", "Render seconds per second of video", ["tier"],
            buckets=_RTF, registry=r,
        )  # fmt: skip
        self.cache_lookups = Counter(
            "foley_cache_lookups", "Cache look-ups by cache and result", ["cache", "result"],
            registry=r,
        )  # fmt: skip
        self.preview_open = Gauge("foley_preview_sessions_open", "Live sessions open", registry=r)
        self.preview_sessions = Counter(
            "foley_preview_sessions", "Live sessions opened, or refused by code", ["outcome"],
            registry=r,
        )  # fmt: skip
        self.preview_chunks = Counter("foley_preview_chunks", "Live audio chunks sent", registry=r)
        self.breaker = Gauge(
            "foley_cache_breaker_state", "The cache store's circuit breaker (1: its state now)",
            ["state"], registry=r,
        )  # fmt: skip
        self.frames_waiting = Gauge(
            "foley_preview_frames_waiting", "Live frames received, not yet run", registry=r
        )
        self.jobs_active = Gauge(
            "foley_export_jobs_active", "Export jobs queued or running", registry=r
        )
        self._jobs: JobMetrics | None = None
        self.preview_late = Counter(
            "foley_preview_chunks_late", f"Live chunks sent over {LATE_S:g} s after their frame",
            registry=r,
        )  # fmt: skip

    def watch(self, state: ServiceState) -> None:
        """Read the running service's gauges from `state` at each scrape, and collect the export
        jobs its manager ends."""
        for name in ("closed", "open", "half-open"):
            self.breaker.labels(name).set_function(_breaker_in(state, name))
        self.frames_waiting.set_function(
            lambda: state.preview.frames_waiting() if state.preview else 0
        )
        self.jobs_active.set_function(lambda: _active_jobs(state))
        if state.jobs is not None and state.jobs.metrics is not self._jobs:
            if self._jobs is not None:  # a restarted app: its former manager's go
                for collector in self._jobs.collectors():
                    self.registry.unregister(collector)
            self._jobs = state.jobs.metrics
            for collector in self._jobs.collectors():
                self.registry.register(collector)

    def rendered(self, result: RenderResult) -> None:
        reuse = result.reuse
        model_frames = reuse.frames - reuse.frames_static
        if model_frames:
            self.cache_lookups.labels("features", "hit").inc(reuse.frames_known)
            self.cache_lookups.labels("features", "miss").inc(model_frames - reuse.frames_known)
        if reuse.windows:
            self.cache_lookups.labels("windows", "hit").inc(
                reuse.windows - reuse.windows_recomputed
            )
            self.cache_lookups.labels("windows", "miss").inc(reuse.windows_recomputed)
        for stage, seconds in result.timings.items():
            if stage != "total":
                self.stage_seconds.labels(result.tier, stage).observe(seconds)
        if "total" in result.timings and result.duration_s > 0:
            rtf = result.timings["total"] / result.duration_s
            self.real_time_factor.labels(result.tier).observe(rtf)

    def exposition(self) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


def _breaker_state(state: ServiceState) -> str:
    breaker = getattr(state.cache, "breaker", None)  # only a store across the network has one
    return breaker.state if breaker is not None else "closed"


def _breaker_in(state: ServiceState, name: str) -> Callable[[], bool]:
    return lambda: _breaker_state(state) == name


def _active_jobs(state: ServiceState) -> float:
    if state.jobs is None:
        return 0
    try:
        return state.jobs.store.active_count()
    except Exception:  # the broker is down: no number, rather than a wrong one
        return math.nan


def install(app: FastAPI, metrics: Metrics) -> None:
    """Count and time every HTTP request, labelled by its route's template."""

    @app.middleware("http")
    async def measure(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        template = getattr(route, "path", None) or "unmatched"
        metrics.request_seconds.labels(template, request.method).observe(
            time.perf_counter() - started
        )
        metrics.requests.labels(template, request.method, str(response.status_code)).inc()
        return response
