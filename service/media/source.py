"""Opening an untrusted upload with PyAV: whitelists and header limits, before any frame is decoded.

Runs inside the decoder child process (`service.media.worker`) and in the muxer, which reopens an
upload only once the child has decoded its first frames, then reads its packets behind the child:
the parent parses only bytes that the child, opening the file the same way, has already parsed.
The path is opened as `file:<absolute path>` with

- `protocol_whitelist=file`: no http, tcp, concat:, subfile:, data: ... even if a demuxer asks;
- `format_whitelist` = ALLOWED_FORMATS: FFmpeg refuses any other demuxer before it reads a header.
  This is what stops an ffconcat or HLS playlist renamed `.mp4`: the protocol whitelist alone lets
  the concat demuxer open other local files (measured with FFmpeg 8.1: a 2-line ffconcat file
  decodes the file it names).

Header limits use what FFmpeg reports after `avformat_find_stream_info`: FFmpeg itself zeroes
a frame size over ~268 Mpixels (`av_image_check_size`), so a header declaring 100000x100000 shows
up as 0x0 and is rejected as corrupt; sizes between `max_pixels` and that are `too_many_pixels`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import av
import av.logging
from av.container import InputContainer
from av.video.stream import VideoStream

from service.config import Settings
from service.errors import LimitExceeded, MediaError

# Names as in `container.format.name` ("mov,mp4,m4a,3gp,3g2,mj2", "matroska,webm", "avi").
ALLOWED_FORMATS: frozenset[str] = frozenset(
    {"mov", "mp4", "m4a", "3gp", "3g2", "mj2", "matroska", "webm", "avi"}
)
# Canonical codec names (`codec.canonical_name`: AV1 is "av1" whether libdav1d decodes it or not).
ALLOWED_CODECS: frozenset[str] = frozenset(
    {"h264", "hevc", "vp9", "av1", "mpeg4", "prores", "vp8", "mjpeg"}
)
_OPEN_OPTIONS = {
    "protocol_whitelist": "file",
    "format_whitelist": ",".join(sorted(ALLOWED_FORMATS)),
}
# FFmpeg's av_image_check_size2, refusing a frame over the decoder's max_pixels.
_OVER_MAX_PIXELS = re.compile(r"Picture size (\d+)x(\d+) exceeds specified max pixel count")
# Average frame rate above which a clip is refused (frames are counted against the duration limit).
MAX_FPS = 240.0


@dataclass(frozen=True)
class DecodeLimits:
    max_pixels: int  # per frame, width * height as decoded
    max_duration_s: float  # span from the first frame's pts, declared or decoded
    stall_timeout_s: float  # the decoder child may go this long without producing anything
    memory_bytes: int = 0  # the decoder child's data segment (RLIMIT_DATA); 0: no limit

    @classmethod
    def from_settings(cls, settings: Settings) -> DecodeLimits:
        return cls(
            max_pixels=settings.max_pixels,
            max_duration_s=settings.max_duration_s,
            stall_timeout_s=settings.decode_stall_timeout_s,
            memory_bytes=settings.decode_memory_bytes,
        )

    @property
    def max_frames(self) -> int:
        return math.ceil(self.max_duration_s * MAX_FPS)


@dataclass(frozen=True)
class VideoInfo:
    container: str  # FFmpeg demuxer name, e.g. "mov,mp4,m4a,3gp,3g2,mj2"
    codec: str  # canonical codec name, e.g. "h264"
    width: int
    height: int
    fps: float  # average frame rate; 0.0 when unknown
    start_s: float  # presentation time of the first frame, as declared
    duration_s: float  # declared (or FFmpeg's bitrate estimate); 0.0 when unknown
    has_audio: bool
    # The video stream's own header states its duration (MP4, MOV): frames that stop well short
    # of it mean the file was cut (a container's duration may include a longer audio track).
    own_duration: bool = False


def open_input(path: Path, *, max_pixels: int | None = None) -> InputContainer:
    """Open a local file with the protocol and format whitelists; never pass a URL.

    Opening decodes a frame or two of each stream to learn what the headers leave out, at the
    size the headers declare: `max_pixels` makes those decoders refuse a larger frame instead
    of allocating it (a 2 KB file can declare 16000x16000 4:4:4 at 10 bits, gigabytes a frame),
    and the refusal is `too_many_pixels`. It reads FFmpeg's log of all threads while opening:
    for the decoder's own process."""
    if max_pixels is None:
        return _open(path, {})
    level = av.logging.get_level()
    av.logging.set_level(av.logging.ERROR)  # without a level FFmpeg's log reaches no one
    try:
        with av.logging.Capture(local=False) as logs:
            container = _open(path, {"max_pixels": str(max_pixels)})
    finally:
        av.logging.set_level(level)
    for _, _, message in logs:
        if refused := _OVER_MAX_PIXELS.search(message):
            container.close()
            width, height = refused.groups()
            raise LimitExceeded(
                f"The video frame is {width}x{height}, more than the {max_pixels} pixel limit.",
                code="too_many_pixels",
            )
    return container


