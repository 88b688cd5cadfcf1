"""Rolling and sliding: a continuous layer whose level follows the speed of what glides.

    Glide per decided interval (the head's `glide`, `slowing`, `glide_x`, `glide_y`)
        -> GlideLayer.add: segments (a glide starts at ON_PX and ends where it stays under
           OFF_PX for two intervals: one may be the flow losing it), judged on their first
           CONFIRM_S: a glide goes straight and does not speed up, as a body moving over a
           surface does, where a swung, thrown or falling one turns or gains speed; a glide is
           a slide if it slows by SLIDE_SLOWING or more, else a roll, with start and end markers
        -> GlideLayer.take(n): noise, low rumble for rolling and a brighter scrape for sliding,
           at an amplitude proportional to the speed (the mean of the last SPEED_INTERVALS),
           as the simulator's sound model makes them (engines.audio.contact), eased over EASE_S
           so a glide fades in and out rather than starting like a hit

A segment is silent until it is judged: the layer starts CONFIRM_S after the motion does (its
start marker has the motion's own time). A body sliding on friction slows by a roughly
constant deceleration, several per cent of its speed per 1/30 s at the speeds seen here; a
rolling one hardly slows.

Streaming: intervals are added in order, each before its samples are taken (the motion synth
emits audio only up to the oldest undecided interval); the noise of sample n depends only on n
and the easing carries its state, so the layer is the same however the stream is chunked (to
float rounding). Numpy only: the service's runtime has no signal library. Not thread-safe (one
per stream).
"""

from __future__ import annotations

import functools
from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from service.pipeline.types import ContactMarker, MarkerKind

ON_PX = 1.5  # px per 1/30 s an interval must glide at to start a segment
OFF_PX = 1.0  # and under which a segment ends
CONFIRM_S = 0.25  # motion a segment is judged on before it is heard (_Segment.judge)
MAX_TURN_RATE = 1.0  # rad/s its heading may turn at (a swung stick turns at several)
MAX_SPEEDING_UP = 0.05  # share of speed per 1/30 s it may gain (a fall gains 0.1 and more)
SPEED_INTERVALS = 3  # its level follows the mean speed of its last this many
SLIDE_SLOWING = 0.065  # median share of speed lost per 1/30 s from which a glide is a slide
LEVEL_PER_PX = 0.002  # amplitude per px per 1/30 s of speed: well under the hits it must not mask
MAX_LEVEL = 0.05  # a fast pan of a busy scene is heard, not deafening
EASE_S = 0.05  # the level's time constant
ROLL_HZ = 300.0  # rolling: noise under this
SLIDE_HZ = (900.0, 4500.0)  # sliding: this band
NOISE_PERIOD = 2**19  # samples of each band's noise before it repeats (11 s at 48 kHz)


@dataclass(frozen=True)
class Glide:
    """What the head read of one decided interval: seconds from the first frame, the speed of
    its gliding blocks (px per 1/30 s; 0: nothing glides), the share of speed they lose per
    1/30 s and their heading (a unit vector in the picture, y down)."""

    start_s: float
    end_s: float
    speed: float
    slowing: float
    heading: tuple[float, float] = (0.0, 0.0)


GlideKind = Literal["roll", "slide"]
# A glide's start and end on the timeline.
MARKS: dict[GlideKind, tuple[MarkerKind, MarkerKind]] = {
    "roll": ("roll_start", "roll_end"),
    "slide": ("slide_start", "slide_end"),
}


@dataclass
class _Segment:
    glides: list[Glide] = field(default_factory=list)  # its last CONFIRM_S, until judged a glide
    kind: GlideKind | None = None  # once judged a glide
    speeds: list[float] = field(default_factory=list)  # the last few intervals' speeds
    off_s: float | None = None  # the start of an interval it did not glide in, the last one

    @property
    def seen_s(self) -> float:
        return sum(g.end_s - g.start_s for g in self.glides)

    def judge(self) -> GlideKind | None:
        """A glide goes straight and does not speed up: a body moving over a surface has no
        force across its path and none driving it on, where a swung, thrown or falling one
        turns or gains speed."""
        first, last = self.glides[: len(self.glides) // 2], self.glides[len(self.glides) // 2 :]
        a, b = (np.mean([g.heading for g in half], axis=0) for half in (first, last))
        cos = float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-9))
        turn_rate = float(np.arccos(np.clip(cos, -1.0, 1.0))) / max(self.seen_s / 2, 1e-3)
        slowing = float(np.median([g.slowing for g in self.glides]))
        if turn_rate > MAX_TURN_RATE or slowing < -MAX_SPEEDING_UP:
            return None
        self.kind = "slide" if slowing >= SLIDE_SLOWING else "roll"
        return self.kind


