"""No API key in any log line of a real server: keys in headers, in the live preview's config,
and one a client wrongly put in a URL."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx2 as httpx
import pytest
from websockets.sync.client import connect

from service.api import create_app
from service.api.logs import REDACTED, RedactKeys
from service.api.server import uvicorn_config
from service.config import Settings
from tests.api.conftest import RecordingEngine, upload
from tests.conftest import uvicorn_server

KEY = "s3cret-key-1"


@contextmanager
def served(settings: Settings) -> Iterator[int]:
    """The app under a real uvicorn configured as `foley serve` configures it (its logging
    included), on an ephemeral port; yields the port."""
    app = create_app(settings, engine_loader=lambda *_: RecordingEngine())
    config = uvicorn_config(app, settings)
    config.log_level = logging.INFO
    with uvicorn_server(app, config=config) as port:
        yield port


def test_a_record_loses_its_key_wherever_it_is() -> None:
    record = logging.LogRecord(
        "uvicorn.access", logging.INFO, __file__, 1, '%s - "%s %s" %d',
        ("127.0.0.1", "GET", f"/healthz?x=1&api_key={KEY}&y=2", 200), None,
    )  # fmt: skip
    assert RedactKeys([KEY]).filter(record)
    assert KEY not in record.getMessage()
    assert f"api_key={REDACTED}&y=2" in record.getMessage()
    other = logging.LogRecord("x", logging.INFO, __file__, 1, "key %s", (KEY,), None)
    RedactKeys([KEY]).filter(other)
    assert other.getMessage() == f"key {REDACTED}"


def test_no_api_key_reaches_the_servers_logs(capfd: pytest.CaptureFixture[str]) -> None:
    settings = Settings(api_keys=[KEY], host="127.0.0.1", port=0)
    with served(settings) as port:
        base = f"http://127.0.0.1:{port}"
        with httpx.Client(base_url=base, timeout=10) as http:
            deadline = time.monotonic() + 10
            while http.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert http.post("/v1/foley", headers={"x-api-key": KEY}, files=upload()).is_success
            assert http.get(f"/healthz?api_key={KEY}").is_success  # a key where none belongs
            assert http.post("/v1/foley", files=upload()).status_code == 401
        # The recording engine has no live path: the session's outcome is not the point here.
        with connect(f"ws://127.0.0.1:{port}/v1/preview?api_key={KEY}") as ws:
            ws.send(json.dumps({"type": "config", "width": 96, "height": 96, "api_key": KEY}))
    out, err = capfd.readouterr()
    logs = out + err
    assert "/healthz?api_key=" in logs and "WebSocket /v1/preview" in logs  # the lines are there
    assert KEY not in logs


def test_each_request_has_an_id_its_answer_and_log_lines_carry(
    capfd: pytest.CaptureFixture[str],
) -> None:
    settings = Settings(host="127.0.0.1", port=0, log_format="json")
    with (
        served(settings) as port,
        httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
    ):
        made = http.get("/healthz").headers["x-request-id"]
        given = http.get("/healthz", headers={"X-Request-ID": "edit-42"})
        odd = http.get("/healthz", headers={"X-Request-ID": "no spaces allowed"})
    assert len(made) == 32 and given.headers["x-request-id"] == "edit-42"
    assert odd.headers["x-request-id"] not in ("no spaces allowed", made)
    out, err = capfd.readouterr()
    lines = [json.loads(line) for line in (out + err).splitlines() if line.startswith("{")]
    access = [line for line in lines if "/healthz" in line["message"]]
    assert [line["request_id"] for line in access] == [made, "edit-42", odd.headers["x-request-id"]]
    assert all({"time", "level", "name", "message"} <= set(line) for line in lines)
