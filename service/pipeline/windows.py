"""Content-defined windows over a stream's features: where the window memo cuts.

With the memo on (service.pipeline.memo) the generator and vocoder run window by window, and a
window is reused when the same features come again from the same state. For a trimmed head (the
frame grid shifted by any number of frames) or a repeated motion to meet its windows again, a
cut depends on the content around it, never on a frame's index (content-defined chunking, as in
rsync and restic):

    motion_t = mean |f_t - f_(t-1)| over the feature's dimensions
    cut after t where motion_t is a peak: above every motion in [t - REACH, t) and at least every
    motion in (t, t + REACH], once the window holds MIN_FRAMES; or where it reaches MAX_FRAMES.

A peak of motion, unlike a hash of the features, stays where it is under small noise (the same
motion encoded twice with H.264), so a repeated motion is cut the same way each time. A static
span (forward-filled features, service.pipeline.static) has no motion: it is cut every
MAX_FRAMES from its last peak, so its windows repeat as well. After an edit the cuts fall back
in step with the original's at the first peak both take.

A cut after t is known once t + REACH has arrived, so windows lag the features by REACH frames
(the memo is for offline renders); `finish` cuts what is left. Each window comes with its context:
the up to `context` features before it, all a window's start state depends on (the stages'
receptive fields, see `context_frames`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from service.pipeline.contract import TierConfig

# Windows long enough that the generator and vocoder's cost per call stays small beside the
# frames they voice, and short enough that an edit recomputes little more than itself
# (`python -m bench.caches`, docs/benchmarks.md).
REACH = 4
MIN_FRAMES = 8
MAX_FRAMES = 32


def context_frames(tier: TierConfig) -> int:
    """Generator input frames that the generator and vocoder state at a frame depends on: the
    generator's receptive field, its lookahead, and the vocoder's in video frames."""
    generator, vocoder = tier.generator, tier.vocoder
    return (
        generator.left_context
        + generator.right_context
        + math.ceil(vocoder.left_context / tier.mels_per_frame)
    )


@dataclass(frozen=True)
class Window:
    """Generator input features (n, D), and the features before them (up to the context)."""

    features: np.ndarray
    context: np.ndarray


class WindowCutter:
    """One stream's features in, whole windows out, in order. Not thread-safe."""

    def __init__(self, context: int) -> None:
        self._context_frames = context
        self._context = np.zeros((0, 0), np.float32)  # the features before the pending ones
        self._pending: np.ndarray | None = None  # features since the last cut
        self._motion = np.zeros(0)  # theirs
        self._before = np.zeros(0)  # motion of the REACH frames before them
        self._last: np.ndarray | None = None  # the last feature seen
        self._next = 0  # the first pending frame not yet decided

    def prime(self, features: np.ndarray) -> None:
        """Features the generator took into its state at the stream's start instead of as input
        (its lookahead): the first windows' context."""
        if len(features):
            parts = [self._context, features] if len(self._context) else [features]
            self._context = np.concatenate(parts)[-self._context_frames :]

    def push(self, features: np.ndarray) -> list[Window]:
        """Add features (n, D); returns the windows now complete."""
        if not len(features):
            return []
        previous = features[:1] if self._last is None else self._last[None]
        motion = np.abs(np.diff(features, axis=0, prepend=previous)).mean(axis=1)
        self._last = features[-1]
        if self._pending is None:
            self._pending = features
        else:
            self._pending = np.concatenate([self._pending, features])
        self._motion = np.concatenate([self._motion, motion])
        return self._cut(final=False)

    def finish(self) -> list[Window]:
        """The remaining windows, the last one possibly shorter than MIN_FRAMES."""
        windows = self._cut(final=True)
        if self._pending is not None and len(self._pending):
            windows.append(self._take(len(self._pending)))
        self._next = 0
        return windows

    def _cut(self, *, final: bool) -> list[Window]:
        windows: list[Window] = []
        t = self._next
        while self._pending is not None and t < len(self._pending):
            if not final and t + REACH >= len(self._pending):
                break
            if t + 1 >= MAX_FRAMES or (t + 1 >= MIN_FRAMES and self._peak(t)):
                windows.append(self._take(t + 1))
                t = 0
            else:
                t += 1
        self._next = t
        return windows

    def _take(self, n: int) -> Window:
        """The first `n` pending features as a window."""
        assert self._pending is not None
        features = self._pending[:n]
        window = Window(features, self._context)
        if len(self._context):
            features = np.concatenate([self._context, features])
        self._context = features[-self._context_frames :]
        self._before = np.concatenate([self._before, self._motion[:n]])[-REACH:]
        self._pending, self._motion = self._pending[n:], self._motion[n:]
        return window

    def _peak(self, t: int) -> bool:
        m = self._motion
        left = np.concatenate([self._before, m[:t]])[-REACH:]
        right = m[t + 1 : t + 1 + REACH]
        return bool(m[t] > 0 and m[t] > left.max(initial=0.0) and m[t] >= right.max(initial=0.0))
