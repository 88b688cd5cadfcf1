"""The offline path: model frames of a clip of any length -> its Foley track, window by window.

Every stage is time-invariant with a bounded receptive field (service.pipeline.contract), so a
window computed with enough context on both sides gives exactly the samples a single pass over the
whole clip would: joins are exact (no crossfade, no click, no level jump), and memory is bounded by
the window size whatever the clip's length.

- encoder: runs as frames arrive, on the new frames plus the one before them (its left context);
  features are kept only as long as a future window still needs them.
- generator + vocoder: per window of `window_frames` own frames, on features
  [start - left, end + right) clipped to the clip; the window's own samples are cut out.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from service.pipeline.backends.base import Backend
from service.pipeline.contract import TierConfig
from service.pipeline.preprocess import ModelFrames, to_model_input

# 10 s at 30 fps. Each window recomputes its context (the preview tier: ~70 frames, 2.3 s of
# contact ringing and history); 150-frame windows overlap more of the work with decoding but
# recompute more, and measured slower end to end (0.415 s against 0.385 s, bench.offline).
DEFAULT_WINDOW_FRAMES = 300


class StageTimer:
    """Seconds spent per stage, summed over a render."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start


class OfflineSynth:
    """Feed `ModelFrames` in order with `push`, then `finish`; both yield audio chunks in order.

    Not thread-safe: one instance per render.
    """

    def __init__(
        self,
        tier: TierConfig,
        backend: Backend,
        *,
        timer: StageTimer | None = None,
        window_frames: int = DEFAULT_WINDOW_FRAMES,
    ) -> None:
        self.tier, self.backend = tier, backend
        self.timer = timer or StageTimer()
        self.window = window_frames
        self.left = tier.left_context_frames - tier.encoder.left_context
        self.right = tier.right_context_frames - tier.encoder.right_context
        self._features = np.zeros((0, tier.feature_dim), np.float32)
        self._features_start = 0  # clip index of self._features[0]
        # The encoder's left context: the last frames pushed, fed again before the next ones.
        self._context_rgb = np.zeros((0, tier.height, tier.width, 3), np.uint8)
        self._context_age = np.zeros(0, np.float32)
        self._next_window = 0

    @property
    def _features_end(self) -> int:
        return self._features_start + len(self._features)

    def push(self, frames: ModelFrames) -> Iterator[np.ndarray]:
        if frames.start != self._features_end:
            raise ValueError(f"frames start at {frames.start}, expected {self._features_end}")
        self._encode(frames)
        while self._next_window + self.window + self.right <= self._features_end:
            yield self._synthesize(self._next_window, self._next_window + self.window)

    def finish(self, num_frames: int, num_samples: int) -> Iterator[np.ndarray]:
        """Flush the last windows; the track ends at `num_samples` (the video's duration)."""
        if self._features_end != num_frames:
            raise ValueError(f"{self._features_end} frames pushed, clip has {num_frames}")
        emitted = self._next_window * self.tier.samples_per_frame
        while self._next_window < num_frames:
            end = min(self._next_window + self.window, num_frames)
            chunk = self._synthesize(self._next_window, end)
            chunk = chunk[: max(0, num_samples - emitted)]
            emitted += len(chunk)
            yield chunk

    def _encode(self, frames: ModelFrames) -> None:
        skip = len(self._context_age)
        rgb = np.concatenate([self._context_rgb, frames.rgb])
        age = np.concatenate([self._context_age, frames.age]).astype(np.float32)
        with self.timer("preprocess"):
            pixels = to_model_input(rgb)[None]
        with self.timer("encoder"):
            out = self.backend.run("encoder", {"frames": pixels, "age": age[None]})["features"]
        keep = max(0, len(age) - self.tier.encoder.left_context)
        self._context_rgb, self._context_age = rgb[keep:], age[keep:]
        keep_from = max(0, self._next_window - self.left) - self._features_start
        self._features = np.concatenate([self._features[keep_from:], out[0, skip:]])
        self._features_start += keep_from

    def _synthesize(self, start: int, end: int) -> np.ndarray:
        lo = max(0, start - self.left)
        hi = min(self._features_end, end + self.right)
        feats = self._features[lo - self._features_start : hi - self._features_start]
        with self.timer("generator"):
            mel = self.backend.run("generator", {"features": feats[None]})["mel"]
        with self.timer("vocoder"):
            audio = self.backend.run("vocoder", {"mel": mel})["audio"][0]
        spf = self.tier.samples_per_frame
        self._next_window = end
        return audio[(start - lo) * spf : (end - lo) * spf]


def synthesize_clip(
    frames: ModelFrames, *, tier: TierConfig, backend: Backend, num_samples: int | None = None
) -> np.ndarray:
    """Single pass over a whole clip (no windows): the reference the windowed path must equal."""
    pixels = to_model_input(frames.rgb)[None]
    feats = backend.run("encoder", {"frames": pixels, "age": frames.age[None]})["features"]
    mel = backend.run("generator", {"features": feats})["mel"]
    audio = backend.run("vocoder", {"mel": mel})["audio"][0]
    return audio if num_samples is None else audio[:num_samples]
