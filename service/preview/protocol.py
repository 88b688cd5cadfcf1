"""The live preview protocol (`/v1/preview`, WebSocket): typed messages, nothing else.

Text messages are JSON objects with a `type`; binary messages start with a fixed little-endian
header whose first byte says what they are. docs/preview.md is the reference for clients.

    client -> server   {"type": "config", ...}          first message, once
                       binary FRAME                     a video frame and its timestamp
                       {"type": "end"}                  no more frames: flush and close
    server -> client   {"type": "ready", ...}           the session's parameters
                       binary AUDIO                     PCM from a sample index on
                       {"type": "onset", ...}           a contact sound starts
                       {"type": "stats", ...}           latency, about once a second
                       {"type": "error", ...}           then the server closes
                       {"type": "end", ...}             everything flushed; then the server closes
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from service.pipeline.types import DEFAULT_OPTIONS, MarkerKind, SampleRate

PROTOCOL_VERSION = 1
# Beyond this a float64 second no longer resolves a sample, and no clip is that long.
MAX_TIMESTAMP_S = 1e9
# A live stream's frames follow a playing video: a larger jump is a seek, which a client makes
# with a new session (a gap would otherwise be synthesised, and held, all at once).
MAX_FRAME_GAP_S = 5.0

# Binary message kinds (first byte).
FRAME = 1
AUDIO = 2
# FRAME: kind u8, version u8, reserved u16, index u32, pts_s f64 = 16 bytes, then the payload.
FRAME_HEADER = struct.Struct("<BBHId")
# AUDIO: kind u8, version u8, channels u16, sample_rate u32, start_sample i64, start_s f64
# = 24 bytes, then float32 samples (so the payload is 4-byte aligned for a Float32Array).
AUDIO_HEADER = struct.Struct("<BBHIqd")

# WebSocket close codes (RFC 6455: 1000-2999 protocol, 4000-4999 application).
CLOSE_NORMAL = 1000
CLOSE_POLICY = 1008  # bad origin or API key, or a message that breaks the protocol
CLOSE_TOO_BIG = 1009
CLOSE_INTERNAL = 1011
CLOSE_BUSY = 1013  # "try again later": the service is at its session limit
CLOSE_IDLE = 4001  # no frame for longer than the idle timeout
CLOSE_SLOW_READER = 4002  # the client does not read what the server sends
CLOSE_BAD_INPUT = 4003  # a frame or config the server cannot use


class _Message(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SessionConfig(_Message):
    """The client's first message."""

    type: Literal["config"]
    width: int = Field(gt=0, description="frame width in pixels (raw RGB) or of the JPEGs")
    height: int = Field(gt=0)
    pixel_format: Literal["rgb24", "jpeg"] = "rgb24"
    fps: float | None = Field(
        default=None,
        gt=0,
        le=240,
        description="nominal frame rate; frames carry their own timestamps either way",
    )
    sample_rate: SampleRate = DEFAULT_OPTIONS.sample_rate  # type: ignore[assignment]
    tier: str | None = None
    gain_db: float | None = Field(
        default=None,
        ge=-40,
        le=60,
        description="the level the Foley plays at (dB on the model's own); default: the tier's "
        "calibrated live gain. A client that knows the clip's offline render (its "
        "X-Foley-Gain-dB) sends that gain, and hears what the export will sound like",
    )
    api_key: str | None = Field(
        default=None,
        description="the API key, when the service has keys and the client cannot send the "
        "x-api-key header (browsers)",
    )
    protocol: int = PROTOCOL_VERSION


class End(_Message):
    type: Literal["end"]


ClientMessage: TypeAdapter[SessionConfig | End] = TypeAdapter(
    Annotated[SessionConfig | End, Field(discriminator="type")]
)


