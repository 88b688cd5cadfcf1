"""Probes and app lifecycle: serve at once, ready only after load + warmup, loud load failure."""

from __future__ import annotations

import threading

from fastapi.testclient import TestClient

from service.api import create_app
from service.config import Settings
from tests.api.conftest import RecordingEngine, upload, wait_ready, wait_until


def test_readyz_is_503_until_the_engine_is_loaded_and_warm(settings: Settings) -> None:
    engine = RecordingEngine()
    engine.warm_gate.clear()
    loaded = threading.Event()
    release_load = threading.Event()

    def slow_loader(_: Settings) -> RecordingEngine:
        loaded.set()
        assert release_load.wait(timeout=10)
        return engine

    with TestClient(create_app(settings, engine_loader=slow_loader)) as client:
        assert loaded.wait(timeout=10)
        assert client.get("/healthz").status_code == 200
        loading = client.get("/readyz")
        assert loading.status_code == 503
        assert loading.json()["error"]["code"] == "not_ready"
        assert client.post("/v1/foley", files=upload()).json()["error"]["code"] == "not_ready"

        release_load.set()
        assert engine.warming.wait(timeout=10)  # loaded, warmup blocked on the gate
        assert client.get("/readyz").status_code == 503

        engine.warm_gate.set()
        wait_ready(client)
        ready = client.get("/readyz")
        assert ready.json() == {
            "status": "ready",
            "tier": "test-tier",
            "model_version": "0.0.1-test",
        }
        assert engine.warmed.is_set()
        assert engine.warmup_on_event_loop is False
        assert engine.calls == []


def test_engine_load_failure_is_reported_not_swallowed(settings: Settings) -> None:
    def failing_loader(_: Settings) -> RecordingEngine:
        raise FileNotFoundError("tier 'preview': no config.json")

    with TestClient(create_app(settings, engine_loader=failing_loader)) as client:
        wait_until(lambda: client.get("/healthz").status_code != 200, what="load failure")
        health = client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["error"]["code"] == "engine_unavailable"
        assert "no config.json" in health.json()["error"]["reason"]
        assert client.get("/readyz").json()["error"]["code"] == "engine_unavailable"


def test_docs_and_openapi_describe_the_upload(client: TestClient) -> None:
    assert client.get("/docs").status_code == 200
    operation = client.get("/openapi.json").json()["paths"]["/v1/foley"]["post"]
    body = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert body["required"] == ["file"]
    assert set(body["properties"]) == {"file", "format", "sample_rate", "loudness", "replace_audio"}
    assert {p["name"] for p in operation["parameters"]} == {
        "format",
        "sample_rate",
        "loudness",
        "replace_audio",
    }


def test_unknown_route_answers_in_the_error_shape(client: TestClient) -> None:
    response = client.get("/nope")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "reason": "Not Found"}}
