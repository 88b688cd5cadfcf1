"""Frames at their own times in, contact events out: the motion-first contact detector.

    frames -> shot cuts -> motion (flow, camera removed; service.pipeline.motion.flow)
           -> windows of intervals (service.pipeline.motion.window) -> contact head
           -> events (service.pipeline.motion.events)

`push(time_s, rgb)` takes one frame (letterboxed into the tier's picture) and returns the events
of the interval it made decidable: interval k (frame k to k + 1) is decided when the frame
after it, k + 1 + AHEAD, is in. A shot cut decides what the last shot held back with nothing
after it, and the new shot starts with no motion; `finish()` does the same at the stream's end.
`push` is `observe`, `measure` and `take`: `observe` (cuts, the frame paired with the last) and
`take` (the head, the events) keep the stream's state and go frame by frame; `measure` (the
flow of a pair, most of the time) is pure, so a caller may measure several frames at once in
other threads (flow.measure).

`head` runs the contact head on a batch of windows [B, WINDOW * CHANNELS, h, w] and answers
probability [B, h2, w2], u [B, h2, w2], strength [B, h2, w2], material [B, M, h2, w2], and,
from a head that reads gliding, glide, slowing, glide_x and glide_y [B]: an ONNX Runtime
session in the service, the torch model in training's own evaluation. Each decided interval's
glide waits in `glides` for the caller to take (`take_glides`).

Deterministic; one per stream; not thread-safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from service.pipeline.contacts.cuts import CutDetector
from service.pipeline.motion.events import EventPicker, HeadMaps, Peak
from service.pipeline.motion.flow import Interval, MotionField, Pair, measure
from service.pipeline.motion.layer import Glide
from service.pipeline.motion.window import AHEAD, BACK, stack, window

HeadFn = Callable[[np.ndarray], dict[str, np.ndarray]]


class Observed(NamedTuple):
    """A frame: its time, whether it starts a shot, and it with the one before (None: the
    shot's first)."""

    time_s: float
    cut: bool
    pair: Pair | None


@dataclass
class _Shot:
    stacks: list[np.ndarray] = field(default_factory=list)  # the shot's intervals, kept recent
    times: list[tuple[float, float]] = field(default_factory=list)
    first: int = 0  # the shot's interval number of stacks[0]
    decided: int = -1  # the last interval decided, in the shot's numbering

    @property
    def count(self) -> int:
        return self.first + len(self.stacks)


class MotionDetector:
    def __init__(self, width: int, height: int, head: HeadFn, threshold: float) -> None:
        self.field = MotionField(width, height)
        self.cuts = CutDetector()
        self.head = head
        self.picker = EventPicker(threshold)
        self.shot = _Shot()
        self._last_s = 0.0
        self.glides: list[Glide] = []

    @property
    def undecided_s(self) -> float:
        """No event still to come can happen before this time: the start of the oldest interval
        not yet decided, or the last frame's time when every interval so far is."""
        shot = self.shot
        j = shot.decided + 1 - shot.first
        return shot.times[j][0] if 0 <= j < len(shot.times) else self._last_s

    def push(self, time_s: float, rgb: np.ndarray) -> list[Peak]:
        observed = self.observe(time_s, rgb)
        return self.take(observed, None if observed.pair is None else measure(observed.pair))

    def observe(self, time_s: float, rgb: np.ndarray) -> Observed:
        cut = self.cuts.push(rgb, time_s)
        return Observed(time_s, cut, self.field.pair(time_s, rgb, cut=cut))

    def take(self, observed: Observed, interval: Interval | None) -> list[Peak]:
        """In frame order, each observed frame with its pair measured: the events it made
        decidable."""
        time_s, cut = observed.time_s, observed.cut
        self._last_s = time_s
        found: list[Peak] = []
        if cut:
            found = self._flush()
            self.shot = _Shot()
            self.picker.reset()
        if interval is not None:
            self._add(interval)
            found += self._decide(self.shot.count - 1 - AHEAD)
        return found

    def finish(self) -> list[Peak]:
        return self._flush()

    def take_glides(self) -> list[Glide]:
        """The decided intervals' glides since the last call, in time order."""
        glides, self.glides = self.glides, []
        return glides

    def _add(self, interval: Interval) -> None:
        shot = self.shot
        shot.stacks.append(stack(interval))
        shot.times.append((interval.start_s, interval.end_s))
        extra = len(shot.stacks) - (BACK + 1 + AHEAD)
        if extra > 0:
            del shot.stacks[:extra], shot.times[:extra]
            shot.first += extra

    def _flush(self) -> list[Peak]:
        return self._decide(self.shot.count - 1)

    def _decide(self, newest: int) -> list[Peak]:
        shot = self.shot
        ks = list(range(shot.decided + 1, newest + 1))
        if not ks:
            return []
        local = [k - shot.first for k in ks]
        batch = np.stack([window(shot.stacks, j) for j in local])
        out = self.head(batch)
        shot.decided = newest
        found: list[Peak] = []
        for i, j in enumerate(local):
            maps = HeadMaps(
                out["probability"][i], out["u"][i], out["strength"][i], out["material"][i]
            )
            found += self.picker.decide(maps, *shot.times[j])
            if "glide" in out:
                speed, slowing = float(out["glide"][i]), float(out["slowing"][i])
                heading = (float(out["glide_x"][i]), float(out["glide_y"][i]))
                self.glides.append(Glide(*shot.times[j], speed, slowing, heading))
        return found