class GlideLayer:
    def __init__(self, sample_rate: int) -> None:
        self.sample_rate = sample_rate
        self.taken = 0
        # The segments' start and end markers so far; a start is made once the segment is
        # judged a glide (CONFIRM_S in), with the segment's own time.
        self.markers: list[ContactMarker] = []
        self._segment: _Segment | None = None
        self._level = 0.0
        # Amplitude targets from each interval's first sample on: (sample, roll, slide).
        self._steps: deque[tuple[int, float, float]] = deque([(0, 0.0, 0.0)])
        self._keep = np.exp(-1.0 / (EASE_S * sample_rate))  # the easing's pole
        self._eased = np.zeros(2)  # the (roll, slide) amplitude at the last sample taken

    def add(self, glide: Glide) -> None:
        """Take one decided interval."""
        segment = self._segment
        if segment is None:
            if glide.speed < ON_PX:
                return self._step(glide.start_s, 0.0, None)
            segment = self._segment = _Segment()
        if glide.speed < OFF_PX:
            if segment.off_s is not None:  # two intervals without: it stopped at the first
                return self._end(segment, segment.off_s, glide.start_s)
            segment.off_s = glide.start_s  # one may be the flow losing it: the level holds
            return self._step(glide.start_s, self._level, segment.kind)
        segment.off_s = None
        segment.speeds = [*segment.speeds[-(SPEED_INTERVALS - 1) :], glide.speed]
        if segment.kind is None:  # judged on its last CONFIRM_S until it passes
            segment.glides.append(glide)
            while segment.seen_s - (glide.end_s - glide.start_s) >= CONFIRM_S - 1e-9:
                del segment.glides[0]
            if segment.seen_s >= CONFIRM_S - 1e-9 and (kind := segment.judge()) is not None:
                self.markers.append(ContactMarker(segment.glides[0].start_s, MARKS[kind][0]))
        voiced = segment.kind is not None
        self._level = min(MAX_LEVEL, LEVEL_PER_PX * float(np.mean(segment.speeds))) * voiced
        return self._step(glide.start_s, self._level, segment.kind)

    def finish(self, end_s: float) -> None:
        """End a segment still open at the stream's end."""
        if self._segment is not None:
            self._end(self._segment, self._segment.off_s or end_s, end_s)

    def _end(self, segment: _Segment, at_s: float, silent_from_s: float) -> None:
        """End `segment` at `at_s` (its marker); the level falls from `silent_from_s`, which is
        never before audio already taken (the interval it held through is out)."""
        if segment.kind is not None:
            self.markers.append(ContactMarker(at_s, MARKS[segment.kind][1]))
        self._segment, self._level = None, 0.0
        self._step(silent_from_s, 0.0, None)

    def _step(self, start_s: float, level: float, kind: GlideKind | None) -> None:
        start = round(start_s * self.sample_rate)
        if start < self.taken:
            raise ValueError(f"a level from {start_s:.6f} s, after its samples were taken")
        slide = level if kind == "slide" else 0.0
        self._steps.append((start, level - slide, slide))

    def take(self, n: int) -> np.ndarray:
        """The next n samples (float64, unlimited: the caller mixes and limits)."""
        start = self.taken
        steps = self._steps
        while len(steps) > 1 and steps[1][0] <= start:
            steps.popleft()
        levels = np.empty((2, n))
        for i, (at, roll, slide) in enumerate(steps):
            lo = max(at - start, 0)
            hi = min(steps[i + 1][0] - start if i + 1 < len(steps) else n, n)
            if hi > lo:  # one pole towards the step's level: y[k] = T + (y[0] - T) keep^k
                target = np.array([roll, slide])
                decay = self._keep ** np.arange(1, hi - lo + 1)
                levels[:, lo:hi] = target[:, None] + (self._eased - target)[:, None] * decay
                self._eased = levels[:, hi - 1].copy()
        self.taken += n
        roll_noise, slide_noise = _bands(self.sample_rate)
        phase = (start + np.arange(n)) % NOISE_PERIOD
        out: np.ndarray = levels[0] * roll_noise[phase] + levels[1] * slide_noise[phase]
        return out


@functools.cache
def _bands(sample_rate: int) -> tuple[np.ndarray, np.ndarray]:
    """One period each of the rolling and the sliding noise at unit RMS, shared by every stream:
    white noise shaped in frequency (second-order Butterworth magnitudes: a low-pass at ROLL_HZ;
    a high-pass and a low-pass at SLIDE_HZ's edges), circularly, so the period joins without a
    seam; sample n's noise depends on n alone."""
    white = np.fft.rfft(np.random.default_rng(7).standard_normal(NOISE_PERIOD))
    f = np.fft.rfftfreq(NOISE_PERIOD, 1.0 / sample_rate)
    low, high = SLIDE_HZ
    roll = 1.0 / np.sqrt(1.0 + (f / ROLL_HZ) ** 4)
    slide = 1.0 / np.sqrt(1.0 + (low / np.maximum(f, 1e-9)) ** 4) / np.sqrt(1.0 + (f / high) ** 4)
    bands = []
    for shape in (roll, slide):
        x = np.fft.irfft(white * shape, NOISE_PERIOD)
        bands.append((x / np.sqrt(np.mean(x**2))).astype(np.float32))
    return bands[0], bands[1]
