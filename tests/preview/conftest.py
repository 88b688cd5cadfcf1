"""A live service for the client and browser tests."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

from service.api import create_app
from service.config import Settings
from tests.conftest import uvicorn_server


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
    app = create_app(Settings(api_keys=["k1"]), engine_loader=lambda *_: real_engine)
    with uvicorn_server(app) as port:
        deadline = time.monotonic() + 30
        while not _ready(f"http://127.0.0.1:{port}/readyz"):
            assert time.monotonic() < deadline, "the model did not load"
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
