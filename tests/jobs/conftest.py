"""Real Celery workers on a real Redis: the fixtures of the reliability tests.

The API runs in the test process (it only records and sends jobs); workers are `foley worker`
processes (tests/jobs/worker_main.py) with their prefork children, as in production.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from fastapi.testclient import TestClient

from service.api import create_app
from service.config import Settings
from service.pipeline.backends.base import BackendInfo
from tests.media.videos import encode_clip
from tests.redis_server import RedisServer

WORKER_MAIN = Path(__file__).with_name("worker_main.py")
REPO = Path(__file__).resolve().parents[2]
TERMINAL = {"succeeded", "failed", "cancelled"}


class StubEngine:
    """The API process renders nothing in these tests: the workers do."""

    tier = SimpleNamespace(name="preview", version="stub", digest="0" * 16)
    backend = SimpleNamespace(info=lambda: BackendInfo("cpu", "stub", {}))

    def warmup(self) -> None:
        pass


@pytest.fixture
def broker(tmp_path_factory) -> Iterator[RedisServer]:
    """The broker Redis as production runs it: AOF on, nothing evicted."""
    server = RedisServer(
        tmp_path_factory.mktemp("broker"), aof=True, args=("--maxmemory-policy", "noeviction")
    ).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def storage(tmp_path) -> Path:
    path = tmp_path / "storage"
    path.mkdir()
    return path


@pytest.fixture
def job_settings(broker, storage) -> Settings:
    return Settings(
        broker_url=broker.url, storage_dir=storage, cache_max_bytes=0, export_max_attempts=3
    )


class Workers:
    """`foley worker` processes; each logs to its own file."""

    def __init__(self, settings: Settings, logdir: Path) -> None:
        self.settings, self.logdir = settings, logdir
        self.processes: list[subprocess.Popen] = []
        self.metrics_ports: list[int] = []  # each worker's, in start order

    def start(self, *, concurrency: int = 1, env: dict[str, str] | None = None) -> subprocess.Popen:
        log = self.logdir / f"worker-{len(self.processes)}.log"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.metrics_ports.append(probe.getsockname()[1])
        environ = {
            **os.environ,
            "FOLEY_BROKER_URL": self.settings.broker_url or "",
            "FOLEY_STORAGE_DIR": str(self.settings.storage_dir),
            "FOLEY_CACHE_MAX_BYTES": "0",
            "FOLEY_EXPORT_MAX_ATTEMPTS": str(self.settings.export_max_attempts),
            "PYTHONPATH": str(REPO),
            "FOLEY_WORKER_METRICS_PORT": str(self.metrics_ports[-1]),
            **(env or {}),
        }
        with log.open("wb") as out:
            process = subprocess.Popen(
                [sys.executable, str(WORKER_MAIN), f"--concurrency={concurrency}"],
                env=environ, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        self.processes.append(process)
        self._wait_ready(process, log, concurrency)
        return process

    def _wait_ready(self, process: subprocess.Popen, log: Path, children: int) -> None:
        deadline = time.monotonic() + 90
        while b" ready." not in log.read_bytes():
            assert process.poll() is None, f"the worker exited: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"the worker did not start: {log.read_text()}"
            time.sleep(0.1)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def logs(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.logdir.glob("worker-*.log")))


@pytest.fixture
def workers(job_settings, tmp_path) -> Iterator[Workers]:
    logdir = tmp_path / "logs"
    logdir.mkdir()
    group = Workers(job_settings, logdir)
    try:
        yield group
    finally:
        group.stop()


@pytest.fixture
def api(job_settings) -> Iterator[TestClient]:
    app = create_app(job_settings, engine_loader=lambda *_: StubEngine())
    with TestClient(app) as client:
        yield client


@pytest.fixture(scope="session")
def clip_factory(tmp_path_factory) -> Callable[..., Path]:
    """Real H.264 clips of the moving square, made once per (frames, variant)."""
    made: dict[tuple[int, int], Path] = {}

    def make(frames: int = 60, variant: int = 0) -> Path:
        if (frames, variant) not in made:
            path = tmp_path_factory.mktemp("clips") / f"clip_{frames}_{variant}.mp4"
            encode_clip(path, frames=frames, size=(64 + 16 * variant, 48))
            made[frames, variant] = path
        return made[frames, variant]

    return make


def submit(client: TestClient, clip: Path, **headers: str):
    with clip.open("rb") as f:
        return client.post(
            "/v1/exports", files={"file": (clip.name, f, "video/mp4")}, headers=headers
        )


def wait_for(
    client: TestClient, job_id: str, until: Callable[[dict], bool], timeout_s: float = 120
) -> dict:
    deadline = time.monotonic() + timeout_s
    while True:
        job = client.get(f"/v1/exports/{job_id}").json()
        if until(job):
            return job
        assert time.monotonic() < deadline, f"timed out waiting: {job}"
        time.sleep(0.05)


def finished(job: dict) -> bool:
    return job["state"] in TERMINAL
