"""The live preview WebSocket: what a client sees, good input and bad."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import anyio
import av
import numpy as np
import pytest
from fastapi.testclient import TestClient
from starlette.websockets import WebSocketDisconnect

from service.api import create_app
from service.config import Settings
from service.markers import markers_document
from service.media.decode import DecodeLimits, open_video
from service.media.loudness import CEILING_DBTP, measure
from service.pipeline.runner import Onset
from service.pipeline.types import ContactMarker, RenderOptions
from service.preview import protocol as p
from service.preview.connection import (
    MAX_CLOSE_REASON_BYTES,
    Outbox,
    close_reason,
    onset_message,
)
from service.preview.worker import AudioOut
from tests.api.conftest import wait_ready
from tests.preview.jpegs import declaring, jpeg
from tests.preview.levels import at_live_level

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.mp4"


def _client(frames_engine, **settings) -> TestClient:
    app = create_app(Settings(**settings), engine_loader=lambda *_: frames_engine)
    return TestClient(app, raise_server_exceptions=False)


@pytest.fixture
def client(frames_engine) -> Iterator[TestClient]:
    with _client(frames_engine) as c:
        wait_ready(c, timeout=60)
        yield c


def _frames(path: Path, size: int = 96) -> list[tuple[float, np.ndarray]]:
    """The clip decoded at the model's size, as the offline path decodes it."""
    with open_video(
        path, width=size, height=size, limits=DecodeLimits.from_settings(Settings())
    ) as s:
        return [
            (float(t), rgb) for batch in s for t, rgb in zip(batch.pts_s, batch.rgb, strict=True)
        ]


def _config(**kw) -> str:
    return json.dumps({"type": "config", "width": 96, "height": 96} | kw)


def _error(ws) -> dict:
    message = json.loads(ws.receive_text())
    assert message["type"] == "error", message
    return message


def _close_code(ws) -> int:
    with pytest.raises(WebSocketDisconnect) as closed:
        ws.receive_text()
    return closed.value.code


class Received:
    """Everything a session sent, in order."""

    def __init__(self) -> None:
        self.audio: list[p.AudioMessage] = []
        self.events: list[dict] = []

    def take(self, ws) -> dict | p.AudioMessage:
        message = ws.receive()
        if message.get("bytes") is not None:
            self.audio.append(p.parse_audio(message["bytes"]))
            return self.audio[-1]
        assert message.get("text") is not None, f"closed early: {message}"
        self.events.append(json.loads(message["text"]))
        assert self.events[-1]["type"] != "error", self.events[-1]
        return self.events[-1]

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]

    @property
    def samples(self) -> np.ndarray:
        return np.concatenate([a.samples for a in self.audio])


def _stream(ws, payloads: list[tuple[float, bytes]]) -> Received:
    """Send frames as a live client does (each once the audio it completes is back, never more
    than a frame ahead), then end and read until the server's end."""
    got = Received()
    for i, (t, payload) in enumerate(payloads):
        ws.send_bytes(p.pack_frame(i, t, payload))
        if i >= 1:  # frame i completes the audio of frame i - 1
            while not isinstance(got.take(ws), p.AudioMessage):
                pass
    ws.send_text(json.dumps({"type": "end"}))
    while not (isinstance(e := got.take(ws), dict) and e["type"] == "end"):
        pass
    assert _close_code(ws) == p.CLOSE_NORMAL
    return got


def test_streamed_track_equals_the_offline_render(client, frames_engine, tmp_path: Path) -> None:
    from engines.eval.sync import read_audio

    frames = _frames(SAMPLE)
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config(fps=30))
        ready = json.loads(ws.receive_text())
        assert ready["type"] == "ready" and ready["lookahead_frames"] == 1
        assert ready["sample_rate"] == 48000 and ready["samples_per_frame"] == 1600
        got = _stream(ws, [(t, rgb.tobytes()) for t, rgb in frames])
    streamed = got.samples
    starts = [a.start for a in got.audio]
    assert starts == list(np.cumsum([0] + [len(a.samples) for a in got.audio[:-1]]))
    assert got.of("end")[0]["samples"] == len(streamed)
    stats = got.of("stats")
    assert stats and stats[-1]["chunks"] == len(frames) - 1  # one per frame after the first
    assert got.events.index(stats[-1]) == len(got.events) - 2  # just before "end"
    off = RenderOptions(format="wav", loudness=None)
    frames_engine.render(SAMPLE, tmp_path / "offline.wav", off)
    raw, rate = read_audio(tmp_path / "offline.wav")
    offline, tolerance = at_live_level(frames_engine.tier, raw)
    assert rate == 48000 and abs(len(streamed) - len(offline)) < 1600
    n = min(len(streamed), len(offline))
    np.testing.assert_allclose(streamed[:n], offline[:n], atol=tolerance)
    onsets = [e["sample"] for e in got.of("onset")]
    assert onsets, "the sample clip has contacts"
    assert all(s % 400 == 0 for s in onsets)  # on acoustic frames (hop 400 at 48 kHz)

    def rms(a: np.ndarray) -> float:
        return float(np.sqrt(np.mean(a**2) + 1e-12))

    rise = [rms(streamed[s : s + 2400]) / rms(streamed[s - 2400 : s]) for s in onsets if s >= 2400]
    assert max(rise) > 3, "an onset event marks where a contact sound starts"


