from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest
import uvicorn

from service.config import Settings

if TYPE_CHECKING:
    from engines.models.config import ModelConfig
    from service.pipeline.backends.base import Backend
    from service.pipeline.contract import TierConfig


def tiny_model() -> ModelConfig:
    """A model small enough to build, train a few steps and export in seconds: for contract
    tests."""
    from engines.models.config import ModelConfig

    return ModelConfig(
        name="tiny",
        feature_dim=16,
        encoder_channels=(8, 16, 16),
        generator_dim=32,
        generator_lookahead=2,  # not the default: streaming and serving read it from the config
        vocoder_dim=32,
        vocoder_hidden=64,
        vocoder_blocks=1,
    )


@pytest.fixture(scope="session")
def real_engine():
    """The shipped default tier, loaded once for every end-to-end test."""
    from service.pipeline.engine import FoleyEngine

    engine = FoleyEngine.load(Settings())
    engine.warmup()
    return engine


@pytest.fixture(scope="session")
def frames_engine():
    """The shipped `preview` tier (four stages at a model frame rate), loaded once: for what
    only a frame-rate tier has (samples per frame, the encoder's caches)."""
    from service.pipeline.engine import FoleyEngine

    engine = FoleyEngine.load(Settings(default_tier="preview"))
    engine.warmup()
    return engine


@pytest.fixture(scope="session")
def objects_engine():
    """The shipped `objects` tier (object-level contacts), loaded once."""
    from service.pipeline.engine import FoleyEngine

    engine = FoleyEngine.load(Settings(default_tier="objects"))
    engine.warmup()
    return engine


@pytest.fixture(scope="session")
def tiny_tier(tmp_path_factory: pytest.TempPathFactory) -> TierConfig:
    """A randomly initialised model, exported like the real one: for contract tests."""
    import torch

    from engines.export.onnx_export import export_tier
    from engines.models.checkpoint import save_checkpoint
    from service.pipeline.contract import load_frames_tier

    cfg = tiny_model()
    torch.manual_seed(0)
    encoder, generator, vocoder = cfg.build()
    with torch.no_grad():  # onset probabilities around the trigger: events fire here and there
        generator.onset.bias.zero_()
    root = tmp_path_factory.mktemp("models")
    checkpoint = save_checkpoint(root / "tiny.pt", cfg, encoder, generator, vocoder)
    export_tier(checkpoint, root / "tiny")
    return load_frames_tier(root, "tiny")


@pytest.fixture(scope="session")
def tiny_backend(tiny_tier: TierConfig) -> Backend:
    from service.pipeline.backends.base import create_backend

    return create_backend("cpu", tiny_tier, threads=1)


def wait_until(condition: Callable[[], bool], timeout: float = 5.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.01)


@contextmanager
def uvicorn_server(
    app, *, timeout_s: float = 10.0, config: uvicorn.Config | None = None
) -> Iterator[int]:
    """`app` under a real uvicorn on an ephemeral port, in a thread; yields the port.
    `config`: uvicorn's configuration instead of a plain one (with port 0)."""
    config = config or uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def redis_server(tmp_path_factory):
    """A fresh redis-server for one test (tests/redis_server.py)."""
    from tests.redis_server import RedisServer

    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    try:
        yield server
    finally:
        server.stop()
