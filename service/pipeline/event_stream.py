"""What the event kinds' streams share (contacts: ContactSynth, motion: MotionSynth).

One stream: `push(pts_s, rgb)` frames in time order (rgb letterboxed to the tier's size), then
`finish(duration_s)`; both give float32 audio chunks at the tier's sample rate, sample 0 at the
first frame, at most a second each. Each event decided goes to the renderer and is kept in
`fired`; rolling and sliding (the glide layer, where the kind has one) are marked as they are
known. Deterministic; not thread-safe (one instance per stream).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import Generic, Protocol, TypeVar

import numpy as np

from service.pipeline.backends.base import Backend
from service.pipeline.contacts.render import Event, EventRenderer
from service.pipeline.contract import EventTier
from service.pipeline.streaming import StageTimer
from service.pipeline.types import ContactMarker


class Fired(Protocol):
    """An event as its kind fired it: the rendered Event, and what the kind knows of it."""

    @property
    def event(self) -> Event: ...


TierT = TypeVar("TierT", bound=EventTier)
FiredT = TypeVar("FiredT", bound=Fired)


class EventStream(ABC, Generic[TierT, FiredT]):
    """One stream of an event kind, as the module states; a kind says how it decides events
    (`push`, `finish`) and what each one is on the timeline (`markers`, `marker_of`)."""

    def __init__(
        self,
        tier: TierT,
        backend: Backend,
        renderer: EventRenderer,
        timer: StageTimer | None,
    ) -> None:
        self.tier, self.backend, self.renderer = tier, backend, renderer
        self.timer = timer or StageTimer()
        self.t0: float | None = None  # the first frame's time: the track's sample 0
        self.fired: list[FiredT] = []
        self.frames = 0

    @property
    @abstractmethod
    def markers(self) -> tuple[ContactMarker, ...]:
        """Every contact sound so far, in time order, as the timeline sees it."""

    @abstractmethod
    def marker_of(self, event: Event) -> ContactMarker:
        """The marker of a fired event."""

    @property
    def glide_markers(self) -> list[ContactMarker]:
        """The starts and ends of rolling and sliding so far, in the order they were known (none
        where the kind has no glide layer)."""
        return []

    @abstractmethod
    def push(self, pts_s: np.ndarray, rgb: np.ndarray) -> Iterator[np.ndarray]:
        """The frames are taken at once (not lazily); the audio that became final comes out as
        the result is iterated."""

    @abstractmethod
    def finish(self, duration_s: float) -> Iterator[np.ndarray]:
        """Decide what the lookahead held back and give the rest of the track, which ends at
        `duration_s` after the first frame."""

    def _emit(self, until_s: float, *, last: bool = False) -> Iterator[np.ndarray]:
        """The audio up to `until_s`, a second at most at a time: a long gap between two frames
        is that much audio, never held at once. `last`: the stream's end, which gives at least
        one (maybe empty) chunk."""
        renderer, end = self.renderer, round(until_s * self.tier.sample_rate)
        if last and end <= renderer.taken:
            yield np.zeros(0, np.float32)
        while renderer.taken < end:
            with self.timer("render"):
                chunk = renderer.take(min(end - renderer.taken, renderer.sample_rate))
            yield chunk