def test_jpeg_frames_and_another_rate(client) -> None:
    frames = _frames(SAMPLE, size=128)[:20]
    codec = av.CodecContext.create("mjpeg", "w")
    codec.width = codec.height = 128
    codec.pix_fmt = "yuvj420p"
    codec.time_base = Fraction(1, 30)
    payloads = []
    for _, rgb in frames:
        frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuvj420p")
        payloads.append(b"".join(bytes(pkt) for pkt in codec.encode(frame)))
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config(width=128, height=128, pixel_format="jpeg", sample_rate=16000))
        assert json.loads(ws.receive_text())["samples_per_frame"] == 16000 // 30
        got = _stream(ws, [(t, payload) for (t, _), payload in zip(frames, payloads, strict=True)])
    assert {a.sample_rate for a in got.audio} == {16000}
    assert abs(len(got.samples) - 20 * 16000 / 30) <= 1


@pytest.mark.parametrize(
    ("first", "code"),
    [
        (b"\x01binary first", "bad_message"),
        ('{"type": "config", "width": 96, "height": 96, "sample_rate": 8000}', "invalid_config"),
        ('{"type": "config", "width": 10000, "height": 10000}', "frame_too_large"),
        ('{"type": "config", "width": 96, "height": 96, "tier": "export-xl"}', "unknown_tier"),
        ('{"type": "end"}', "bad_message"),
        ("not json", "invalid_config"),
    ],
)
def test_a_bad_config_gets_a_reason_and_a_close_code(client, first, code) -> None:
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_bytes(first) if isinstance(first, bytes) else ws.send_text(first)
        assert _error(ws)["code"] == code
        assert _close_code(ws) in (p.CLOSE_POLICY, p.CLOSE_BAD_INPUT)


@pytest.mark.parametrize(
    ("message", "code", "close"),
    [
        (p.pack_frame(0, 0.0, b"\x00" * 100), "bad_frame", p.CLOSE_BAD_INPUT),
        (b"\x07" + b"\x00" * 40, "bad_message", p.CLOSE_POLICY),
        (p.pack_frame(0, float("nan"), b"\x00" * 96 * 96 * 3), "bad_timestamp", p.CLOSE_BAD_INPUT),
    ],
)
def test_a_bad_frame_gets_a_reason_and_a_close_code(client, message, code, close) -> None:
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config())
        ws.receive_text()
        ws.send_bytes(message)
        assert _error(ws)["code"] == code
        assert _close_code(ws) == close


def test_timestamps_must_increase(client) -> None:
    frame = b"\x00" * 96 * 96 * 3
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config())
        ws.receive_text()
        ws.send_bytes(p.pack_frame(0, 1.0, frame))
        ws.send_bytes(p.pack_frame(1, 1.0, frame))
        while (message := ws.receive()).get("text") is None or "error" not in message["text"]:
            pass
        assert json.loads(message["text"])["code"] == "bad_timestamp"
        assert _close_code(ws) == p.CLOSE_BAD_INPUT


def test_a_full_service_refuses_a_new_session(frames_engine) -> None:
    with _client(frames_engine, preview_max_sessions=1) as c:
        wait_ready(c, timeout=60)
        with c.websocket_connect("/v1/preview") as first:
            first.send_text(_config())
            assert json.loads(first.receive_text())["type"] == "ready"
            with c.websocket_connect("/v1/preview") as second:
                second.send_text(_config())
                assert _error(second)["code"] == "busy"
                assert _close_code(second) == p.CLOSE_BUSY
        # The first session's end frees the slot.
        with c.websocket_connect("/v1/preview") as third:
            third.send_text(_config())
            assert json.loads(third.receive_text())["type"] == "ready"
        assert c.get("/healthz").status_code == 200


