"""The preview worker: one thread that owns every live session's streams and runs inference for
all of them, a micro-batch at a time.

The event loop only moves bytes: it hands each received frame to `PreviewWorker.submit` and sends
what the worker delivers. The worker thread waits for a frame, gives the other sessions
`batch_window_s` to add theirs, then for every session with input decodes and scales its frames,
and runs the tier's streams on them (service.pipeline.runner: for a frame-rate tier, each stage
once for the whole batch). Outputs go back through each session's `deliver`
callback, which must not block (the transport posts them to its event loop).

Bounded everywhere: at most `max_sessions` sessions (`open` refuses more), at most
`queue_frames` frames waiting per session (`submit` refuses more: the client sends faster than
the service can compute); what happens to a client that does not read is the transport's call.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from service.errors import DeviceOutOfMemory, Problem
from service.media.audio_out import ExactResampler
from service.media.loudness import LiveLevel
from service.pipeline.backends.base import Backend
from service.pipeline.runner import Onset, Piece, create_runner, gather
from service.pipeline.tier import Tier
from service.preview.frames import FrameDecoder
from service.preview.protocol import MAX_FRAME_GAP_S, FrameMessage, SessionConfig

log = logging.getLogger(__name__)
MIN_FRAME_S = 1.0 / 30  # how long a stream's one frame lasts when nothing says otherwise


class Full(Exception):
    """The worker has no room: for another session (`open`) or another frame (`submit`)."""


@dataclass(frozen=True)
class AudioOut:
    """Samples at the session's rate from sample `start` (0 = the first frame's timestamp),
    with the onsets that start in them, and when the frame that completed them arrived."""

    start: int
    samples: np.ndarray
    onsets: list[Onset]  # sample indices at the session's rate
    received_at: float  # time.perf_counter() of the frame that completed this audio
    compute_s: float  # the worker's time for the batch that made it
    batch: int  # sessions in that batch


@dataclass(frozen=True)
class EndOut:
    frames: int
    samples: int


Output = AudioOut | EndOut | Problem  # a Problem: the session failed, and is closed


@dataclass
class Session:
    id: str
    config: SessionConfig
    deliver: Callable[[Output], None]
    decoder: FrameDecoder
    stream: object  # the runner's
    out: ExactResampler
    level: LiveLevel
    onsets: list[Onset] = field(default_factory=list)  # fired, their sample not yet out
    pending: deque[tuple[FrameMessage, float]] = field(default_factory=deque)
    ending: bool = False
    closed: bool = False
    last_pts: float | None = None
    interval_s: float | None = None  # between the last two frames
    samples_out: int = 0
    t0: float = 0.0


class PreviewWorker:
    def __init__(
        self,
        tier: Tier,
        backend: Backend,
        *,
        max_sessions: int,
        queue_frames: int,
        batch_window_s: float,
        static_threshold: float = 0.0,
    ) -> None:
        self.tier = tier
        self.runner = create_runner(tier, backend, static_threshold=static_threshold)
        self.max_sessions, self.queue_frames = max_sessions, queue_frames
        self.batch_window_s = batch_window_s
        self._sessions: dict[str, Session] = {}
        self._wake = threading.Condition()
        self._running = True
        self._thread = threading.Thread(target=self._loop, name="preview-worker", daemon=True)
        self._thread.start()

    # --- called from the event loop ----------------------------------------------------------

    def open(self, config: SessionConfig, deliver: Callable[[Output], None]) -> Session:
        with self._wake:
            if len(self._sessions) >= self.max_sessions:
                raise Full(f"all {self.max_sessions} preview sessions are in use")
            session = Session(
                id=secrets.token_urlsafe(12),
                config=config,
                deliver=deliver,
                decoder=FrameDecoder(
                    config,
                    self.tier.width,
                    self.tier.height,
                    letterbox=self.tier.letterbox,
                ),
                stream=self.runner.open(),
                out=ExactResampler(self.tier.sample_rate, config.sample_rate, "flt"),
                level=LiveLevel(
                    self.tier.sample_rate,
                    self.tier.live_gain_db if config.gain_db is None else config.gain_db,
                ),
            )
            self._sessions[session.id] = session
        return session

    def submit(self, session: Session, frame: FrameMessage, received_at: float) -> None:
        with self._wake:
            if session.ending or session.closed:
                raise ValueError("the session has ended")
            if len(session.pending) >= self.queue_frames:
                raise Full(f"{self.queue_frames} frames are already waiting for this session")
            session.pending.append((frame, received_at))
            self._wake.notify()

    def end(self, session: Session) -> None:
        """No more frames: flush the session's audio, then deliver `EndOut`."""
        with self._wake:
            session.ending = True
            self._wake.notify()

    def close(self, session: Session) -> None:
        """Forget the session (its socket is gone); nothing more is delivered."""
        with self._wake:
            session.closed = True
            self._sessions.pop(session.id, None)

    def stop(self) -> None:
        with self._wake:
            self._running = False
            self._wake.notify()
        self._thread.join(timeout=5)

    @property
    def sessions(self) -> int:
        return len(self._sessions)

    def frames_waiting(self) -> int:
        """Frames received and not yet taken into a batch, over all sessions."""
        with self._wake:
            return sum(len(s.pending) for s in self._sessions.values())

    # --- the worker thread -------------------------------------------------------------------

    def _loop(self) -> None:
        while True:
            with self._wake:
                while self._running and not self._has_work():
                    self._wake.wait()
                if not self._running:
                    return
            # Let other sessions' frames of the same instant join this batch.
            if self.batch_window_s > 0:
                time.sleep(self.batch_window_s)
            with self._wake:
                batch = [
                    (s, list(s.pending), s.ending)
                    for s in self._sessions.values()
                    if s.pending or s.ending
                ]
                for s, _, _ in batch:
                    s.pending.clear()
            try:
                self._run(batch)
            except DeviceOutOfMemory as exc:  # this batch's sessions end; the worker goes on
                log.warning("preview batch: %s", exc.reason)
                for s, _, _ in batch:
                    self._fail(s, exc.code, exc.reason)
            except Exception:
                log.exception("preview batch failed")
                for s, _, _ in batch:
                    self._fail(s, "internal", "inference failed")

    def _has_work(self) -> bool:
        return any(s.pending or s.ending for s in self._sessions.values())

    def _run(self, batch: list[tuple[Session, list[tuple[FrameMessage, float]], bool]]) -> None:
        started = time.perf_counter()
        todo: list[tuple[Session, tuple[np.ndarray, np.ndarray], float]] = []
        for session, frames, _ in batch:
            decoded = self._decoded(session, frames)
            if decoded is not None:
                todo.append((session, decoded, frames[-1][1]))
        streams = [s.stream for s, _, _ in todo]
        chunks = gather(self.runner.push(streams, [d for _, d, _ in todo]), len(todo))
        for session, _, _ in todo:
            session.t0 = self.runner.t0(session.stream) or 0.0
        outputs: list[tuple[Session, Piece, float, int]] = [
            (s, c, received, len(todo)) for (s, _, received), c in zip(todo, chunks, strict=True)
        ]
        enders = [s for s, _, ending in batch if ending and not s.closed]
        ending = self.runner.finish([s.stream for s in enders], [self._duration(s) for s in enders])
        finals = gather(ending, len(enders))
        compute_s = time.perf_counter() - started
        # batch 0: audio flushed at the end, not made for a frame (left out of the statistics).
        for session, chunk, received, size in outputs:
            self._deliver_audio(session, chunk, received, compute_s, size)
        for session, chunk in zip(enders, finals, strict=True):
            self._deliver_audio(session, chunk, time.perf_counter(), compute_s, 0)
            held = session.out.push(session.level.flush())
            tail = np.concatenate([np.zeros(0, np.float32), *held, session.out.flush()])
            if len(tail) or session.onsets:
                now = time.perf_counter()
                session.deliver(
                    AudioOut(session.samples_out, tail, session.onsets, now, compute_s, 0)
                )
                session.samples_out += len(tail)
            session.deliver(EndOut(self.runner.frames(session.stream), session.samples_out))
            self.close(session)

    def _decoded(
        self, session: Session, frames: list[tuple[FrameMessage, float]]
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The session's new frames, decoded and scaled: (pts s, rgb)."""
        good_pts: list[float] = []
        good_rgb: list[np.ndarray] = []
        for frame, _ in frames:
            if session.last_pts is not None and frame.pts_s <= session.last_pts:
                self._fail(
                    session, "bad_timestamp", f"frame {frame.index}: timestamps must increase"
                )
                return None
            if session.last_pts is not None and frame.pts_s - session.last_pts > MAX_FRAME_GAP_S:
                self._fail(
                    session,
                    "frame_gap",
                    f"frame {frame.index} comes {frame.pts_s - session.last_pts:.1f} s after the "
                    f"last (at most {MAX_FRAME_GAP_S:g} s): a seek starts a new session",
                )
                return None
            try:
                rgb = frame.decoded if frame.decoded is not None else session.decoder(frame.payload)
            except ValueError as exc:
                self._fail(session, "bad_frame", f"frame {frame.index}: {exc}")
                return None
            if session.last_pts is not None:
                session.interval_s = frame.pts_s - session.last_pts
            session.last_pts = frame.pts_s
            good_pts.append(frame.pts_s)
            good_rgb.append(rgb)
        if not good_rgb:
            return None
        return np.asarray(good_pts), np.stack(good_rgb)

    def _duration(self, session: Session) -> float:
        """A stream ends at its last frame's end: its timestamp plus the frame interval."""
        if session.last_pts is None:
            return 0.0
        interval = session.interval_s or (1.0 / session.config.fps if session.config.fps else 0)
        return session.last_pts - session.t0 + max(interval, MIN_FRAME_S)

    def _deliver_audio(
        self, session: Session, chunk: Piece, received: float, compute_s: float, batch: int
    ) -> None:
        if session.closed or not len(chunk.audio):
            return
        level = session.level.push(chunk.audio)
        samples = np.concatenate([np.zeros(0, np.float32), *session.out.push(level)])
        rate = session.config.sample_rate / self.tier.sample_rate
        session.onsets += [replace(o, sample=round(o.sample * rate)) for o in chunk.onsets]
        end = session.samples_out + len(samples)
        # The limiter's look-ahead holds a chunk's last samples back: an onset goes out with
        # the audio that holds its first sample.
        onsets = [o for o in session.onsets if o.sample < end]
        session.onsets = [o for o in session.onsets if o.sample >= end]
        session.deliver(AudioOut(session.samples_out, samples, onsets, received, compute_s, batch))
        session.samples_out = end

    def _fail(self, session: Session, code: str, reason: str) -> None:
        if not session.closed:
            session.deliver(Problem(code, reason))
            self.close(session)
