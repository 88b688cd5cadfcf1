"""Upload handling: the byte cap, malformed bodies, and what reaches the engine."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import anyio
import httpx2
from fastapi.testclient import TestClient

from service.api import create_app
from service.api.uploads import FLUSH_BYTES
from service.config import Settings
from tests.api.conftest import (
    UPLOAD_LIMIT,
    RecordingEngine,
    files_under,
    upload,
    wait_no_files,
    wait_ready,
    wait_until,
)
from tests.conftest import uvicorn_server

BOUNDARY = "foley-test-boundary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"


def multipart_head(name: str = "file", filename: str = "clip.mp4") -> bytes:
    return (
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
        "Content-Type: video/mp4\r\n\r\n"
    ).encode()


def multipart_tail() -> bytes:
    return f"\r\n--{BOUNDARY}--\r\n".encode()


def raw_exchange(connect: Callable[[], socket.socket], request: bytes) -> tuple[int, dict, bytes]:
    """Send raw bytes, read until the server closes; -> (status, headers, body)."""
    with connect() as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in header_lines)
    return int(status_line.split()[1]), headers, body


def test_declared_content_length_over_the_limit_is_refused_before_the_body(
    live_server: Callable[[], socket.socket], work_dir: Path
) -> None:
    ready = b"GET /readyz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    wait_until(lambda: raw_exchange(live_server, ready)[0] == 200, 10, "ready")
    # Headers only: the answer must come without the server waiting for a single body byte.
    request = (
        f"POST /v1/foley HTTP/1.1\r\nHost: test\r\nContent-Type: {MULTIPART}\r\n"
        f"Content-Length: {10**12}\r\n\r\n"
    ).encode()
    status, headers, body = raw_exchange(live_server, request)
    assert status == 413
    assert headers["connection"] == "close"
    assert json.loads(body)["error"]["code"] == "upload_too_large"
    assert files_under(work_dir) == []


def test_declared_content_length_over_the_limit_testclient(
    client: TestClient, engine: RecordingEngine, work_dir: Path
) -> None:
    response = client.post(
        "/v1/foley",
        content=multipart_head() + b"x" * 100 + multipart_tail(),
        headers={"Content-Type": MULTIPART, "Content-Length": str(UPLOAD_LIMIT + 1)},
    )
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "upload_too_large"
    assert engine.calls == []
    assert files_under(work_dir) == []


def test_chunked_body_over_the_limit_stops_at_the_limit(
    settings: Settings, engine: RecordingEngine, work_dir: Path
) -> None:
    """No Content-Length: the running count must stop the upload, and the disk never holds
    more than the limit (checked between chunks, while the server is writing)."""
    limit = 3 * FLUSH_BYTES  # above the write batch, so data does reach the disk meanwhile
    app = create_app(
        settings.model_copy(update={"max_upload_bytes": limit}), engine_loader=lambda *_: engine
    )
    chunk, chunks = 64 * 1024, 4 * limit // (64 * 1024)
    largest_seen = chunks_sent = 0

    async def body() -> AsyncIterator[bytes]:
        nonlocal largest_seen, chunks_sent
        yield multipart_head()
        for _ in range(chunks):
            largest_seen = max([largest_seen, *(p.stat().st_size for p in files_under(work_dir))])
            chunks_sent += 1
            yield b"v" * chunk
        yield multipart_tail()

    async def scenario() -> httpx2.Response:
        async with app.router.lifespan_context(app):
            state = app.state.foley
            with anyio.fail_after(10):
                while state.engine is None:
                    await anyio.sleep(0.01)
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(transport=transport, base_url="http://test") as client:
                return await client.post(
                    "/v1/foley", content=body(), headers={"Content-Type": MULTIPART}
                )

    response = anyio.run(scenario)
    assert "content-length" not in response.request.headers
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "upload_too_large"
    assert FLUSH_BYTES <= largest_seen <= limit
    assert chunks_sent <= limit // chunk + 1  # the server stopped reading at the limit
    assert engine.calls == []
    assert files_under(work_dir) == []


def test_upload_under_the_limit_reaches_the_engine_intact(
    client: TestClient, engine: RecordingEngine, work_dir: Path
) -> None:
    data = bytes(range(256)) * ((UPLOAD_LIMIT - 1024) // 256)
    response = client.post("/v1/foley", files=upload(data))
    assert response.status_code == 200, response.text
    assert engine.calls[0].input_bytes == data
    wait_no_files(work_dir)


def test_file_larger_than_a_write_batch_is_reassembled(
    settings: Settings, engine: RecordingEngine
) -> None:
    roomy = settings.model_copy(update={"max_upload_bytes": 4 * FLUSH_BYTES})
    data = b"".join(i.to_bytes(4, "little") for i in range(3 * FLUSH_BYTES // 4 + 17))
    with TestClient(create_app(roomy, engine_loader=lambda *_: engine)) as client:
        wait_ready(client)
        response = client.post("/v1/foley", files=upload(data))
    assert response.status_code == 200, response.text
    assert engine.calls[0].input_bytes == data


def test_not_multipart_is_415(client: TestClient) -> None:
    response = client.post("/v1/foley", content=b"raw video", headers={"Content-Type": "video/mp4"})
    assert response.status_code == 415
    assert response.json()["error"]["code"] == "unsupported_content_type"


def test_empty_body_is_refused(client: TestClient, engine: RecordingEngine) -> None:
    assert client.post("/v1/foley").status_code == 415
    response = client.post("/v1/foley", content=b"", headers={"Content-Type": MULTIPART})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_multipart"
    assert engine.calls == []


def test_empty_file_is_422(client: TestClient) -> None:
    response = client.post("/v1/foley", files=upload(b""))
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "empty_file"


def test_missing_file_part_is_422(client: TestClient) -> None:
    response = client.post("/v1/foley", data={"format": "wav"}, files={"other": ("x", b"x")})
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "invalid_parameter"
    response = client.post(
        "/v1/foley",
        content=f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="format"\r\n\r\nwav'.encode()
        + multipart_tail(),
        headers={"Content-Type": MULTIPART},
    )
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "missing_file"


def test_truncated_multipart_is_400_and_leaves_nothing(client: TestClient, work_dir: Path) -> None:
    response = client.post(
        "/v1/foley",
        content=multipart_head() + b"half a video",
        headers={"Content-Type": MULTIPART},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_multipart"
    assert files_under(work_dir) == []


def test_unknown_form_field_is_422(client: TestClient) -> None:
    response = client.post("/v1/foley", data={"samplerate": "16000"}, files=upload())
    assert response.status_code == 422
    assert "samplerate" in response.json()["error"]["reason"]


def test_a_boundary_over_the_rfc_limit_is_400_with_the_request_id(client: TestClient) -> None:
    boundary = "b" * 300
    body = f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.mp4"\r\n\r\nx'
    response = client.post(
        "/v1/foley",
        content=body.encode() + f"\r\n--{boundary}--\r\n".encode(),
        headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_multipart"
    assert "70" in response.json()["error"]["reason"]
    assert response.headers["x-request-id"]


def test_an_unknown_tier_is_echoed_bounded(client: TestClient) -> None:
    # A long identifier of non-ASCII letters: once a 500 (the file system refused the name).
    response = client.post("/v1/foley", params={"tier": "é" * 2000}, files=upload())
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "unknown_tier" and len(error["reason"]) < 400


def test_a_render_stops_when_its_client_goes_away(
    live_server: Callable[[], socket.socket], engine: RecordingEngine, caplog
) -> None:
    ready = b"GET /readyz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
    wait_until(lambda: raw_exchange(live_server, ready)[0] == 200, 10, "ready")
    engine.windows, engine.window_s = 200, 0.02  # a 4 s render
    body = multipart_head() + b"video bytes" + multipart_tail()
    request = (
        f"POST /v1/foley HTTP/1.1\r\nHost: test\r\nContent-Type: {MULTIPART}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body
    with caplog.at_level("INFO", logger="service.api.errors"), live_server() as sock:
        sock.sendall(request)
        wait_until(lambda: engine.windows_run >= 5, 10, "the render started")
        sock.close()
        wait_until(lambda: "499" in caplog.text, 10, "the abandoned request logged")
    stopped = engine.windows_run
    time.sleep(0.2)
    assert engine.windows_run == stopped < engine.windows  # stopped within one window
    assert "client_disconnected" in caplog.text or "went away" in caplog.text


def test_uploads_past_the_slots_are_refused_before_their_body(
    settings: Settings, engine: RecordingEngine, work_dir: Path
) -> None:
    app = create_app(
        settings.model_copy(update={"max_concurrent_uploads": 2}), engine_loader=lambda *_: engine
    )
    head = multipart_head()
    request = (
        f"POST /v1/foley HTTP/1.1\r\nHost: test\r\nContent-Type: {MULTIPART}\r\n"
        f"Content-Length: {len(head) + 1000 + len(multipart_tail())}\r\n\r\n"
    ).encode() + head

    def connect(port: int) -> socket.socket:
        return socket.create_connection(("127.0.0.1", port), timeout=5)

    with uvicorn_server(app) as port:
        ready = b"GET /readyz HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"
        wait_until(lambda: raw_exchange(lambda: connect(port), ready)[0] == 200, 10, "ready")
        holding = [connect(port) for _ in range(2)]
        for sock in holding:  # two uploads under way, their bodies not finished
            sock.sendall(request)
        wait_until(lambda: len(files_under(work_dir)) == 2, 10, "two uploads begun")
        started = time.monotonic()
        status, headers, body = raw_exchange(lambda: connect(port), request)
        assert status == 503 and json.loads(body)["error"]["code"] == "busy"
        assert headers["retry-after"] and time.monotonic() - started < 2  # at once
        assert len(files_under(work_dir)) == 2  # nothing of the refused one was kept
        for sock in holding:
            sock.sendall(b"x" * 1000 + multipart_tail())
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
            sock.close()
        body = multipart_head() + b"video" + multipart_tail()
        again = (
            f"POST /v1/foley HTTP/1.1\r\nHost: test\r\nContent-Type: {MULTIPART}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body
        assert raw_exchange(lambda: connect(port), again)[0] == 200  # the slots came back