def test_an_idle_session_is_closed(frames_engine) -> None:
    with _client(frames_engine, preview_idle_timeout_s=0.3) as c:
        wait_ready(c, timeout=60)
        with c.websocket_connect("/v1/preview") as ws:
            ws.send_text(_config())
            ws.receive_text()
            assert _error(ws)["code"] == "idle"
            assert _close_code(ws) == p.CLOSE_IDLE


def test_a_burst_of_frames_is_slowed_not_closed(frames_engine) -> None:
    """Frames sent faster than the worker takes them: the socket is not read while the
    session's queue is full (the client waits on TCP), and every frame is served."""
    with _client(frames_engine, preview_queue_frames=2, preview_batch_window_ms=50) as c:
        wait_ready(c, timeout=60)
        with c.websocket_connect("/v1/preview") as ws:
            ws.send_text(_config())
            ws.receive_text()
            for i in range(10):
                ws.send_bytes(p.pack_frame(i, i / 30, b"\x00" * 96 * 96 * 3))
            ws.send_text(json.dumps({"type": "end"}))
            got = Received()
            while not (isinstance(e := got.take(ws), dict) and e["type"] == "end"):
                pass
            assert e["frames"] == 10


def test_a_session_whose_time_runs_ahead_is_the_one_refused(frames_engine) -> None:
    """Frames 4.99 s apart sent at once ask the shared worker for minutes of audio a second:
    that session is closed with its own code, and an honest one beside it goes on."""
    black = b"\x00" * 96 * 96 * 3
    with _client(frames_engine) as c:
        wait_ready(c, timeout=60)
        with (
            c.websocket_connect("/v1/preview") as greedy,
            c.websocket_connect("/v1/preview") as honest,
        ):
            for ws in (greedy, honest):
                ws.send_text(_config())
                ws.receive_text()
            for i in range(6):
                greedy.send_bytes(p.pack_frame(i, i * 4.99, black))
            while (message := greedy.receive()).get("bytes") is not None:
                pass
            error = json.loads(message["text"])
            assert error["code"] == "over_budget" and _close_code(greedy) == p.CLOSE_BUSY
            assert _stream(honest, [(k / 30, black) for k in range(10)]).of("end")


def test_a_stream_at_the_offline_gain_is_as_loud_as_the_export(
    client, frames_engine, tmp_path: Path
) -> None:
    from engines.eval.sync import read_audio

    result = frames_engine.render(SAMPLE, tmp_path / "export.wav", RenderOptions(format="wav"))
    gain = result.levelling.gain_db
    frames = _frames(SAMPLE)
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config(fps=30, gain_db=gain))
        ready = json.loads(ws.receive_text())
        assert ready["gain_db"] == pytest.approx(gain)
        streamed = _stream(ws, [(t, rgb.tobytes()) for t, rgb in frames]).samples
    offline, rate = read_audio(tmp_path / "export.wav")
    live, export = measure(streamed, rate), measure(offline, rate)
    assert live.integrated_lufs == pytest.approx(export.integrated_lufs, abs=0.5)
    assert live.true_peak_dbtp <= CEILING_DBTP + 0.5  # the same limiter, without the trim


def test_origin_and_api_key_are_checked(frames_engine) -> None:
    with _client(
        frames_engine, api_keys=["s3cret"], allowed_origins=["https://editor.example"]
    ) as c:
        wait_ready(c, timeout=60)
        for headers in [
            {"x-api-key": "wrong"},
            {"x-api-key": "s3cret", "origin": "https://evil.example"},
        ]:
            with (
                pytest.raises(WebSocketDisconnect) as refused,
                c.websocket_connect("/v1/preview", headers=headers),
            ):
                pass
            assert refused.value.code == p.CLOSE_POLICY
        # Browsers cannot set headers: the key comes in the config message, never the URL.
        for config in [_config(), _config(api_key="wrong")]:
            with c.websocket_connect("/v1/preview") as ws:
                ws.send_text(config)
                assert _error(ws)["code"] == "unauthorized"
                assert _close_code(ws) == p.CLOSE_POLICY
        with c.websocket_connect("/v1/preview?api_key=s3cret") as ws:
            ws.send_text(_config())
            assert _error(ws)["code"] == "unauthorized"  # a key in the URL is not taken
        for headers, config in [
            ({"x-api-key": "s3cret"}, _config()),
            ({"origin": "https://editor.example"}, _config(api_key="s3cret")),
            ({"origin": "http://testserver"}, _config(api_key="s3cret")),
        ]:
            with c.websocket_connect("/v1/preview", headers=headers) as ws:
                ws.send_text(config)
                assert json.loads(ws.receive_text())["type"] == "ready"


