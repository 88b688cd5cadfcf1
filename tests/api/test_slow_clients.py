"""An upload that stalls, or trickles in, is answered 408 and dropped, against a real uvicorn:
a slow client holds neither a connection nor a work folder for long."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from service.api import create_app
from service.api.server import uvicorn_config
from service.config import Settings
from tests.api.conftest import RecordingEngine, wait_until
from tests.conftest import uvicorn_server

BOUNDARY = "b0undary"
HEAD = (
    "POST /v1/foley HTTP/1.1\r\nHost: test\r\n"
    f"Content-Type: multipart/form-data; boundary={BOUNDARY}\r\n"
    "Content-Length: 100000\r\n\r\n"
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.mp4"\r\n\r\n'
)


def answer_to(port: int, trickle_s: float | None) -> str:
    """Send the head and a little of the file, then stall (None) or a byte every `trickle_s`."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(HEAD.encode() + b"\x00" * 64)
        conn.settimeout(0.05 if trickle_s else 10)
        deadline = time.monotonic() + 10
        answer = b""
        while time.monotonic() < deadline:
            try:
                data = conn.recv(4096)
            except TimeoutError:
                if not answer:
                    conn.sendall(b"\x00")
                    time.sleep(trickle_s or 0)
                continue
            if not data:  # the server closed the connection: the answer is whole
                return answer.decode("latin-1")
            answer += data
    raise AssertionError(f"no whole answer: {answer[:200]!r}")


@pytest.mark.parametrize("trickle_s", [None, 0.05], ids=["stalled", "trickling"])
def test_a_slow_upload_is_answered_408_and_dropped(
    settings: Settings, work_dir: Path, trickle_s: float | None
) -> None:
    settings = settings.model_copy(
        update={"upload_idle_timeout_s": 0.5, "upload_min_bytes_per_s": 1000}
    )
    engine = RecordingEngine()
    with uvicorn_server(create_app(settings, engine_loader=lambda *_: engine)) as port:
        started = time.monotonic()
        answer = answer_to(port, trickle_s)
        assert time.monotonic() - started < 5
        wait_until(lambda: not any(work_dir.iterdir()), what="the work folder emptied")
    assert answer.startswith("HTTP/1.1 408"), answer[:200]
    assert "upload_timeout" in answer
    assert engine.calls == []


def test_a_request_head_sent_a_byte_at_a_time_is_cut_off(settings: Settings) -> None:
    settings = settings.model_copy(update={"request_head_timeout_s": 0.5, "port": 0})
    app = create_app(settings, engine_loader=lambda *_: RecordingEngine())
    with uvicorn_server(app, config=uvicorn_config(app, settings)) as port:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:
            started, closed = time.monotonic(), False
            for byte in b"GET /healthz HTTP/1.1\r\nHost: test.example.com\r\nAccept: */*":
                try:
                    conn.sendall(bytes([byte]))
                except (BrokenPipeError, ConnectionResetError):
                    closed = True  # the server hung up mid-head
                    break
                time.sleep(0.05)
            if not closed:
                conn.settimeout(3)
                closed = conn.recv(1024) == b""
            assert closed, "the server kept a head sent a byte at a time"
            assert time.monotonic() - started < 3
        with socket.create_connection(("127.0.0.1", port), timeout=5) as conn:  # a whole head
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n")
            assert conn.recv(1024).startswith(b"HTTP/1.1 200")
