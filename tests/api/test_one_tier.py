"""Every way in renders with the one engine the registry loaded for the default tier: a render
over HTTP, an export job on the in-process queue and a live preview session; the tier is
loaded once."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from fastapi.testclient import TestClient

from service.api import create_app
from service.config import Settings
from service.preview import protocol as p
from tests.api.conftest import wait_ready
from tests.jobs.conftest import finished, wait_for

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.mp4"


def test_http_the_export_queue_and_the_preview_share_one_loaded_tier(real_engine, tmp_path):
    loads: list[str] = []

    def loader(settings: Settings, tier: str, cache: object):
        loads.append(tier)
        return real_engine

    settings = Settings(cache_max_bytes=0, work_dir=tmp_path / "work")
    with TestClient(create_app(settings, engine_loader=loader)) as client:
        wait_ready(client, timeout=60)
        name = real_engine.tier.name
        rendered = client.post("/v1/foley", files={"file": ("a.mp4", SAMPLE.read_bytes())})
        assert rendered.status_code == 200 and rendered.headers["x-foley-tier"] == name
        job = client.post("/v1/exports", files={"file": ("a.mp4", SAMPLE.read_bytes())}).json()
        assert wait_for(client, job["id"], finished)["state"] == "succeeded"
        assert client.get(f"/v1/exports/{job['id']}/result").headers["x-foley-tier"] == name
        with client.websocket_connect("/v1/preview") as ws:
            tier = real_engine.tier
            config = {"type": "config", "width": tier.width, "height": tier.height, "fps": 30}
            ws.send_text(json.dumps(config))
            assert json.loads(ws.receive_text())["tier"] == name
            black = np.zeros((tier.height, tier.width, 3), np.uint8).tobytes()
            for i in range(3):
                ws.send_bytes(p.pack_frame(i, i / 30, black))
            ws.send_text(json.dumps({"type": "end"}))
            while True:
                message = ws.receive()
                if "text" in message and json.loads(message["text"])["type"] == "end":
                    break
    assert loads == [settings.default_tier] == [name]
