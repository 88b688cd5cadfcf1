"""The hostile inputs of the service's review, against `foley serve` in its own process: each is
refused or voiced in bounded memory (peak RSS of the server process, reset before each case),
and the server goes on serving the next client at once.

The numbers in each case are the review's: a first frame at 1e300 s, frames 900 s apart, a 1 MB
8000x8000 JPEG on a 96x96 session, and a 7 KB video with two frames ten minutes apart.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import httpx2 as httpx
import numpy as np
import pytest
from websockets.sync.client import ClientConnection, connect

from service.preview import protocol as p
from tests.media import videos

pytestmark = pytest.mark.slow

# Growth of the server's peak RSS a case may cause, over what it held before the case. The
# review's cases took it up by 0.4 to 3 GB; a bounded chunk of audio or one frame is megabytes.
KEPT_BYTES = 64 * 2**20  # what a render may leave in the server's memory
MIX_KEPT_BYTES = 200 * 2**20  # and a mix of attacks and honest clients
PEAK_GROWTH_BYTES = 150 * 2**20
BLACK = b"\x00" * 96 * 96 * 3


@dataclass
class Server:
    process: subprocess.Popen
    url: str

    def status(self, field: str) -> int:
        """A /proc/<pid>/status memory field in bytes (VmRSS now, VmHWM the peak)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
        raise AssertionError(f"no {field}")

    def reset_peak(self) -> int:
        """Reset the peak RSS to the RSS now (Linux: clear_refs 5); returns it."""
        Path(f"/proc/{self.process.pid}/clear_refs").write_text("5")
        return self.status("VmRSS")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    work = tmp_path_factory.mktemp("work")
    env = {**os.environ, "FOLEY_WORK_DIR": str(work), "FOLEY_CACHE_MAX_BYTES": "0"}
    process = subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "-q", "--port", str(port)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    server = Server(process, f"127.0.0.1:{port}")
    deadline = time.monotonic() + 120
    while True:
        assert process.poll() is None, process.stderr.read().decode()
        try:
            if httpx.get(f"http://{server.url}/readyz").status_code == 200:
                break
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, "the server never got ready"
        time.sleep(0.2)
    try:
        _stream(server, [(k / 30, BLACK) for k in range(30)])  # warm: one whole session
        yield server
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextmanager
def _session(server: Server, **config) -> Iterator[ClientConnection]:
    with connect(f"ws://{server.url}/v1/preview", max_size=None, open_timeout=10) as ws:
        ws.send(json.dumps({"type": "config", "width": 96, "height": 96, "fps": 30} | config))
        ready = json.loads(ws.recv(timeout=10))
        assert ready["type"] == "ready"
        ws.owed_from = first_owed(ready)  # type: ignore[attr-defined]
        yield ws


def _stream(server: Server, frames: list[tuple[float, bytes]], **config) -> int:
    """A well-behaved session, paced as a live client is (each frame once the audio it completes
    is back): -> samples of audio it got back."""
    samples = 0

    def read() -> str | None:  # -> the event's type, None for audio
        nonlocal samples
        message = ws.recv(timeout=30)
        if isinstance(message, bytes):
            samples += len(p.parse_audio(message).samples)
            return None
        event = json.loads(message)
        assert event["type"] != "error", event
        return event["type"]

    with _session(server, **config) as ws:
        for i, (t, payload) in enumerate(frames):
            ws.send(p.pack_frame(i, t, payload))
            while i >= ws.owed_from and read() is not None:  # type: ignore[attr-defined]
                pass
        ws.send(json.dumps({"type": "end"}))
        while read() != "end":
            pass
    return samples


def first_owed(ready: dict) -> int:
    """The first frame after which a session owes audio: a frame-rate tier's model frame k once
    frame k + lookahead is in; a tier at the frames' own times, the audio up to frame k's time
    (nothing up to the first frame's)."""
    ahead = ready["lookahead_frames"]
    return ahead if ready["samples_per_frame"] is not None else ahead + 1


def _refused(ws: ClientConnection) -> dict:
    """Read past audio to the error the session ends with."""
    while isinstance(message := ws.recv(timeout=30), bytes):
        pass
    error = json.loads(message)
    assert error["type"] == "error", error
    return error