def _open(path: Path, options: dict[str, str]) -> InputContainer:
    try:
        return av.open(
            "file:" + str(Path(path).resolve()),
            container_options=_OPEN_OPTIONS,
            options=options,
            metadata_errors="replace",
        )
    except av.error.ArgumentError as exc:  # EINVAL: the probed format is not on the whitelist
        raise MediaError(
            "The file is not in a supported container (MP4, MOV, MKV, WebM or AVI).",
            code="unsupported_container",
        ) from exc
    except av.FFmpegError as exc:
        raise MediaError("The file is not a video FFmpeg can read.", code="not_a_video") from exc


def video_stream(container: InputContainer) -> VideoStream:
    """The first real video stream (cover art in an audio file does not count)."""
    fmt = container.format.name
    if not set(fmt.split(",")) & ALLOWED_FORMATS:  # defence in depth; FFmpeg already refused it
        raise MediaError(f"The container {fmt!r} is not supported.", code="unsupported_container")
    for stream in container.streams.video:
        if not stream.disposition & av.stream.Disposition.attached_pic:
            return stream
    if container.streams.audio:
        raise MediaError("The file has audio but no video stream.", code="no_video_stream")
    raise MediaError("The file has no video stream.", code="no_video_stream")


def inspect(container: InputContainer, limits: DecodeLimits) -> tuple[VideoStream, VideoInfo]:
    """Pick the video stream and check codec, frame size and declared duration against limits."""
    stream = video_stream(container)
    cc = stream.codec_context
    codec = cc.codec.canonical_name if cc is not None else "unknown"
    if codec not in ALLOWED_CODECS:
        raise MediaError(f"The video codec {codec!r} is not supported.", code="unsupported_codec")
    width, height = cc.width, cc.height
    if width <= 0 or height <= 0:
        raise MediaError(
            "The video header declares no valid frame size (corrupt or beyond FFmpeg's limit).",
            code="corrupt_data",
        )
    if width * height > limits.max_pixels:
        raise LimitExceeded(
            f"The video frame is {width}x{height}, more than the {limits.max_pixels} pixel limit.",
            code="too_many_pixels",
        )
    info = VideoInfo(
        container=container.format.name,
        codec=codec,
        width=width,
        height=height,
        fps=float(stream.average_rate or stream.guessed_rate or 0.0),
        start_s=_start_s(container, stream),
        duration_s=_declared_span(container, stream),
        has_audio=bool(container.streams.audio),
        own_duration=stream.duration is not None and bool(stream.time_base),
    )
    if info.duration_s > limits.max_duration_s:
        raise LimitExceeded(
            f"The video declares {info.duration_s:.0f} s, more than the "
            f"{limits.max_duration_s:.0f} s limit.",
            code="too_long",
        )
    return stream, info


def _start_s(container: InputContainer, stream: VideoStream) -> float:
    if stream.start_time is not None and stream.time_base:
        return float(stream.start_time * stream.time_base)
    if container.start_time is not None:
        return container.start_time / av.time_base
    return 0.0


def _declared_span(container: InputContainer, stream: VideoStream) -> float:
    """The video's duration from its first frame, as the headers say."""
    if stream.duration is not None and stream.time_base:
        return float(stream.duration * stream.time_base)
    if container.duration is None:
        return 0.0
    duration = container.duration / av.time_base
    if "matroska" in container.format.name:
        # Matroska's Duration counts from timestamp 0, not from the first frame.
        duration -= max(0.0, _start_s(container, stream))
    return max(0.0, duration)
