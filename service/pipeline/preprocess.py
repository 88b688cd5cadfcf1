"""Preprocess stage: decoded frames at the source's timestamps -> frames at the model's rate.

Model frame k stands for time t_k = t0 + k / fps, t0 being the first decoded frame's pts. It takes
the latest source frame shown at t_k (pts <= t_k), which is what a viewer sees at that instant;
mapping by timestamp rather than by index keeps 24, 25, 29.97, 60 fps and variable frame rate
sources on one clock. `age` = (t_k - pts) * fps tells the model how stale that frame is.

Streaming: frame k is final once a source frame with pts >= t_k has arrived (or the stream
ended), so `push` emits frames as soon as they are determined (a source at the model's rate adds
no delay) and `finish` emits the rest.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

# Timestamps are rationals (1001/30000) stored as floats: a source frame "at" t_k may come out a
# hair later. Anything within 0.1 ms counts as on time.
_EPS_S = 1e-4
MAX_AGE = 4.0
MAX_CHUNK_FRAMES = 64  # model frames per piece of `FrameResampler.chunks`


@dataclass(frozen=True)
class ModelFrames:
    """Consecutive model frames starting at index `start`: rgb (n, H, W, 3) uint8, age (n,)."""

    start: int
    rgb: np.ndarray
    age: np.ndarray

    def __len__(self) -> int:
        return len(self.age)


def to_model_input(rgb: np.ndarray) -> np.ndarray:
    """(n, H, W, 3) uint8 -> (n, 3, H, W) float32 in [0, 1]: the encoder's `frames` layout."""
    return np.ascontiguousarray(rgb.transpose(0, 3, 1, 2), dtype=np.float32) * np.float32(1 / 255)


class FrameResampler:
    """`push` / `finish` give the model frames now determined as one ModelFrames; `chunks` /
    `finish_chunks` give them in pieces of at most MAX_CHUNK_FRAMES, lazily, so a long gap
    between two source frames (a still frame held for minutes) is never held in memory at
    once. Times are compared relative to t0: an absolute pts of 1e12 s still resolves frames."""

    def __init__(self, fps: int) -> None:
        self.fps = fps
        self.t0: float | None = None
        self.next_index = 0
        self._last_pts: float | None = None  # relative to t0
        self._last_rgb: np.ndarray | None = None

    def push(self, pts_s: np.ndarray, rgb: np.ndarray) -> ModelFrames | None:
        """Feed source frames (increasing pts); returns the model frames now determined."""
        return _joined(list(self.chunks(pts_s, rgb)))

    def finish(self, num_frames: int) -> ModelFrames | None:
        """Emit the remaining frames up to `num_frames` in total (the clip's duration)."""
        return _joined(list(self.finish_chunks(num_frames)))

    def chunks(self, pts_s: np.ndarray, rgb: np.ndarray) -> Iterator[ModelFrames]:
        """Lazily, the frames; `t0` is set at once (a caller needs it before iterating)."""
        if len(pts_s) and self.t0 is None:
            self.t0 = float(pts_s[0])
        return self._chunks(pts_s, rgb)

    def _chunks(self, pts_s: np.ndarray, rgb: np.ndarray) -> Iterator[ModelFrames]:
        if len(pts_s) == 0:
            return
        assert self.t0 is not None
        out = _Out(self.next_index)
        for pts, frame in zip(pts_s.tolist(), rgb, strict=True):
            at = pts - self.t0
            # Every model time before this frame's pts is shown by the previous frame.
            while self._last_rgb is not None and self.next_index / self.fps < at - _EPS_S:
                yield from self._emit(out)
            self._last_pts, self._last_rgb = at, frame
            # A model time this frame falls on is shown by it, whatever comes next: no wait.
            while self.next_index / self.fps <= at + _EPS_S:
                yield from self._emit(out)
        yield from out.flush()

    def finish_chunks(self, num_frames: int) -> Iterator[ModelFrames]:
        out = _Out(self.next_index)
        while self._last_rgb is not None and self.next_index < num_frames:
            yield from self._emit(out)
        yield from out.flush()

    def _emit(self, out: _Out) -> Iterator[ModelFrames]:
        assert self._last_pts is not None and self._last_rgb is not None
        age = (self.next_index / self.fps - self._last_pts) * self.fps
        out.add(self._last_rgb, min(max(age, 0.0), MAX_AGE))
        self.next_index += 1
        if len(out.age) >= MAX_CHUNK_FRAMES:
            yield from out.flush()


class _Out:
    """Model frames being gathered, from index `start`."""

    def __init__(self, start: int) -> None:
        self.start = start
        self.rgb: list[np.ndarray] = []
        self.age: list[float] = []

    def add(self, rgb: np.ndarray, age: float) -> None:
        self.rgb.append(rgb)
        self.age.append(age)

    def flush(self) -> Iterator[ModelFrames]:
        if self.rgb:
            yield ModelFrames(self.start, np.stack(self.rgb), np.asarray(self.age, np.float32))
            self.start += len(self.rgb)
            self.rgb, self.age = [], []


def _joined(parts: list[ModelFrames]) -> ModelFrames | None:
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return ModelFrames(
        parts[0].start,
        np.concatenate([p.rgb for p in parts]),
        np.concatenate([p.age for p in parts]),
    )


def resample_clip(pts_s: np.ndarray, rgb: np.ndarray, *, fps: int, num_frames: int) -> ModelFrames:
    """Whole-clip convenience over the streaming resampler (training data, tests)."""
    resampler = FrameResampler(fps)
    parts = [resampler.push(pts_s, rgb), resampler.finish(num_frames)]
    found = [p for p in parts if p is not None]
    return ModelFrames(
        0, np.concatenate([p.rgb for p in found]), np.concatenate([p.age for p in found])
    )
