"""Probes and app lifecycle: serve at once, ready only after load + warmup, loud load failure."""

from __future__ import annotations

import re
import threading

from fastapi.testclient import TestClient

from service.api import create_app
from service.config import SHIPPED_MODELS_DIR, Settings
from tests.api.conftest import RecordingEngine, upload, wait_ready, wait_until


def test_readyz_is_503_until_the_engine_is_loaded_and_warm(settings: Settings) -> None:
    engine = RecordingEngine()
    engine.warm_gate.clear()
    loaded = threading.Event()
    release_load = threading.Event()

    def slow_loader(*_: object) -> RecordingEngine:
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
            "backend": {"name": "cpu", "device": "test", "precision": {}},
        }
        assert engine.warmed.is_set()
        assert engine.warmup_on_event_loop is False
        assert engine.calls == []


def test_engine_load_failure_is_reported_not_swallowed(settings: Settings) -> None:
    def failing_loader(*_: object) -> RecordingEngine:
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
    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/v1/foley"]["post"]
    body = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert body["required"] == ["file"]
    options = {"format", "sample_rate", "loudness", "replace_audio", "tier"}
    assert set(body["properties"]) == {"file", *options} and not body["additionalProperties"]
    assert {p["name"] for p in operation["parameters"]} == options


def test_the_api_key_is_an_openapi_security_scheme(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert spec["components"]["securitySchemes"]["ApiKey"] == {
        "type": "apiKey", "in": "header", "name": "X-API-Key",
        "description": "Required when the service has keys (FOLEY_API_KEYS).",
    }  # fmt: skip
    secured = [
        (path, method)
        for path, methods in spec["paths"].items()
        for method, operation in methods.items()
        if {"ApiKey": []} in operation.get("security", [])
    ]
    assert ("/v1/foley", "post") in secured and ("/v1/tiers", "get") in secured
    assert {(p, m) for p, m in secured if p.startswith("/v1/exports")} == {
        ("/v1/exports", "post"), ("/v1/exports/{job_id}", "get"),
        ("/v1/exports/{job_id}", "delete"), ("/v1/exports/{job_id}/cancel", "post"),
        ("/v1/exports/{job_id}/result", "get"), ("/v1/exports/{job_id}/events", "get"),
    }  # fmt: skip


def test_the_docs_pages_load_nothing_from_elsewhere(client: TestClient) -> None:
    for page in ("/docs", "/redoc"):
        html = client.get(page).text
        assert "http://" not in html and "https://" not in html, page
        for asset in re.findall(r'(?:src|href)="(/static/docs/[^"]+)"', html):
            assert client.get(asset).status_code == 200, asset


def test_tiers_are_listed_and_taken_by_name(settings: Settings, engine: RecordingEngine) -> None:
    shipped = settings.model_copy(update={"models_dir": SHIPPED_MODELS_DIR})
    loads: list[str] = []

    def loader(s: Settings, tier: str, cache: object) -> RecordingEngine:
        loads.append(tier)
        return engine

    with TestClient(create_app(shipped, engine_loader=loader)) as client:
        wait_ready(client)
        tiers = {t["name"]: t for t in client.get("/v1/tiers").json()}
        assert {"motion", "preview", "export", "objects"} <= set(tiers)
        kinds = {name: t["kind"] for name, t in tiers.items()}
        assert (kinds["motion"], kinds["objects"], kinds["preview"]) == (
            "motion",
            "contacts",
            "frames",
        )
        assert all(t["size_bytes"] > 10_000 for t in tiers.values())
        assert {n for n, t in tiers.items() if t["loaded"]} == {shipped.default_tier}
        response = client.post("/v1/foley", params={"tier": "objects"}, files=upload())
        assert response.status_code == 200, response.text
        assert loads == [shipped.default_tier, "objects"]  # loaded on first use
        assert client.post("/v1/foley", data={"tier": "objects"}, files=upload()).is_success
        assert loads == [shipped.default_tier, "objects"]  # and kept
        loaded = {t["name"] for t in client.get("/v1/tiers").json() if t["loaded"]}
        assert loaded == {shipped.default_tier, "objects"}
        refused = client.post("/v1/foley", params={"tier": "nope"}, files=upload())
        assert (refused.status_code, refused.json()["error"]["code"]) == (422, "unknown_tier")


def test_unknown_route_answers_in_the_error_shape(client: TestClient) -> None:
    response = client.get("/nope")
    assert response.status_code == 404
    assert response.json() == {"error": {"code": "not_found", "reason": "Not Found"}}


def test_the_export_upload_is_described_like_the_render_upload(client: TestClient) -> None:
    operation = client.get("/openapi.json").json()["paths"]["/v1/exports"]["post"]
    body = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
    assert body["required"] == ["file"] and {"file", "tier"} <= set(body["properties"])
    assert {"format", "tier", "loudness"} <= {p["name"] for p in operation["parameters"]}
    assert {"400", "401", "408", "413", "415", "422", "503"} <= set(operation["responses"])
    (key,) = [p for p in operation["parameters"] if p["name"] == "idempotency-key"]
    assert key["in"] == "header" and key["schema"]["anyOf"][0]["pattern"]


def test_the_schema_names_the_installed_tiers(settings: Settings, engine: RecordingEngine) -> None:
    shipped = settings.model_copy(update={"models_dir": SHIPPED_MODELS_DIR})
    spec = create_app(shipped, engine_loader=lambda *_: engine).openapi()
    for path, method in (("/v1/foley", "post"), ("/v1/exports", "post")):
        (tier,) = [p for p in spec["paths"][path][method]["parameters"] if p["name"] == "tier"]
        assert tier["schema"]["anyOf"][0]["enum"] == ["export", "motion", "objects", "preview"]


def test_get_routes_answer_head_without_a_body(client: TestClient) -> None:
    for path in ("/healthz", "/readyz", "/v1/tiers", "/metrics"):
        got, head = client.get(path), client.head(path)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b"" and head.headers["content-type"] == got.headers["content-type"]
    assert client.head("/v1/foley").status_code == 405  # a POST route stays POST only