@pytest.mark.parametrize(
    ("times", "code"),
    [
        ([1e300], "bad_timestamp"),  # t0 + k/30 == t0 in float64: a resampler would spin
        ([1e16], "bad_timestamp"),
        ([0.0, 900.0], "frame_gap"),  # 15 minutes of track at once
    ],
)
def test_timestamps_that_would_stall_the_worker_are_refused(
    client, times: list[float], code: str
) -> None:
    black = b"\x00" * 96 * 96 * 3
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config(fps=30))
        assert json.loads(ws.receive_text())["type"] == "ready"
        for i, t in enumerate(times):
            ws.send_bytes(p.pack_frame(i, t, black))
        while (message := ws.receive()).get("bytes") is not None:
            pass
        assert json.loads(message["text"])["code"] == code
    # The worker is free: the next session streams at once.
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config(fps=30))
        assert json.loads(ws.receive_text())["type"] == "ready"
        got = _stream(ws, [(k / 30, black) for k in range(10)])
    assert len(got.samples) > 0


def test_a_frame_over_the_size_limit_is_refused(frames_engine) -> None:
    with _client(frames_engine, preview_max_frame_pixels=96 * 96) as c:
        wait_ready(c, timeout=60)
        with c.websocket_connect("/v1/preview") as ws:
            ws.send_text(_config())
            assert json.loads(ws.receive_text())["max_frame_bytes"] == 96 * 96 * 3
            ws.send_bytes(p.pack_frame(0, 0.0, b"\x00" * (96 * 96 * 3 + 1)))
            assert _error(ws)["code"] == "frame_too_large"
            assert _close_code(ws) == p.CLOSE_TOO_BIG


def _stream_at_own_times(engine, first_owed: int) -> tuple[dict, Received, list[int]]:
    """The sample over the WebSocket to a tier at the frames' own times (letterboxed into its
    picture), each frame from `first_owed` on sent once audio came back for the one before:
    -> ready, what came back, and where the audio had got to after each of those frames."""
    tier = engine.tier
    with open_video(
        SAMPLE,
        width=tier.width,
        height=tier.height,
        limits=DecodeLimits.from_settings(Settings()),
        letterbox=True,
    ) as s:
        frames = [(float(t), rgb) for b in s for t, rgb in zip(b.pts_s, b.rgb, strict=True)]
    got, ends = Received(), []
    with _client(engine) as c:
        wait_ready(c, timeout=60)
        with c.websocket_connect("/v1/preview") as ws:
            config = {"type": "config", "width": tier.width, "height": tier.height, "fps": 30}
            ws.send_text(json.dumps(config))
            ready = json.loads(ws.receive_text())
            assert ready["model_fps"] is None and ready["samples_per_frame"] is None
            for i, (t, rgb) in enumerate(frames):
                ws.send_bytes(p.pack_frame(i, t, rgb.tobytes()))
                if i >= first_owed:
                    while not isinstance(audio := got.take(ws), p.AudioMessage):
                        pass
                    ends.append(audio.start + len(audio.samples))
            ws.send_text(json.dumps({"type": "end"}))
            while not (isinstance(e := got.take(ws), dict) and e["type"] == "end"):
                pass
    return ready, got, ends


def _offline(engine, tmp_path: Path):
    """The offline render of the sample at the tier's own level, as a live session plays it:
    -> the render's result, the track, the tolerance a live track is held to."""
    from engines.eval.sync import read_audio

    off = RenderOptions(format="wav", loudness=None)
    result = engine.render(SAMPLE, tmp_path / "offline.wav", off)
    raw, rate = read_audio(tmp_path / "offline.wav")
    assert rate == 48000
    offline, tolerance = at_live_level(engine.tier, raw)
    return result, offline, tolerance


