"""A real redis-server for tests: started on a free port in a temp dir, stopped after.

Skips when `redis-server` is not installed, unless FOLEY_REQUIRE_REDIS=1 (CI), where it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def require_redis_server() -> str:
    path = shutil.which("redis-server")
    if path is None:
        if os.environ.get("FOLEY_REQUIRE_REDIS") == "1":
            pytest.fail("redis-server is not installed (FOLEY_REQUIRE_REDIS=1)")
        pytest.skip("redis-server is not installed")
    return path


class RedisServer:
    """One redis-server process; `restart` keeps its port and its data directory (AOF)."""

    def __init__(self, workdir: Path, *, aof: bool = False, args: tuple[str, ...] = ()) -> None:
        self.binary = require_redis_server()
        self.workdir = workdir
        self.port = free_port()
        self.args = [
            "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(workdir),
            "--save", "", "--appendonly", "yes" if aof else "no", "--appendfsync", "always",
            *args,
        ]  # fmt: skip
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self, timeout_s: float = 10.0) -> RedisServer:
        self.process = subprocess.Popen(
            [self.binary, *self.args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        client = redis.Redis(port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                client.ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.02)

    def stop(self, *, crash: bool = False) -> None:
        """Shut down (SIGTERM), or with `crash` die at once (SIGKILL: no final save)."""
        if self.process is not None and self.process.poll() is None:
            if crash:
                self.process.kill()
            else:
                self.process.terminate()
            self.process.wait(timeout=10)
        self.process = None

    def restart(self, *, crash: bool = False) -> None:
        self.stop(crash=crash)
        self.start()

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)
