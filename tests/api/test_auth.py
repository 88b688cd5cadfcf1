"""With API keys configured, `POST /v1/foley` needs one (the preview and exports do too: see
their tests); without keys the service is open."""

from __future__ import annotations

from fastapi.testclient import TestClient

from service.api import create_app
from tests.api.conftest import upload, wait_ready


def test_a_render_needs_a_valid_key_when_keys_are_set(settings, engine):
    app = create_app(
        settings.model_copy(update={"api_keys": ["k1"]}), engine_loader=lambda s: engine
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