def test_objects_tier_streams_its_offline_track(objects_engine, tmp_path: Path) -> None:
    """A contacts tier over the WebSocket: frames at their own times (no model rate), the
    streamed track is the offline render's, and each onset is where an event was fired."""
    tier = objects_engine.tier
    # From the fifth frame on, each frame makes audio final.
    ready, got, _ = _stream_at_own_times(objects_engine, first_owed=4)
    assert ready["lookahead_frames"] == tier.head_config.lookahead + 2
    result, offline, tolerance = _offline(objects_engine, tmp_path)
    streamed = got.samples
    assert len(streamed) == len(offline)
    np.testing.assert_allclose(streamed, offline, atol=tolerance)
    onsets = [e["sample"] for e in got.of("onset")]
    assert onsets == [int(np.ceil(t * 48000 - 1e-9)) for t in sorted(result.events_s)]
    # The same fields as the offline render's markers (its video is at 30 fps, as declared).
    offline_markers = markers_document(result, video_name=None, audio_name=None).contacts
    assert [(e["kind"], e["material"], e["timecode"]) for e in got.of("onset")] == [
        (c.kind, c.material, c.timecode) for c in offline_markers
    ]
    assert [e["strength"] for e in got.of("onset")] == pytest.approx(
        [c.strength for c in offline_markers]
    )


def test_the_default_tier_streams_its_offline_track(real_engine, tmp_path: Path) -> None:
    """The default tier (motion) over the WebSocket: each frame after the second makes the audio
    up to the frame before it final (less the live limiter's lookahead), the streamed track is
    the offline render's, and each onset is a fired event's."""
    ready, got, ends = _stream_at_own_times(real_engine, first_owed=2)
    assert ready["tier"] == real_engine.tier.name and ready["lookahead_frames"] == 1
    step = 48000 // 30  # the sample is at 30 fps from 0
    assert all(k * step - 96 <= end <= k * step for k, end in enumerate(ends, start=1))
    result, offline, tolerance = _offline(real_engine, tmp_path)
    streamed = got.samples
    assert len(streamed) == len(offline)
    np.testing.assert_allclose(streamed, offline, atol=tolerance)
    impacts = [e["sample"] for e in got.of("onset") if e["kind"] == "impact"]
    assert impacts == [int(np.ceil(t * 48000 - 1e-9)) for t in sorted(result.events_s)]
    # Rolling and sliding: the offline render's markers, each sent once judged a glide.
    glides = sorted((e["time_s"], e["kind"]) for e in got.of("onset") if e["kind"] != "impact")
    expected = [(m.time_s, m.kind) for m in result.markers if m.kind != "impact"]
    assert len(glides) == len(expected)
    pairs = zip(glides, expected, strict=True)
    assert all(k == m and t == pytest.approx(u, abs=1 / 48000) for (t, k), (u, m) in pairs)
    assert impacts or glides


def test_sessions_and_their_chunks_are_counted(client) -> None:
    black = b"\x00" * 96 * 96 * 3
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config(fps=30))
        assert json.loads(ws.receive_text())["type"] == "ready"
        _stream(ws, [(k / 30, black) for k in range(10)])
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config(width=0))
        assert _error(ws)["code"] == "invalid_config"
    text = client.get("/metrics").text
    assert 'foley_preview_sessions_total{outcome="opened"} 1.0' in text
    assert 'foley_preview_sessions_total{outcome="invalid_config"} 1.0' in text
    assert "foley_preview_sessions_open 0.0" in text
    chunks = next(
        line for line in text.splitlines() if line.startswith("foley_preview_chunks_total")
    )
    assert float(chunks.split()[-1]) >= 8


def test_a_jpeg_declaring_a_huge_picture_is_refused_by_its_own_connection(client) -> None:
    huge = declaring(jpeg(96, 96), 16000, 8000)
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config(pixel_format="jpeg"))
        assert json.loads(ws.receive_text())["type"] == "ready"
        ws.send_bytes(p.pack_frame(0, 0.0, huge))
        error = _error(ws)
        assert error["code"] == "bad_frame" and "16000x8000" in error["reason"]
        assert _close_code(ws) == p.CLOSE_BAD_INPUT
    with client.websocket_connect("/v1/preview") as ws:  # the worker never saw it
        ws.send_text(_config(pixel_format="jpeg"))
        assert json.loads(ws.receive_text())["type"] == "ready"
        got = _stream(ws, [(k / 30, jpeg(96, 96)) for k in range(6)])
    assert len(got.samples) > 0


def test_a_non_ascii_reason_closes_with_its_code(client) -> None:
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config(tier="é" * 200))
        error = _error(ws)
        assert error["code"] == "unknown_tier" and len(error["reason"]) < 200
        assert _close_code(ws) == p.CLOSE_BAD_INPUT


