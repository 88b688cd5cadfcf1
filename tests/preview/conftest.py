"""A live service for the client and browser tests."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
import uvicorn

from service.api import create_app
from service.config import Settings


def _ready(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status == 200
    except urllib.error.HTTPError:
        return False


@pytest.fixture(scope="module")
def live_service(real_engine) -> Iterator[str]:
    """The app with the shipped model under a real uvicorn on an ephemeral port (API key
    "k1"); yields its http:// base URL once the model is ready."""
    app = create_app(Settings(api_keys=["k1"]), engine_loader=lambda _: real_engine)
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    while not _ready(f"http://127.0.0.1:{port}/readyz"):
        assert time.monotonic() < deadline, "the model did not load"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
