"""The reference live preview client: stream a video file's frames to `/v1/preview` at the
video's own pace and collect the Foley that comes back, with latency statistics.

    report = asyncio.run(stream_file(path, url, options))

`foley preview` prints the report; bench/preview.py runs many of these at once. Decoding uses the
service's own decoder (PyAV in a child process), already scaled to the size sent.

Client-side latency of an audio chunk: its arrival minus the send time of the frame that
completed it (the one `lookahead_frames` model frames after the chunk's last frame). Underruns
count chunks that arrive after a player would have needed them: one that starts playing
`buffer_s` after the first chunk arrives and then plays in real time.
"""

from __future__ import annotations

import asyncio
import bisect
import json
import time
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import av
import numpy as np
from av.video.codeccontext import VideoCodecContext
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from service.config import Settings
from service.media.decode import DecodeLimits, open_video
from service.preview import protocol as p


@dataclass(frozen=True)
class ClientOptions:
    # The default tier's picture: frames are decoded to fit it, their shape kept (black bars), as
    # the service decodes a file for it.
    width: int = 320
    height: int = 180
    jpeg: bool = False
    sample_rate: int = 48000
    speed: float = 1.0  # 1 = real time; 0 = as fast as the server answers
    in_flight: int = 4  # speed 0: frames sent ahead of the audio that has come back
    buffer_s: float = 0.1  # the player's buffer, for counting underruns
    api_key: str | None = None
    max_frames: int | None = None


@dataclass
class Report:
    ready: dict[str, Any] = field(default_factory=dict)  # the server's JSON messages
    frames_sent: int = 0
    audio: list[p.AudioMessage] = field(default_factory=list)
    onsets: list[float] = field(default_factory=list)
    server_stats: list[dict[str, Any]] = field(default_factory=list)
    latency_ms: list[float] = field(default_factory=list)
    arrivals: list[float] = field(default_factory=list)
    sends: list[float] = field(default_factory=list)
    first_audio_ms: float | None = None
    underruns: int = 0
    error: dict[str, Any] | None = None
    close_code: int | None = None
    progress: asyncio.Event = field(default_factory=asyncio.Event)  # set on every message
    sent_pts: list[float] = field(default_factory=list)  # from the first frame's
    finished: bool = False  # the server ended the session

    def frames_back(self) -> int:
        """Frames of audio received, counting the lookahead as answered."""
        if not self.audio:
            return 0
        last = self.audio[-1]
        end = last.start + len(last.samples)
        ahead: int = self.ready["lookahead_frames"]
        return _frames_up_to(self.ready, self.sent_pts, end) + ahead

    @property
    def samples(self) -> np.ndarray:
        return np.concatenate([a.samples for a in self.audio]) if self.audio else np.zeros(0)

    def summary(self) -> dict[str, float | int | None]:
        lat = np.asarray(self.latency_ms) if self.latency_ms else np.zeros(1)
        gaps = np.diff(self.arrivals[:-1]) * 1000 if len(self.arrivals) > 3 else np.zeros(1)
        sent = np.diff(self.sends) * 1000 if len(self.sends) > 2 else np.zeros(1)
        server = self.server_stats[-1] if self.server_stats else {}
        return {
            "frames": self.frames_sent,
            "chunks": len(self.audio),
            "onsets": len(self.onsets),
            "latency_ms_p50": round(float(np.percentile(lat, 50)), 2),
            "latency_ms_p99": round(float(np.percentile(lat, 99)), 2),
            "jitter_ms": round(float(np.std(gaps)), 2),  # audio arrivals (the end's flush left out)
            "send_jitter_ms": round(float(np.std(sent)), 2),  # this client's own frame pacing
            "first_audio_ms": None
            if self.first_audio_ms is None
            else round(self.first_audio_ms, 1),
            "underruns": self.underruns,
            "server_compute_ms_p50": server.get("compute_ms_p50"),
            "server_compute_ms_p99": server.get("compute_ms_p99"),
        }


def _encode_jpeg(width: int, height: int) -> VideoCodecContext:
    codec = av.CodecContext.create("mjpeg", "w")
    codec.width, codec.height, codec.pix_fmt = width, height, "yuvj420p"
    codec.time_base = Fraction(1, 90000)
    return codec


