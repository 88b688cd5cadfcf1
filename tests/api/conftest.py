"""Transport fixtures: a recording test double of the engine, an app around it, a live server."""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from service.api import create_app
from service.config import Settings
from service.media.loudness import Levelling, Loudness
from service.media.source import VideoInfo
from service.pipeline.backends.base import BackendInfo
from service.pipeline.types import ContactMarker, ProgressFn, RenderOptions, RenderResult
from tests.conftest import uvicorn_server, wait_until

UPLOAD_LIMIT = 256 * 1024
RENDERED = b"rendered by RecordingEngine"
SERVER_TIMING = re.compile(r"^[\w.-]+;dur=\d+\.\d(, [\w.-]+;dur=\d+\.\d)*$")


def on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@dataclass
class RenderCall:
    input_bytes: bytes
    output_path: Path
    options: RenderOptions
    thread: threading.Thread
    on_event_loop: bool


GAIN_DB = 12.5  # the loudness gain RecordingEngine reports
MARKERS = (ContactMarker(0.5, "impact", 0.2, "wood"), ContactMarker(1.5))  # and the contacts


@dataclass
class RecordingEngine:
    """Test double of `FoleyEngine`: writes a fixed output and records every call.

    `warm_gate` holds `warmup()` until set; `fail_next` is raised by the next `render()`.
    A render reports progress after each of `windows` windows of `window_s` (counted in
    `windows_run`), as the engine does after each window it renders.
    """

    tier: SimpleNamespace = field(
        default_factory=lambda: SimpleNamespace(
            name="test-tier", version="0.0.1-test", digest="0" * 16
        )
    )
    backend: SimpleNamespace = field(
        default_factory=lambda: SimpleNamespace(info=lambda: BackendInfo("cpu", "test", {}))
    )
    timings: dict[str, float] = field(
        default_factory=lambda: {"decode": 0.0123, "encoder": 0.0456, "vocoder": 0.1, "total": 0.2}
    )
    warm_gate: threading.Event = field(default_factory=threading.Event)
    warming: threading.Event = field(default_factory=threading.Event)
    warmed: threading.Event = field(default_factory=threading.Event)
    warmup_on_event_loop: bool | None = None
    fail_next: BaseException | None = None
    warnings: tuple[str, ...] = ()  # what the next renders report worked around
    windows: int = 0
    window_s: float = 0.0
    windows_run: int = 0
    duration_s: float = 2.5  # what `probe` says every file declares
    calls: list[RenderCall] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.warm_gate.set()

    def warmup(self) -> None:
        self.warmup_on_event_loop = on_event_loop()
        self.warming.set()
        assert self.warm_gate.wait(timeout=10)
        self.warmed.set()

    def probe(self, input_path: Path) -> VideoInfo:
        return VideoInfo("mov", "h264", 64, 48, 25.0, 0.0, self.duration_s, False)

    def render(
        self,
        input_path: Path,
        output_path: Path,
        options: RenderOptions,
        progress: ProgressFn | None = None,
    ) -> RenderResult:
        self.calls.append(
            RenderCall(
                input_path.read_bytes(),
                output_path,
                options,
                threading.current_thread(),
                on_event_loop(),
            )
        )
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        for k in range(self.windows):
            time.sleep(self.window_s)
            self.windows_run += 1
            if progress is not None:
                progress((k + 1) / self.windows)
        output_path.write_bytes(RENDERED)
        return RenderResult(
            output=output_path,
            options=replace(options, tier=self.tier.name),
            start_s=0.0,
            duration_s=2.5,
            frames=75,
            model_version=self.tier.version,
            timings=dict(self.timings),
            markers=MARKERS,
            video_fps=25.0,
            warnings=self.warnings,
            levelling=None
            if options.loudness is None
            else Levelling(options.loudness, GAIN_DB, 0.0, Loudness(options.loudness, -3.0)),
        )


def wait_ready(client: TestClient, timeout: float = 10.0) -> None:
    wait_until(lambda: client.get("/readyz").status_code == 200, timeout, "never ready")


def files_under(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


def wait_no_files(root: Path, timeout: float = 5.0) -> None:
    """Work files go in a background task after the response: give it a moment."""
    wait_until(lambda: not files_under(root), timeout, f"left behind: {files_under(root)}")


def upload(data: bytes = b"\x00\x00\x00\x18ftypmp42 fake video", name: str = "clip.mp4"):
    return {"file": (name, data, "video/mp4")}


@pytest.fixture
def work_dir(tmp_path: Path) -> Path:
    return tmp_path / "work"


@pytest.fixture
def settings(work_dir: Path, tmp_path: Path) -> Settings:
    # No result cache: these tests count the engine's renders. test_result_cache.py opts in.
    return Settings(
        work_dir=work_dir,
        max_upload_bytes=UPLOAD_LIMIT,
        models_dir=tmp_path / "no-models",
        cache_max_bytes=0,
    )


@pytest.fixture
def engine() -> RecordingEngine:
    return RecordingEngine()


@pytest.fixture
def app(settings: Settings, engine: RecordingEngine) -> FastAPI:
    return create_app(settings, engine_loader=lambda *_: engine)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    # raise_server_exceptions=False: see the 500 response, as a real client would.
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_ready(client)
        yield client


@pytest.fixture
def live_server(app: FastAPI) -> Iterator[Callable[[], socket.socket]]:
    """The app under a real uvicorn on an ephemeral port; yields a socket connector."""
    with uvicorn_server(app) as port:
        yield lambda: socket.create_connection(("127.0.0.1", port), timeout=5)


@pytest.fixture(scope="module")
def real_client(real_engine, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    settings = Settings(work_dir=tmp_path_factory.mktemp("work"))
    app = create_app(settings, engine_loader=lambda *_: real_engine)
    with TestClient(app, raise_server_exceptions=False) as client:
        wait_ready(client, timeout=60)
        yield client
