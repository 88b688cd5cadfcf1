"""`GET /metrics`: Prometheus' text format, counting what the service did, labelled by route
template and code, never by raw path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from service.api import create_app
from service.api.metrics import Metrics
from service.cache import CircuitBreaker, RedisCache
from service.cache.memory import MemoryCache
from service.config import Settings
from service.pipeline.types import RenderOptions, RenderResult, ReuseStats
from tests.api.conftest import RecordingEngine, upload, wait_ready
from tests.cache.servers import FakeClock, dead_url


def samples(client: TestClient) -> dict[tuple[str, frozenset], float]:
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def value(found: dict, name: str, **labels: str) -> float:
    return found.get((name, frozenset(labels.items())), 0.0)


@pytest.fixture
def client(settings: Settings, engine: RecordingEngine) -> Iterator[TestClient]:
    app = create_app(settings, engine_loader=lambda *_: engine, cache=MemoryCache(1024**2))
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_ready(client)
        yield client


def test_requests_renders_errors_and_the_cache_are_counted(client: TestClient) -> None:
    assert client.post("/v1/foley", files=upload()).status_code == 200
    assert client.post("/v1/foley", files=upload()).headers["x-foley-cache"] == "hit"
    assert client.post("/v1/foley", params={"format": "mp3"}, files=upload()).status_code == 422
    assert client.get("/v1/exports/no-such-job").status_code == 404
    found = samples(client)
    route = {"route": "/v1/foley", "method": "POST"}
    assert value(found, "foley_http_requests_total", status="200", **route) == 2
    assert value(found, "foley_http_requests_total", status="422", **route) == 1
    # The template, not the path a client sent.
    jobs = {"route": "/v1/exports/{job_id}", "method": "GET", "status": "404"}
    assert value(found, "foley_http_requests_total", **jobs) == 1
    assert value(found, "foley_http_request_duration_seconds_count", **route) == 3
    assert value(found, "foley_errors_total", code="invalid_parameter") == 1
    assert value(found, "foley_cache_lookups_total", cache="result", result="miss") == 1
    assert value(found, "foley_cache_lookups_total", cache="result", result="hit") == 1
    stage = {"tier": "test-tier", "stage": "encoder"}
    assert value(found, "foley_render_stage_duration_seconds_count", **stage) == 1
    assert value(found, "foley_render_stage_duration_seconds_sum", **stage) == 0.0456
    assert value(found, "foley_render_real_time_factor_count", tier="test-tier") == 1


def breaker_states(client: TestClient) -> dict[str, float]:
    found = samples(client)
    return {
        name: value(found, "foley_cache_breaker_state", state=name)
        for name in ("closed", "open", "half-open")
    }


def test_an_in_process_cache_reads_as_a_closed_breaker(client: TestClient) -> None:
    assert breaker_states(client) == {"closed": 1, "open": 0, "half-open": 0}
    found = samples(client)
    assert value(found, "foley_preview_frames_waiting") == 0
    assert value(found, "foley_export_jobs_active") == 0


def test_the_service_gauges_read_its_state_at_each_scrape(
    settings: Settings, engine: RecordingEngine
) -> None:
    # A Redis store nobody listens on: each call fails, so its breaker moves between scrapes.
    clock = FakeClock()
    cache = RedisCache(
        dead_url(), timeout_s=0.05, breaker=CircuitBreaker(2, 10.0, clock=clock),
        max_item_bytes=1000,
    )  # fmt: skip
    app = create_app(settings, engine_loader=lambda *_: engine, cache=cache)
    try:
        with TestClient(app, raise_server_exceptions=False) as client:
            wait_ready(client)
            assert breaker_states(client) == {"closed": 1, "open": 0, "half-open": 0}
            assert cache.get("k") is None
            # One failure of the two that open it: still closed.
            assert breaker_states(client) == {"closed": 1, "open": 0, "half-open": 0}
            assert cache.get("k") is None
            assert breaker_states(client) == {"closed": 0, "open": 1, "half-open": 0}
            clock.advance(10.0)
            assert cache.breaker.allow()  # the trial call, not back yet
            assert breaker_states(client) == {"closed": 0, "open": 0, "half-open": 1}
            cache.breaker.record_success()
            assert breaker_states(client) == {"closed": 1, "open": 0, "half-open": 0}
    finally:
        cache.close()


def test_the_pipeline_caches_are_counted_from_what_a_render_reused() -> None:
    metrics = Metrics()
    reuse = ReuseStats(frames=100, frames_static=10, frames_known=30, windows=8,
                       windows_exact=2, windows_template=1)  # fmt: skip
    metrics.rendered(
        RenderResult(Path("x.wav"), RenderOptions(tier="t"), 0.0, 4.0, 100, "1", {}, reuse=reuse)
    )
    found = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(metrics.exposition().body.decode())
        for s in family.samples
    }
    assert value(found, "foley_cache_lookups_total", cache="features", result="hit") == 30
    assert value(found, "foley_cache_lookups_total", cache="features", result="miss") == 60
    assert value(found, "foley_cache_lookups_total", cache="windows", result="hit") == 3
    assert value(found, "foley_cache_lookups_total", cache="windows", result="miss") == 5