class Ready(_Message):
    type: Literal["ready"] = "ready"
    session: str
    protocol: int = PROTOCOL_VERSION
    tier: str
    model_version: str
    # A frame-rate tier: the model's rate; its audio of model frame k comes once frame k +
    # lookahead_frames is in. A contacts tier (frames at their own times): null, and the audio up
    # to a frame's time comes once lookahead_frames more frames are in.
    model_fps: int | None
    sample_rate: int
    samples_per_frame: int | None  # at `sample_rate`: a model frame's worth of audio
    lookahead_frames: int
    width: int
    height: int
    pixel_format: str
    max_frame_bytes: int
    gain_db: float = 0.0  # the level the Foley plays at: the config's, or the tier's live gain
    request_id: str = "-"  # the session's id in the service's logs (X-Request-ID, or made)


class Onset(_Message):
    """A contact sound starts: the fields of an offline render's markers (service.markers)."""

    type: Literal["onset"] = "onset"
    time_s: float  # on the stream's clock: the first frame's timestamp + offset
    sample: int  # sample index at the session's rate
    kind: MarkerKind = "impact"
    strength: float | None = None  # the impulse voiced, N s (None: the tier does not estimate)
    material: str | None = None  # None: the tier does not tell materials apart
    timecode: str | None = None  # SMPTE at the config's fps (None: no fps given)


class Stats(_Message):
    type: Literal["stats"] = "stats"
    chunks: int  # audio chunks sent so far
    compute_ms_p50: float
    compute_ms_p99: float
    latency_ms_p50: float  # a frame's arrival -> the audio it completes is sent
    latency_ms_p99: float
    batch_mean: float  # sessions per inference batch


class ErrorMessage(_Message):
    type: Literal["error"] = "error"
    code: str
    reason: str


class Ended(_Message):
    type: Literal["end"] = "end"
    frames: int
    samples: int


@dataclass(frozen=True)
class FrameMessage:
    index: int
    pts_s: float
    payload: memoryview
    decoded: np.ndarray | None = None  # a JPEG's pixels, decoded by its connection already


class ProtocolError(ValueError):
    """A message the server cannot use: `code` for the error message, `close` for the socket."""

    def __init__(self, reason: str, *, code: str = "bad_message", close: int = CLOSE_POLICY):
        super().__init__(reason)
        self.code, self.close = code, close


def parse_frame(data: bytes) -> FrameMessage:
    if len(data) < FRAME_HEADER.size:
        raise ProtocolError(f"a frame message is at least {FRAME_HEADER.size} bytes")
    kind, version, _, index, pts_s = FRAME_HEADER.unpack_from(data)
    if kind != FRAME:
        raise ProtocolError(f"unknown binary message kind {kind}")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"frame header version {version}, expected {PROTOCOL_VERSION}")
    if not np.isfinite(pts_s) or abs(pts_s) > MAX_TIMESTAMP_S:
        raise ProtocolError(
            f"the frame timestamp must be a number of seconds within ±{MAX_TIMESTAMP_S:g}",
            code="bad_timestamp",
            close=CLOSE_BAD_INPUT,
        )
    return FrameMessage(index, pts_s, memoryview(data)[FRAME_HEADER.size :])


def pack_frame(index: int, pts_s: float, payload: bytes) -> bytes:
    return FRAME_HEADER.pack(FRAME, PROTOCOL_VERSION, 0, index, pts_s) + payload


def pack_audio(samples: np.ndarray, *, sample_rate: int, start: int, start_s: float) -> bytes:
    header = AUDIO_HEADER.pack(AUDIO, PROTOCOL_VERSION, 1, sample_rate, start, start_s)
    return header + np.ascontiguousarray(samples, dtype="<f4").tobytes()


@dataclass(frozen=True)
class AudioMessage:
    sample_rate: int
    start: int
    start_s: float
    samples: np.ndarray


def parse_audio(data: bytes) -> AudioMessage:
    kind, version, channels, rate, start, start_s = AUDIO_HEADER.unpack_from(data)
    if kind != AUDIO or version != PROTOCOL_VERSION or channels != 1:
        raise ProtocolError(f"not a version {PROTOCOL_VERSION} mono audio message")
    samples = np.frombuffer(data, dtype="<f4", offset=AUDIO_HEADER.size)
    return AudioMessage(rate, start, start_s, samples)
