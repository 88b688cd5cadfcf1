"""With API keys configured, `POST /v1/foley` needs one (the preview and exports do too: see
their tests); without keys the service is open."""

from __future__ import annotations

from fastapi.testclient import TestClient

from service.api import create_app
from tests.api.conftest import upload, wait_ready


def test_a_render_needs_a_valid_key_when_keys_are_set(settings, engine):
    app = create_app(
        settings.model_copy(update={"api_keys": ["k1"]}), engine_loader=lambda *_: engine
    )
    with TestClient(app) as client:
        wait_ready(client)
        for headers in ({}, {"X-API-Key": "k2"}):
            refused = client.post("/v1/foley", files=upload(), headers=headers)
            assert refused.status_code == 401
            assert refused.json()["error"]["code"] == "unauthorized"
        assert not engine.calls
        ok = client.post("/v1/foley", files=upload(), headers={"X-API-Key": "k1"})
        assert ok.status_code == 200
        assert len(engine.calls) == 1


def test_with_keys_the_api_is_closed_and_only_probes_docs_and_the_page_shell_are_open(
    settings, engine
):
    app = create_app(
        settings.model_copy(update={"api_keys": ["k1"]}), engine_loader=lambda *_: engine
    )
    with TestClient(app) as client:
        wait_ready(client)
        # Open: probes (an orchestrator has no key), the API's description, the page's files
        # (they hold no data; the page sends the key with everything it asks for).
        for path in ("/healthz", "/readyz", "/openapi.json", "/docs", "/redoc", "/preview",
                     "/static/preview/preview.js", "/static/docs/swagger-ui.css"):  # fmt: skip
            assert client.get(path).status_code == 200, path
        # Closed: everything that renders, lists or reads a job.
        for method, path in (("get", "/v1/tiers"), ("get", "/v1/exports/x"),
                             ("get", "/v1/exports/x/result"), ("get", "/v1/exports/x/events"),
                             ("delete", "/v1/exports/x"), ("post", "/v1/exports")):  # fmt: skip
            answer = getattr(client, method)(path)
            assert answer.status_code == 401, (method, path, answer.text)
