"""The decoder child process: opens one upload, checks it, and streams model frames to the parent.

Runs in a process forked from the forkserver (`service.media.decode`), so a SIGSEGV or a hang
inside FFmpeg on a malformed file kills or stalls only this process. Messages on the pipe, in order:

    ("info", VideoInfo)
    ("batch", pts_s float64 (n,)) followed by one raw message of n*H*W*3 uint8 RGB bytes  (repeated)
    ("end", end_s, frames)  or  ("error", class name, code, reason)  or  ("bug", traceback)

The pipe holds ~64 KiB and `send` blocks while it is full: the child decodes at most one batch
ahead of a parent that stops reading, so memory is bounded whatever the clip's length. Raw bytes
instead of pickled arrays: one copy per batch into the pipe, none per frame.
"""

from __future__ import annotations

import contextlib
import math
import resource
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

import av
import numpy as np
from av.video.stream import VideoStream

from service.errors import FoleyError, LimitExceeded, MediaError
from service.media.frames import FrameScaler
from service.media.source import DecodeLimits, VideoInfo, inspect, open_input

# A damaged stretch is skipped; a stream mostly undecodable is corrupt. Judged once this many
# packets are in, so one bad packet at the start of a short clip does not condemn it.
MAX_DAMAGED_SHARE = 0.25
MIN_PACKETS_JUDGED = 8


@dataclass(frozen=True)
class DecodeJob:
    path: str
    width: int
    height: int
    limits: DecodeLimits
    batch_size: int
    decode_frames: bool  # False: header checks only (probe)
    letterbox: bool = False  # keep the picture's display shape (FrameScaler)


def ready() -> None:
    """A child that does nothing: starting it warms the forkserver up."""


def run(conn: Connection, job: DecodeJob) -> None:
    """Child entry point: every outcome is one message, except a crash, which is EOF."""
    try:
        if job.limits.memory_bytes:
            limit = job.limits.memory_bytes
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        with open_input(Path(job.path), max_pixels=job.limits.max_pixels) as container:
            stream, info = inspect(container, job.limits)
            conn.send(("info", info))
            end_s, frames = math.nan, 0
            notes: list[str] = []
            if job.decode_frames:
                end_s, frames, notes = _decode(container, stream, info, job, conn)
            conn.send(("end", end_s, frames, notes))
    except FoleyError as exc:
        _send_quietly(conn, ("error", type(exc).__name__, exc.code, exc.reason))
    except MemoryError:  # FFmpeg's ENOMEM (av.error.MemoryError) among them
        mib = job.limits.memory_bytes / 2**20
        reason = f"Decoding this video needs more than the decoder's {mib:.0f} MiB of memory."
        _send_quietly(conn, ("error", "LimitExceeded", "decoder_memory", reason))
    except av.FFmpegError as exc:
        reason = f"The video data is corrupt or a frame exceeds the size limit ({exc.strerror})."
        _send_quietly(conn, ("error", "MediaError", "corrupt_data", reason))
    except BrokenPipeError:
        pass  # the parent stopped reading and is about to kill us
    except Exception:
        _send_quietly(conn, ("bug", traceback.format_exc()))
        raise
    finally:
        conn.close()


