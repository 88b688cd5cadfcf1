"""Frames at their own times in, contact sounds out: the `motion` tier's stream.

    frames -> MotionDetector (cuts, flow, windows, contact head, events, glides)
           -> events (time + the tier's offset, impulse from the head's strength, material)
              and glides (rolling and sliding: GlideLayer)
           -> EventRenderer: each event through the vocoder (service.pipeline.motion.vocoder),
              its attack on its sample, the layer mixed in

Interval k is decided once frame k + 1 + AHEAD is in; its contacts happen inside it, so once a
frame is in, the audio before the start of the oldest interval still undecided (plus the
tier's offset, where it is negative) is final and goes out. `finish` decides what the
lookahead held back. Deterministic; not thread-safe (one instance per stream).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from service.pipeline.backends.base import Backend
from service.pipeline.contacts.render import Event, EventRenderer
from service.pipeline.event_stream import EventStream
from service.pipeline.motion.detector import MotionDetector, Observed
from service.pipeline.motion.events import Peak
from service.pipeline.motion.flow import Interval, measure
from service.pipeline.motion.layer import GlideLayer
from service.pipeline.motion.tier import MotionTier
from service.pipeline.motion.vocoder import NeuralVoices
from service.pipeline.streaming import StageTimer
from service.pipeline.types import ContactMarker

MAX_IMPULSE = 20.0  # N s: a strength the head reads this far above its reference is clipped
# Shared by every stream of the process: flow is pure, and two threads are what 2 cores hold
# beside the thread that runs the head.
_FLOW_THREADS = ThreadPoolExecutor(2, thread_name_prefix="motion-flow")


@dataclass(frozen=True)
class FiredEvent:
    """An event as fired: the rendered Event and the head's peak it came from."""

    event: Event
    peak: Peak
    named: bool  # whether the material is the head's (else the tier's default voice)


class MotionSynth(EventStream[MotionTier, FiredEvent]):
    """The `motion` kind's stream (service.pipeline.event_stream): contacts read from the
    picture's motion by the head, each voiced by the vocoder, rolling and sliding by the glide
    layer."""

    def __init__(
        self, tier: MotionTier, backend: Backend, *, timer: StageTimer | None = None
    ) -> None:
        self.layer = GlideLayer(tier.sample_rate)
        voices = NeuralVoices(tier.voice, tier.sample_rate, self._vocoder)
        super().__init__(tier, backend, EventRenderer(voices, layer=self.layer), timer)
        self.detector = MotionDetector(tier.width, tier.height, self._head, tier.settings.threshold)
        self._last_s = -math.inf

    @property
    def markers(self) -> tuple[ContactMarker, ...]:
        """Impacts, and the starts and ends of rolling and sliding, in time order."""
        impacts = [self._marker(f) for f in self.fired]
        return tuple(sorted(impacts + self.layer.markers, key=lambda m: m.time_s))

    @property
    def glide_markers(self) -> list[ContactMarker]:
        return self.layer.markers

    def marker_of(self, event: Event) -> ContactMarker:
        """The marker of a fired event (live onsets ask for recent ones: searched from the end)."""
        fired = next(f for f in reversed(self.fired) if f.event is event)
        return self._marker(fired)

    def _marker(self, fired: FiredEvent) -> ContactMarker:
        material = self.tier.materials[fired.event.material] if fired.named else None
        return ContactMarker(fired.event.time_s, "impact", fired.event.impulse, material)

    def push(self, pts_s: np.ndarray, rgb: np.ndarray) -> Iterator[np.ndarray]:
        """The frames are taken at once (not lazily); the audio that became final comes out in
        pieces of at most a second as the result is iterated. `take(observe(...))`: a runner
        of several streams observes them all first, so that the flow of every frame is measured
        at once (`measured`)."""
        observed = self.observe(pts_s, rgb)
        return self.take(observed, measured(observed, self.timer))

    def observe(self, pts_s: np.ndarray, rgb: np.ndarray) -> list[Observed]:
        """The frames' first half: checked, each paired with the one before."""
        if not len(pts_s):
            return []
        if self.t0 is None:
            self.t0 = float(pts_s[0])
        times = np.asarray(pts_s, np.float64) - self.t0
        if times[0] <= self._last_s or np.any(np.diff(times) <= 0):
            raise ValueError("frames must come in increasing time order")
        self._last_s = float(times[-1])
        with self.timer("preprocess"):
            return [self.detector.observe(float(t), f) for t, f in zip(times, rgb, strict=True)]

    def take(
        self, observed: list[Observed], intervals: Iterable[Interval | None]
    ) -> Iterator[np.ndarray]:
        """The second half, each observed frame with its motion: the contacts at once, the
        audio that became final lazily."""
        if not observed:
            return iter(())
        for seen, interval in zip(observed, intervals, strict=True):
            self._fire(self.detector.take(seen, interval))
            self._glide()
            self.frames += 1
        return self._emit(self.detector.undecided_s + min(0.0, self.tier.settings.offset_s))

    def finish(self, duration_s: float) -> Iterator[np.ndarray]:
        """Decide what the lookahead held back and yield the rest of the track, which ends at
        `duration_s` after the first frame."""
        self._fire(self.detector.finish())
        self._glide()
        self.layer.finish(duration_s)
        yield from self._emit(duration_s, last=True)

    def _head(self, windows: np.ndarray) -> dict[str, np.ndarray]:
        with self.timer("head"):
            return self.backend.run("head", {"windows": windows})

    def _vocoder(self, condition: np.ndarray) -> dict[str, np.ndarray]:
        return self.backend.run("vocoder", {"condition": condition})

    def _fire(self, peaks: list[Peak]) -> None:
        settings = self.tier.settings
        for peak in peaks:
            time_s = max(0.0, peak.time_s + settings.offset_s)
            named = peak.material_probability >= settings.material_confidence
            material = (
                peak.material if named else self.tier.materials.index(settings.default_material)
            )
            impulse = min(MAX_IMPULSE, math.exp(peak.strength - settings.reference_strength))
            event = Event(time_s, impulse, material)
            self.fired.append(FiredEvent(event, peak, named))
            with self.timer("vocoder"):  # the network and the bank's samples
                self.renderer.add(event)

    def _glide(self) -> None:
        offset = self.tier.settings.offset_s
        for g in self.detector.take_glides():
            start, end = max(0.0, g.start_s + offset), max(0.0, g.end_s + offset)
            self.layer.add(replace(g, start_s=start, end_s=end))


def measured(observed: list[Observed], timer: StageTimer) -> Iterator[Interval | None]:
    """Each observed frame's motion since the one before, in order. Several frames at once (a
    file's decoded batch, or one frame of each live stream): measured in the flow threads while
    the caller's head reads the ones before, so the flow and the head share the cores; what
    comes out is what one frame at a time gives."""

    def one(seen: Observed) -> Interval | None:
        if seen.pair is None:
            return None
        with timer("preprocess"):
            return measure(seen.pair)

    if len(observed) <= 1:
        return iter([one(o) for o in observed])
    return _FLOW_THREADS.map(one, observed)
