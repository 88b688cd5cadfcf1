"""Decode an uploaded video into model frames, in a child process with a stall deadline.

    open_video(path, width=W, height=H, limits) -> DecodeStream: info, then FrameBatch per batch
        FrameBatch.pts_s  float64 (n,)           presentation times in seconds, strictly increasing
        FrameBatch.rgb    uint8 (n, H, W, 3)     `frames.FrameScaler` of each decoded frame
    probe(path, limits) -> VideoInfo              the same checks, no frame decoded

Malformed files can crash FFmpeg (SIGSEGV) or hang it, so the decoding runs in a child forked
from a forkserver that has already imported av and numpy (see `warm_up`). The parent waits at
most `limits.stall_timeout_s` for each message, then kills the child: `decoder_timeout`. A child
killed by a signal is `decoder_crashed`. Typed errors raised in the child (`MediaError`,
`LimitExceeded`) are re-raised here with the same code.

Thread-safety: each `open_video` call owns its child and pipe; a `DecodeStream` is used by one
thread. Starting children from several threads at once is safe.

Cost: multiprocessing makes each child import the calling program's `__main__` module (by name
under `python -m`), whatever the preload. The service's own programs (`foley`, uvicorn) import
little at the top; a program that imports torch or the simulator there pays about a second per
decode (engines.eval.sync does; bench.tiers imports them late so that its timings are clean).
"""

from __future__ import annotations

import functools
import logging
import math
import multiprocessing
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

import numpy as np

from service.errors import FoleyError, LimitExceeded, MediaError
from service.media import worker
from service.media.source import DecodeLimits, VideoInfo
from service.media.worker import DecodeJob

BATCH_FRAMES = 32  # frames per message from the child: the pipeline's chunk when rendering files

__all__ = ["DecodeLimits", "DecodeStream", "FrameBatch", "VideoInfo", "open_video", "probe"]

log = logging.getLogger(__name__)

# Imported once in the forkserver; each child is a fork of it and starts in milliseconds.
# Not "__main__": the children only run service.media.worker, and re-importing the caller's
# main module there fails for scripts read from stdin and runs import-time side effects twice.
_PRELOAD = ["av", "numpy", "service.media.worker"]
_ERRORS: dict[str, type[FoleyError]] = {"MediaError": MediaError, "LimitExceeded": LimitExceeded}


@dataclass(frozen=True)
class FrameBatch:
    pts_s: np.ndarray  # float64 (n,), presentation times in seconds, increasing
    rgb: np.ndarray  # uint8 (n, height, width, 3), via frames.FrameScaler


@functools.cache
def _context() -> ForkServerContext:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def warm_up() -> None:
    """Start the forkserver now (it imports av and numpy once) rather than on the first upload."""
    process = _context().Process(target=worker.ready, name="foley-decode-warmup", daemon=True)
    process.start()
    process.join()


def open_video(
    path: Path,
    *,
    width: int,
    height: int,
    limits: DecodeLimits,
    batch_size: int = BATCH_FRAMES,
    letterbox: bool = False,
) -> DecodeStream:
    """Start decoding `path`; `info` is checked and available when this returns. Frames come
    out at width x height, stretched, or `letterbox`ed (their display shape kept)."""
    _check_file(path)
    job = DecodeJob(
        str(path), width, height, limits, batch_size, decode_frames=True, letterbox=letterbox
    )
    return _start(job)


def probe(path: Path, *, limits: DecodeLimits) -> VideoInfo:
    """The header checks of `open_video` (isolated the same way), without decoding a frame."""
    _check_file(path)
    job = DecodeJob(str(path), 1, 1, limits, batch_size=1, decode_frames=False)
    with _start(job) as stream:
        for _ in stream:
            pass
        return stream.info


def _check_file(path: Path) -> None:
    if Path(path).stat().st_size == 0:
        raise MediaError("The uploaded file is empty.", code="empty_file")


def _start(
    job: DecodeJob, target: Callable[[Connection, DecodeJob], None] = worker.run
) -> DecodeStream:
    """`target`: the child's code (tests put decoders that crash or hang there)."""
    ctx = _context()
    receiver, sender = ctx.Pipe(duplex=False)
    process = ctx.Process(target=target, args=(sender, job), name="foley-decode", daemon=True)
    process.start()
    sender.close()  # the child holds the only write end: its death is EOF here
    stream = DecodeStream(process, receiver, job)
    try:
        stream._read_info()
    except BaseException:
        stream.close()
        raise
    return stream


class DecodeStream:
    """Context manager and iterator of `FrameBatch`; closing it kills the child if still running.

    `info` is set on open; `end_s` (last frame's pts + its duration), `frames` and `notes`
    (damage the decoder worked around: skipped packets, a file that breaks off) once the
    iteration has ended.
    """

    info: VideoInfo

    def __init__(
        self, process: multiprocessing.process.BaseProcess, conn: Connection, job: DecodeJob
    ) -> None:
        self._process = process
        self._conn = conn
        self._job = job
        self._done = False
        self._closed = False
        self.end_s = math.nan
        self.frames = 0
        self.notes: tuple[str, ...] = ()  # what was wrong with the file and worked around

    def __enter__(self) -> DecodeStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[FrameBatch]:
        while not self._done:
            message = self._receive()
            if message[0] == "batch":
                pts_s = message[1]
                rgb = np.empty((len(pts_s), self._job.height, self._job.width, 3), np.uint8)
                self._receive_into(rgb)
                self.frames += len(pts_s)
                yield FrameBatch(pts_s, rgb)
            elif message[0] == "end":
                _, self.end_s, self.frames, notes = message
                self.notes = tuple(notes)
                self._done = True
                self._process.join(timeout=self._job.limits.stall_timeout_s)
            else:
                raise AssertionError(f"unexpected message {message[0]!r} from the decoder")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._process.exitcode is None:
            self._process.kill()
        self._process.join()
        self._conn.close()
        self._process.close()

    def _read_info(self) -> None:
        message = self._receive()
        if message[0] != "info":
            raise AssertionError(f"expected the video info first, got {message[0]!r}")
        self.info = message[1]

    def _receive(self) -> tuple[Any, ...]:
        self._wait()
        try:
            message: tuple[Any, ...] = self._conn.recv()  # service.media.worker sends tuples
        except (EOFError, OSError):
            raise self._died() from None
        if message[0] == "error":
            _, cls_name, code, reason = message
            self._done = True
            raise _ERRORS.get(cls_name, MediaError)(reason, code=code)
        if message[0] == "bug":
            self._done = True
            raise RuntimeError(f"the decoder process failed:\n{message[1]}")
        return message

    def _receive_into(self, rgb: np.ndarray) -> None:
        self._wait()
        try:
            size = self._conn.recv_bytes_into(rgb.reshape(-1))
        except (EOFError, OSError):
            raise self._died() from None
        if size != rgb.nbytes:
            raise AssertionError(f"batch of {size} bytes, expected {rgb.nbytes}")

    def _wait(self) -> None:
        timeout = self._job.limits.stall_timeout_s
        if not self._conn.poll(timeout):
            self._process.kill()
            self._done = True
            raise MediaError(
                f"The decoder produced nothing for {timeout:g} s and was stopped.",
                code="decoder_timeout",
            )

    def _died(self) -> Exception:
        self._done = True
        self._process.join(timeout=self._job.limits.stall_timeout_s)
        code = self._process.exitcode
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            log.warning("decoder killed by %s on %s", name, self._job.path)
            return MediaError(f"The decoder crashed on this file ({name}).", code="decoder_crashed")
        return RuntimeError(f"the decoder process exited with code {code} and no message")
