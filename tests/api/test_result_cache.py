"""The result cache of `POST /v1/foley`: a repeated upload is answered without a render, and a
cache that is down or hangs costs the requests nothing but the reuse."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2
import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.cache import Cache, CircuitBreaker, MemoryCache, RedisCache
from service.config import Settings
from service.pipeline.types import ProgressFn, RenderOptions, RenderResult
from tests.api.conftest import (
    RENDERED,
    SERVER_TIMING,
    RecordingEngine,
    upload,
    wait_no_files,
    wait_ready,
    wait_until,
)
from tests.cache.servers import FakeClock, dead_url, silent_server
from tests.conftest import uvicorn_server
from tests.redis_server import RedisServer

# What a hit answers exactly as the miss did (not Server-Timing, X-Foley-Cache, file headers).
SAME_HEADERS = (
    "content-type", "content-length", "content-disposition",
    "x-foley-tier", "x-foley-model-version", "x-foley-duration", "x-foley-gain-db",
    "x-foley-warning",
)  # fmt: skip
CLIP = b"\x00\x00\x00\x18ftypmp42 one clip"
OTHER_CLIP = b"\x00\x00\x00\x18ftypmp42 another clip"
FAILURES, RESET_S = 3, 10.0


@pytest.fixture
def cache() -> MemoryCache:
    return MemoryCache(1024**2)


@contextmanager
def serving(settings: Settings, engine: RecordingEngine, cache: Cache) -> Iterator[TestClient]:
    app = create_app(settings, engine_loader=lambda *_: engine, cache=cache)
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_ready(client)
        yield client


@pytest.fixture
def client(settings: Settings, engine: RecordingEngine, cache: MemoryCache) -> Iterator[TestClient]:
    with serving(settings, engine, cache) as client:
        yield client


def post(client: TestClient, clip: bytes = CLIP, **kwargs) -> httpx2.Response:
    response = client.post("/v1/foley", files=upload(clip), **kwargs)
    assert response.status_code == 200, response.text
    return response


def redis_cache(url: str, clock: FakeClock) -> RedisCache:
    breaker = CircuitBreaker(FAILURES, RESET_S, clock=clock)
    return RedisCache(url, timeout_s=0.05, breaker=breaker, max_item_bytes=1024**2, ttl_s=60.0)


def test_a_repeated_upload_is_answered_from_the_cache_without_a_render(
    client: TestClient, engine: RecordingEngine, work_dir: Path
) -> None:
    engine.warnings = ("2 of 90 video packets could not be decoded and were skipped",)
    miss = post(client)
    hit = post(client)
    assert (miss.headers["x-foley-cache"], hit.headers["x-foley-cache"]) == ("miss", "hit")
    assert hit.content == miss.content == RENDERED
    assert len(engine.calls) == 1
    assert {h: hit.headers[h] for h in SAME_HEADERS} == {h: miss.headers[h] for h in SAME_HEADERS}
    timing = hit.headers["server-timing"]
    assert SERVER_TIMING.match(timing), timing
    assert [metric.split(";")[0] for metric in timing.split(", ")] == ["upload", "cache", "total"]
    wait_no_files(work_dir)


def test_contact_markers_are_answered_from_the_cache_too(
    client: TestClient, engine: RecordingEngine
) -> None:
    miss = post(client, params={"format": "events"})
    hit = post(client, params={"format": "events"})
    assert (miss.headers["x-foley-cache"], hit.headers["x-foley-cache"]) == ("miss", "hit")
    assert hit.content == miss.content and hit.json()["contacts"]
    assert hit.headers["content-type"] == "application/json"
    assert len(engine.calls) == 1


def test_the_file_name_of_a_hit_is_the_new_uploads(client: TestClient) -> None:
    post(client)
    hit = client.post("/v1/foley", files=upload(CLIP, name="other name.mov"))
    assert hit.headers["x-foley-cache"] == "hit"
    assert hit.headers["content-disposition"] == 'attachment; filename="other_name.foley.wav"'


@pytest.mark.parametrize(
    ("data", "params"),
    [
        (CLIP, {"sample_rate": "16000"}),
        (CLIP, {"format": "flac"}),
        (CLIP, {"format": "mp4"}),
        (CLIP, {"format": "events"}),
        (CLIP, {"loudness": "off"}),
        (OTHER_CLIP, {}),
    ],
    ids=["sample_rate", "format", "video_format", "events", "loudness", "other_bytes"],
)
def test_another_file_or_parameter_is_a_miss(
    client: TestClient, engine: RecordingEngine, data: bytes, params: dict
) -> None:
    post(client)
    response = post(client, data, params=params)
    assert response.headers["x-foley-cache"] == "miss"
    assert len(engine.calls) == 2
    assert post(client, data, params=params).headers["x-foley-cache"] == "hit"


def test_the_same_parameters_as_form_fields_are_a_hit(
    client: TestClient, engine: RecordingEngine
) -> None:
    post(client, params={"format": "flac", "sample_rate": "16000"})
    hit = post(client, data={"format": "flac", "sample_rate": "16000"})
    assert hit.headers["x-foley-cache"] == "hit"
    assert hit.headers["content-type"] == "audio/flac"
    assert len(engine.calls) == 1


def test_results_are_not_shared_across_model_versions(
    settings: Settings, cache: MemoryCache
) -> None:
    old, new = RecordingEngine(), RecordingEngine()
    new.tier.version = "0.0.2-test"
    with serving(settings, old, cache) as client:
        post(client)
    with serving(settings, new, cache) as client:
        response = post(client)
        assert response.headers["x-foley-cache"] == "miss"
        assert response.headers["x-foley-model-version"] == "0.0.2-test"
        assert post(client).headers["x-foley-cache"] == "hit"
    with serving(settings, old, cache) as client:
        assert post(client).headers["x-foley-model-version"] == "0.0.1-test"
    assert (len(old.calls), len(new.calls)) == (1, 1)


def test_a_failed_render_is_not_cached(client: TestClient, engine: RecordingEngine) -> None:
    engine.fail_next = RuntimeError("the render failed")
    assert client.post("/v1/foley", files=upload(CLIP)).status_code == 500
    assert post(client).headers["x-foley-cache"] == "miss"
    assert post(client).headers["x-foley-cache"] == "hit"


def test_a_result_over_the_item_limit_is_not_cached(
    settings: Settings, engine: RecordingEngine, cache: MemoryCache
) -> None:
    small = settings.model_copy(update={"cache_max_item_bytes": len(RENDERED)})
    with serving(small, engine, cache) as client:
        post(client)
        assert post(client).headers["x-foley-cache"] == "miss"
    assert len(cache) == 0 and len(engine.calls) == 2


@dataclass
class GatedEngine(RecordingEngine):
    """Renders wait for `render_gate`; `rendering` is set while one waits."""

    render_gate: threading.Event = field(default_factory=threading.Event)
    rendering: threading.Event = field(default_factory=threading.Event)

    def render(
        self,
        input_path: Path,
        output_path: Path,
        options: RenderOptions,
        progress: ProgressFn | None = None,
    ) -> RenderResult:
        self.rendering.set()
        assert self.render_gate.wait(timeout=10)
        return super().render(input_path, output_path, options, progress)


def test_a_hit_is_answered_while_a_render_holds_the_only_render_slot(
    settings: Settings, cache: MemoryCache
) -> None:
    engine = GatedEngine()
    engine.render_gate.set()
    app = create_app(settings, engine_loader=lambda *_: engine, cache=cache)
    with uvicorn_server(app) as port, httpx2.Client(base_url=f"http://127.0.0.1:{port}") as http:
        wait_until(lambda: http.get("/readyz").status_code == 200, 10, "ready")
        assert http.post("/v1/foley", files=upload(CLIP)).headers["x-foley-cache"] == "miss"
        wait_until(lambda: len(cache) == 1, what="the result stored after the response")

        engine.render_gate.clear()
        engine.rendering.clear()
        slow = threading.Thread(
            target=lambda: httpx2.post(
                f"http://127.0.0.1:{port}/v1/foley", files=upload(OTHER_CLIP), timeout=20
            )
        )
        slow.start()
        try:
            assert engine.rendering.wait(timeout=10)
            hit = http.post("/v1/foley", files=upload(CLIP), timeout=5)
            assert hit.headers["x-foley-cache"] == "hit"
            assert hit.content == RENDERED
        finally:
            engine.render_gate.set()
            slow.join(timeout=20)
    assert len(engine.calls) == 2


def test_with_redis_a_repeated_upload_is_a_hit(
    settings: Settings, engine: RecordingEngine, redis_server: RedisServer
) -> None:
    cache = redis_cache(redis_server.url, FakeClock())
    with serving(settings, engine, cache) as client:
        assert post(client).headers["x-foley-cache"] == "miss"
        hit = post(client)
        assert hit.headers["x-foley-cache"] == "hit"
        assert hit.content == RENDERED
    assert len(engine.calls) == 1
    assert len(redis_server.client().keys("foley:result:*")) == 1
    cache.close()


@contextmanager
def unreachable_redis(kind: str) -> Iterator[str]:
    if kind == "refused":
        yield dead_url()
    else:
        with silent_server() as url:
            yield url


@pytest.mark.parametrize("kind", ["refused", "hangs"])
def test_with_redis_down_or_hung_requests_are_served_and_readyz_says_degraded(
    kind: str, settings: Settings, engine: RecordingEngine
) -> None:
    with unreachable_redis(kind) as url:
        cache = redis_cache(url, FakeClock())
        with serving(settings, engine, cache) as client:
            for _ in range(FAILURES):
                response = post(client)
                assert response.headers["x-foley-cache"] == "miss"
                assert response.content == RENDERED
            ready = client.get("/readyz")
            assert ready.status_code == 200
            assert ready.json() == {
                "status": "degraded",
                "tier": "test-tier",
                "model_version": "0.0.1-test",
                "backend": {"name": "cpu", "device": "test", "precision": {}},
                "cache": "unavailable",
            }
            assert client.get("/healthz").status_code == 200
        cache.close()
    assert len(engine.calls) == FAILURES
    assert cache.errors == FAILURES


def test_when_redis_comes_back_the_circuit_closes_and_hits_resume(
    settings: Settings, engine: RecordingEngine, redis_server: RedisServer
) -> None:
    clock = FakeClock()
    cache = redis_cache(redis_server.url, clock)
    redis_server.stop()
    with serving(settings, engine, cache) as client:
        while cache.healthy:
            assert post(client).headers["x-foley-cache"] == "miss"
        assert client.get("/readyz").json()["status"] == "degraded"

        redis_server.start()
        assert post(client).headers["x-foley-cache"] == "miss"  # before the reset time
        clock.advance(RESET_S)
        assert post(client).headers["x-foley-cache"] == "miss"  # the trial closes it; stored
        assert client.get("/readyz").json() == {
            "status": "ready",
            "tier": "test-tier",
            "model_version": "0.0.1-test",
            "backend": {"name": "cpu", "device": "test", "precision": {}},
        }
        assert post(client).headers["x-foley-cache"] == "hit"
    cache.close()