def _black_jpeg(width: int, height: int) -> bytes:
    ctx = av.CodecContext.create("mjpeg", "w")
    ctx.width, ctx.height, ctx.pix_fmt, ctx.time_base = width, height, "yuvj420p", Fraction(1, 30)
    frame = av.VideoFrame(width, height, "yuvj420p")
    for plane, value in zip(frame.planes, (0, 128, 128), strict=True):
        np.frombuffer(plane, np.uint8)[:] = value
    return b"".join(bytes(packet) for packet in [*ctx.encode(frame), *ctx.encode(None)])


@pytest.mark.parametrize(
    ("times", "code"),
    [([1e300], "bad_timestamp"), ([0.0, 900.0, 900.033], "frame_gap")],
    ids=["1e300", "900s-gap"],
)
def test_timestamps_cannot_stall_the_worker_or_grow_memory(
    server: Server, times: list[float], code: str
) -> None:
    before = server.reset_peak()
    with _session(server) as ws:
        for i, t in enumerate(times):
            ws.send(p.pack_frame(i, t, BLACK))
        assert _refused(ws)["code"] == code
    started = time.monotonic()
    assert _stream(server, [(k / 30, BLACK) for k in range(10)]) > 0
    assert time.monotonic() - started < 10  # the next session is served at once
    assert server.status("VmHWM") - before < PEAK_GROWTH_BYTES


def test_a_huge_jpeg_is_refused_without_being_decoded(server: Server) -> None:
    huge = _black_jpeg(8000, 8000)
    assert len(huge) < 2 * 2**20
    before = server.reset_peak()
    with _session(server, pixel_format="jpeg") as ws:
        ws.send(p.pack_frame(0, 0.0, huge))
        error = _refused(ws)
    assert error["code"] == "bad_frame" and "8000x8000" in error["reason"]
    assert server.status("VmHWM") - before < PEAK_GROWTH_BYTES // 4  # not one 192 MB RGB frame


def test_ten_minutes_between_two_frames_is_silence_in_bounded_memory(
    server: Server, tmp_path: Path
) -> None:
    clip = videos.encode_clip(tmp_path / "gap.mkv", times_s=[0.0, 600.0], frames=2).path
    assert clip.stat().st_size < 16 * 2**10
    before = server.reset_peak()
    with (
        httpx.stream(
            "POST",
            f"http://{server.url}/v1/foley",
            files={"file": ("gap.mkv", clip.read_bytes(), "video/x-matroska")},
            params={"format": "wav", "loudness": "off"},
            timeout=120,
        ) as answer,
        (tmp_path / "foley.wav").open("wb") as out,
    ):
        assert answer.status_code == 200
        for chunk in answer.iter_bytes():
            out.write(chunk)
    with av.open(str(tmp_path / "foley.wav")) as wav:
        stream = wav.streams.audio[0]
        assert stream.duration * stream.time_base == pytest.approx(600.0, abs=0.1)
    assert server.status("VmHWM") - before < PEAK_GROWTH_BYTES
    assert server.status("VmRSS") - before < KEPT_BYTES  # and given back after


def test_memory_comes_back_after_a_mix_of_attacks_and_honest_clients(
    server: Server, tmp_path: Path
) -> None:
    """Sessions whose frames come 4.99 s apart (refused over budget), honest sessions beside
    them, and renders of a file whose two frames span ten minutes, all at once, twice: the
    server's memory ends within a few tens of MB of where it started."""
    clip = videos.encode_clip(tmp_path / "gap.mkv", times_s=[0.0, 600.0], frames=2).path
    before = server.status("VmRSS")

    def greedy() -> None:
        with _session(server) as ws:
            for i in range(30):
                ws.send(p.pack_frame(i, i * 4.99, BLACK))
            assert _refused(ws)["code"] == "over_budget"

    def honest() -> None:
        assert _stream(server, [(k / 30, BLACK) for k in range(60)]) > 0

    def render() -> None:
        answer = httpx.post(
            f"http://{server.url}/v1/foley",
            files={"file": ("gap.mkv", clip.read_bytes(), "video/x-matroska")},
            timeout=120,
        )
        assert answer.status_code in (200, 503)  # admitted, or refused by its declared length

    for _ in range(2):
        with ThreadPoolExecutor(6) as pool:
            done = [pool.submit(f) for f in (greedy, greedy, honest, honest, render, render)]
            for future in done:
                future.result()
    assert server.status("VmRSS") - before < MIX_KEPT_BYTES