def test_close_reasons_are_cut_by_bytes_on_a_character() -> None:
    reason = close_reason("é" * 100)
    assert len(reason.encode()) <= MAX_CLOSE_REASON_BYTES and reason == "é" * 61


def test_an_onset_before_zero_has_no_timecode() -> None:
    config = p.SessionConfig(type="config", width=96, height=96, fps=30)
    onset = Onset(sample=0, marker=ContactMarker(0.0, "impact", 1.0, None))
    assert onset_message(config, -2.0, 48000, onset).timecode is None
    assert onset_message(config, 2.0, 48000, onset).timecode == "00:00:02:00"


def test_a_fault_of_the_service_ends_the_session_with_a_code(client, monkeypatch) -> None:
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(p, "pack_audio", broken)
    black = b"\x00" * 96 * 96 * 3
    with client.websocket_connect("/v1/preview") as ws:
        ws.send_text(_config(fps=30))
        assert json.loads(ws.receive_text())["type"] == "ready"
        for k in range(4):
            ws.send_bytes(p.pack_frame(k, k / 30, black))
        assert _error(ws)["code"] == "internal"
        assert _close_code(ws) == p.CLOSE_INTERNAL
    assert client.get("/healthz").status_code == 200


def test_frames_whose_time_does_not_advance_do_not_hold_a_session(frames_engine) -> None:
    black = b"\x00" * 96 * 96 * 3
    with _client(frames_engine, preview_idle_timeout_s=0.6) as c:
        wait_ready(c, timeout=60)
        with c.websocket_connect("/v1/preview") as ws:  # frames 0.35 s apart, 1 ms of time
            ws.send_text(_config())
            ws.receive_text()
            for k in range(3):
                ws.send_bytes(p.pack_frame(k, k * 0.001, black))
                time.sleep(0.35)
            ws.send_text(json.dumps({"type": "end"}))
            while (message := ws.receive()).get("bytes") is not None:
                pass
            error = json.loads(message["text"])
            assert error["code"] == "idle" and "did not advance" in error["reason"]
            assert _close_code(ws) == p.CLOSE_IDLE
        with c.websocket_connect("/v1/preview") as ws:  # the same pace in real time: served
            ws.send_text(_config())
            ws.receive_text()
            assert _stream(ws, [(k * 0.35, black) for k in range(4)]).of("end")


def test_one_key_holds_at_most_its_share_of_the_sessions(frames_engine) -> None:
    keys = {"api_keys": ["alice", "bob"], "preview_max_sessions": 4}
    with _client(frames_engine, **keys) as c:
        wait_ready(c, timeout=60)
        alice, bob = {"x-api-key": "alice"}, {"x-api-key": "bob"}
        with (
            c.websocket_connect("/v1/preview", headers=alice) as first,
            c.websocket_connect("/v1/preview", headers=alice) as second,
        ):
            for ws in (first, second):
                ws.send_text(_config())
                assert json.loads(ws.receive_text())["type"] == "ready"
            with c.websocket_connect("/v1/preview") as third:  # alice's key in the config
                third.send_text(_config(api_key="alice"))
                assert _error(third)["code"] == "key_busy"
                assert _close_code(third) == p.CLOSE_BUSY
            with c.websocket_connect("/v1/preview", headers=bob) as other:
                other.send_text(_config())
                assert json.loads(other.receive_text())["type"] == "ready"
        with c.websocket_connect("/v1/preview", headers=alice) as again:  # slots given back
            again.send_text(_config())
            assert json.loads(again.receive_text())["type"] == "ready"


def test_the_outbox_is_bounded_in_bytes_of_audio_too() -> None:
    async def run() -> None:
        outbox = Outbox(messages=64, max_bytes=3 * 4000)

        def audio(start: int) -> AudioOut:
            return AudioOut(start, np.zeros(1000, np.float32), [], 0.0, 0.0, 1)

        outbox.put(audio(0))
        outbox.put(audio(1000))
        outbox.put(audio(2000))
        assert not outbox.overflow.is_set() and outbox.bytes == 12000
        assert (await outbox.get()).start == 0 and outbox.bytes == 8000
        outbox.put(audio(3000))
        outbox.put(audio(4000))  # a fifth 4 kB with 12 kB waiting: the reader is behind
        assert outbox.overflow.is_set() and outbox.bytes == 12000

    anyio.run(run)