def _decode(
    container: av.container.InputContainer,
    stream: VideoStream,
    info: VideoInfo,
    job: DecodeJob,
    conn: Connection,
) -> tuple[float, int, list[str]]:
    """Decode and send every frame; -> (end s, frames, what was wrong with the file and was
    worked around). A packet the decoder cannot read is skipped (a damaged stretch of an
    otherwise good file), unless more than MAX_DAMAGED_SHARE of them are: then the file is
    corrupt (a stream that switches to an over-limit frame size fails on every packet after)."""
    limits = job.limits
    stream.thread_type = "AUTO"  # frame threads: faster on files, frames come out a bit later
    stream.codec_context.options = {
        # Enforced inside the decoder, so a mid-stream resolution change cannot allocate huge
        # frames.
        "max_pixels": str(limits.max_pixels),
        # No in-loop deblocking: frames are averaged down to the model's input, where block
        # edges vanish, and the decoder needs much less CPU (docs/benchmarks.md); its effect on
        # the model's input is bounded in tests/media/test_decode.py.
        "skip_loop_filter": "all",
    }
    step = 1.0 / info.fps if info.fps > 0 else 1.0 / 30
    pts = np.empty(job.batch_size, np.float64)
    rgb = np.empty((job.batch_size, job.height, job.width, 3), np.uint8)
    scale = FrameScaler(
        job.width,
        job.height,
        letterbox=job.letterbox,
        sample_aspect=stream.codec_context.sample_aspect_ratio,
    )
    k = frames = 0
    first = last = end_s = math.nan
    damage = _Damage()
    for frame in damage.frames(container, stream):
        t = frame.time
        if t is None:  # no pts: best effort, one nominal frame after the previous one
            t = last + step if frames else info.start_s
        if t <= last:  # out-of-order or duplicate timestamp: keep pts strictly increasing
            damage.out_of_order += 1
            continue
        if frames == 0:
            first = t
        frames += 1
        if t - first > limits.max_duration_s or frames > limits.max_frames:
            raise LimitExceeded(
                f"The video runs past the {limits.max_duration_s:.0f} s limit.", code="too_long"
            )
        if frame.width * frame.height > limits.max_pixels:
            raise LimitExceeded(
                f"A video frame is {frame.width}x{frame.height}, more than the "
                f"{limits.max_pixels} pixel limit.",
                code="too_many_pixels",
            )
        rgb[k] = scale(frame)
        pts[k] = t
        k += 1
        last = t
        duration, time_base = frame.duration, frame.time_base
        end_s = t + (float(duration * time_base) if duration and time_base is not None else step)
        if k == job.batch_size:
            _send_batch(conn, pts, rgb, k)
            k = 0
    if k:
        _send_batch(conn, pts, rgb, k)
    if frames == 0:
        raise MediaError("The video stream has no decodable frames.", code="no_frames")
    return end_s, frames, damage.notes()


class _Damage:
    """The stream's frames, decoded through what can be skipped, counting it."""

    def __init__(self) -> None:
        self.packets = self.skipped = 0
        self.out_of_order = 0  # frames left out: their time went back or repeated
        self.cut_short = False

    def frames(
        self, container: av.container.InputContainer, stream: VideoStream
    ) -> Iterator[av.VideoFrame]:
        packets = container.demux(stream)
        while True:
            try:
                packet = next(packets)
            except StopIteration:
                return
            except av.FFmpegError:  # the container breaks off: voice what came before
                self.cut_short = True
                yield from self._decoded(None, stream)
                return
            yield from self._decoded(packet, stream)

    def _decoded(
        self, packet: av.Packet[VideoStream] | None, stream: VideoStream
    ) -> list[av.VideoFrame]:
        self.packets += 1
        try:
            return list(packet.decode() if packet is not None else stream.decode(None))
        except av.InvalidDataError:
            self.skipped += 1
            if (
                self.packets >= MIN_PACKETS_JUDGED
                and self.skipped > MAX_DAMAGED_SHARE * self.packets
            ):
                raise MediaError(
                    f"The video data is corrupt: {self.skipped} of {self.packets} packets cannot "
                    "be decoded.",
                    code="corrupt_data",
                ) from None
            return []

    def notes(self) -> list[str]:
        notes = []
        if self.skipped:
            notes.append(f"{self.skipped} of {self.packets} video packets could not be decoded "
                         "and were skipped")  # fmt: skip
        if self.out_of_order:
            notes.append(f"{self.out_of_order} video frames were left out of the sound: their "
                         "timestamps went back or repeated")  # fmt: skip
        if self.cut_short:
            notes.append("the file breaks off before its end")
        return notes


def _send_batch(conn: Connection, pts: np.ndarray, rgb: np.ndarray, n: int) -> None:
    conn.send(("batch", pts[:n].copy()))
    conn.send_bytes(rgb[:n].reshape(-1).data)  # its buffer: a view, no copy


def _send_quietly(conn: Connection, message: tuple[object, ...]) -> None:
    with contextlib.suppress(OSError):  # the parent is gone; it reports its own error
        conn.send(message)