async def stream_file(path: Path, url: str, options: ClientOptions) -> Report:
    report = Report()
    headers = {"x-api-key": options.api_key} if options.api_key else None
    async with connect(url, additional_headers=headers, max_size=None) as ws:
        config = {
            "type": "config",
            "width": options.width,
            "height": options.height,
            "pixel_format": "jpeg" if options.jpeg else "rgb24",
            "sample_rate": options.sample_rate,
        }
        await ws.send(json.dumps(config))
        report.ready = json.loads(await ws.recv())
        if report.ready.get("type") != "ready":
            report.error = report.ready
            return report
        sent: list[tuple[float, float]] = []  # (pts, send time)
        receiver = asyncio.create_task(_receive(ws, report, sent, options))
        try:
            await _send(ws, path, options, report, sent)
            await receiver
        finally:
            receiver.cancel()
    return report


async def _send(
    ws: ClientConnection,
    path: Path,
    options: ClientOptions,
    report: Report,
    sent: list[tuple[float, float]],
) -> None:
    limits = DecodeLimits.from_settings(Settings())
    jpeg = _encode_jpeg(options.width, options.height) if options.jpeg else None
    loop = asyncio.get_running_loop()
    video = await loop.run_in_executor(
        None,
        lambda: open_video(
            path, width=options.width, height=options.height, limits=limits, letterbox=True
        ),
    )
    started: float | None = None
    with video:
        batches = iter(video)
        while (batch := await loop.run_in_executor(None, next, batches, None)) is not None:
            for pts, rgb in zip(batch.pts_s.tolist(), batch.rgb, strict=True):
                if options.max_frames is not None and report.frames_sent >= options.max_frames:
                    break
                if started is None:
                    started, first_pts = time.perf_counter(), pts
                elif options.speed > 0:
                    due = started + (pts - first_pts) / options.speed
                    await asyncio.sleep(max(0.0, due - time.perf_counter()))
                else:
                    while (
                        report.frames_sent - report.frames_back() >= options.in_flight
                        and not report.finished
                    ):
                        report.progress.clear()
                        await report.progress.wait()
                payload = rgb.tobytes() if jpeg is None else _jpeg_bytes(jpeg, rgb)
                sent.append((pts, time.perf_counter()))
                report.sends.append(sent[-1][1])
                report.sent_pts.append(pts - sent[0][0])
                try:
                    await ws.send(p.pack_frame(report.frames_sent, pts, payload))
                except ConnectionClosed:
                    return
                report.frames_sent += 1
    await ws.send(json.dumps({"type": "end"}))


def _jpeg_bytes(codec: VideoCodecContext, rgb: np.ndarray) -> bytes:
    frame = av.VideoFrame.from_ndarray(rgb, format="rgb24").reformat(format="yuvj420p")
    return b"".join(bytes(packet) for packet in codec.encode(frame))


def _frames_up_to(ready: dict[str, Any], sent_pts: list[float], end_sample: int) -> int:
    """Frames whose audio ends by `end_sample`: model frames for a frame-rate tier, else the
    sent frames before that time."""
    per_frame: int | None = ready["samples_per_frame"]
    if per_frame is not None:
        return end_sample // per_frame
    return bisect.bisect_left(sent_pts, end_sample / ready["sample_rate"] - 1e-6)


async def _receive(
    ws: ClientConnection, report: Report, sent: list[tuple[float, float]], options: ClientOptions
) -> None:
    ready = report.ready
    rate, fps = ready["sample_rate"], ready["model_fps"]
    spf, ahead = ready["samples_per_frame"], ready["lookahead_frames"]
    play_start: float | None = None
    try:
        async for message in ws:
            now = time.perf_counter()
            report.progress.set()
            if isinstance(message, bytes):
                chunk = p.parse_audio(message)
                report.audio.append(chunk)
                report.arrivals.append(now)
                if play_start is None:
                    play_start = now + options.buffer_s
                    report.first_audio_ms = (now - sent[0][1]) * 1000
                elif now > play_start + chunk.start / rate:
                    report.underruns += 1
                # The frame that completed this chunk: `ahead` frames past its end.
                end = chunk.start + len(chunk.samples)
                if fps is None:
                    k = _frames_up_to(ready, report.sent_pts, end) + ahead
                else:
                    due_pts = sent[0][0] + (end // spf - 1 + ahead) / fps - 1e-4
                    k = bisect.bisect_left(sent, due_pts, key=lambda s: s[0])
                if k < len(sent):
                    report.latency_ms.append((now - sent[k][1]) * 1000)
                continue
            event = json.loads(message)
            if event["type"] == "onset":
                report.onsets.append(event["time_s"])
            elif event["type"] == "stats":
                report.server_stats.append(event)
            elif event["type"] == "error":
                report.error = event
            elif event["type"] == "end":
                break
    except ConnectionClosed as closed:
        report.close_code = closed.rcvd.code if closed.rcvd else None
    finally:
        report.finished = True
        report.progress.set()
