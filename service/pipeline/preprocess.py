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

from dataclasses import dataclass

import numpy as np

# Timestamps are rationals (1001/30000) stored as floats: a source frame "at" t_k may come out a
# hair later. Anything within 0.1 ms counts as on time.
_EPS_S = 1e-4
MAX_AGE = 4.0


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
    def __init__(self, fps: int) -> None:
        self.fps = fps
        self.t0: float | None = None
        self.next_index = 0
        self._last_pts: float | None = None
        self._last_rgb: np.ndarray | None = None

    def time_of(self, index: int) -> float:
        assert self.t0 is not None
        return self.t0 + index / self.fps

    def push(self, pts_s: np.ndarray, rgb: np.ndarray) -> ModelFrames | None:
        """Feed source frames (increasing pts); returns the model frames now determined."""
        if len(pts_s) == 0:
            return None
        if self.t0 is None:
            self.t0 = float(pts_s[0])
        out_rgb: list[np.ndarray] = []
        out_age: list[float] = []
        start = self.next_index
        for pts, frame in zip(pts_s.tolist(), rgb, strict=True):
            # Every model time before this frame's pts is shown by the previous frame.
            while self._last_rgb is not None and self.time_of(self.next_index) < pts - _EPS_S:
                self._emit(out_rgb, out_age)
            self._last_pts, self._last_rgb = pts, frame
            # A model time this frame falls on is shown by it, whatever comes next: no wait.
            while self.time_of(self.next_index) <= pts + _EPS_S:
                self._emit(out_rgb, out_age)
        return self._pack(start, out_rgb, out_age)

    def finish(self, num_frames: int) -> ModelFrames | None:
        """Emit the remaining frames up to `num_frames` in total (the clip's duration)."""
        start = self.next_index
        out_rgb: list[np.ndarray] = []
        out_age: list[float] = []
        while self._last_rgb is not None and self.next_index < num_frames:
            self._emit(out_rgb, out_age)
        return self._pack(start, out_rgb, out_age)

    def _emit(self, out_rgb: list[np.ndarray], out_age: list[float]) -> None:
        assert self._last_pts is not None and self._last_rgb is not None
        age = (self.time_of(self.next_index) - self._last_pts) * self.fps
        out_rgb.append(self._last_rgb)
        out_age.append(min(max(age, 0.0), MAX_AGE))
        self.next_index += 1

    @staticmethod
    def _pack(start: int, rgb: list[np.ndarray], age: list[float]) -> ModelFrames | None:
        if not rgb:
            return None
        return ModelFrames(start, np.stack(rgb), np.asarray(age, dtype=np.float32))


def resample_clip(pts_s: np.ndarray, rgb: np.ndarray, *, fps: int, num_frames: int) -> ModelFrames:
    """Whole-clip convenience over the streaming resampler (training data, tests)."""
    resampler = FrameResampler(fps)
    parts = [resampler.push(pts_s, rgb), resampler.finish(num_frames)]
    parts = [p for p in parts if p is not None]
    return ModelFrames(
        0, np.concatenate([p.rgb for p in parts]), np.concatenate([p.age for p in parts])
    )
