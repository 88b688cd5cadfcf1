"""Processes the benchmarks start: `foley serve` and redis-server, on free ports."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

import redis


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def redis_server(*args: str) -> Iterator[str]:
    """redis-server with `args` (its policy: eviction, persistence); yields its URL."""
    port = free_port()
    workdir = tempfile.mkdtemp(prefix="bench-redis-")
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", workdir, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = redis.Redis(port=port, socket_connect_timeout=0.2)
    deadline = time.monotonic() + 10
    try:
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("redis-server did not start") from None
                time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        client.close()
        server.terminate()
        server.wait(timeout=10)
        shutil.rmtree(workdir, ignore_errors=True)


@contextmanager
def foley_serve(env: dict[str, str] | None = None) -> Iterator[int]:
    """`foley serve` in its own process with `env` added, once it is ready; yields its port."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve"],
        env=os.environ | (env or {}) | {"FOLEY_PORT": str(port)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                pass
            if time.monotonic() > deadline or server.poll() is not None:
                raise RuntimeError("the service did not become ready")
            time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)
