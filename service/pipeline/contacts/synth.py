"""Frames at their own times in, contact sounds out: the `contacts` tier's stream.

    frames -> cut detection -> localiser (objects per frame) -> tracker (objects across frames)
           -> registration (each tracked object's motion from the pictures, sub-pixel)
           -> contact head per track and interval -> events (time, strength, material, size)
           -> renderer (each attack on its sample)

Per pushed frame n (time t_n from the stream's first frame), every live track's interval
k = n - 2 - lookahead is decided: the head reads the track's frames up to k + 1 + lookahead.
An interval fires when its probability reaches the head's threshold, is not below the track's
previous interval's, comes at least MERGE_S after the track's last event
(service.pipeline.contacts.events.pick, run live), and the object was inside the picture over
the interval's approach (service.pipeline.contacts.picture: an object the frame's edge cuts is
seen only in part, and its motion there bends where the object's does not). Across tracks, an
event within MERGE_S of one already kept is dropped (two objects hitting each other: one sound).
A shot cut ends every track and the localiser does not compare across it, so a cut is never
heard.

A contact decided at frame n happens no earlier than t_k - (t_k+1 - t_k) (the head's u > -1), so
once frame n is in, the audio before that bound for the next interval is final and goes out.
`finish` decides the intervals the lookahead still held back (the frames after the clip count as
missing) and ends the track at the clip's duration.

Strength: the contact's impulse as service.pipeline.contacts.strength estimates it from the
track. Material: the track's material probabilities, averaged over the frames around it; size
(which sets the pitch): the median of the localiser's sizes over the same frames.

Memory: tracks keep the frames the head reads (features.history), the renderer the rings it has
started. Deterministic; not thread-safe (one instance per stream).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from service.pipeline.backends.base import Backend
from service.pipeline.contacts import strength
from service.pipeline.contacts.cuts import CutDetector
from service.pipeline.contacts.events import MERGE_S
from service.pipeline.contacts.features import history, tracks_features
from service.pipeline.contacts.picture import PictureBox
from service.pipeline.contacts.refine import steady
from service.pipeline.contacts.render import Event, EventRenderer, ModalVoices
from service.pipeline.contacts.tier import ContactTier
from service.pipeline.contacts.tracking import Detections, Track, Tracker
from service.pipeline.event_stream import EventStream
from service.pipeline.streaming import StageTimer
from service.pipeline.types import ContactMarker

MIN_TRACK_FRAMES = 4  # an object seen fewer times is not trusted to make a sound
APPROACH_FRAMES = 3  # frames k-2..k: where the object must be inside the picture for k to fire
# The first frames after a shot cut show no object's approach yet, so a contact is not told from
# the new shot beginning: nothing before its SHOT_SETTLE_FRAMES-th frame sounds. (The stream's
# own start is not a cut: an object launched as the clip begins is heard.)
SHOT_SETTLE_FRAMES = 4


@dataclass
class _TrackState:
    decided: int = -1  # the newest interval decided, in the track's own row numbers
    last_probability: float = 0.0
    last_event_s: float = -np.inf
    trimmed: int = 0  # rows the tracker dropped from the front


@dataclass(frozen=True)
class Frames:
    """Frames of one push, ready for the localiser: times from the stream's first frame, which
    are shot cuts, and the localiser's inputs."""

    times: np.ndarray
    cut: np.ndarray
    inputs: dict[str, np.ndarray]


def detections(found: dict[str, np.ndarray], k: int) -> Detections:
    """Frame k's objects from the localiser's outputs, for the tracker."""
    return Detections(
        found["score"][k],
        found["xy"][k].astype(np.float64),
        found["radius"][k],
        found["materials"][k],
        found["size"][k],
    )


def track_frame(
    tracker: Tracker, time_s: float, frames: Frames, found: dict[str, np.ndarray], k: int
) -> None:
    """Frame k's objects into the tracks, each tracked object's newest position steadied by
    registering it from the frame before."""
    tracker.update(time_s, detections(found, k))
    steady(tracker.tracks, frames.inputs["previous"][k], frames.inputs["frames"][k])


def locate(backend: Backend, frames: list[Frames]) -> list[dict[str, np.ndarray]]:
    """The localiser once for several streams' frames; each stream's objects."""
    inputs = {k: np.concatenate([f.inputs[k] for f in frames]) for k in ("frames", "previous")}
    found = backend.run("localiser", inputs)
    bounds = np.cumsum([0] + [len(f.times) for f in frames])
    return [{k: v[a:b] for k, v in found.items()} for a, b in itertools.pairwise(bounds)]


@dataclass(frozen=True)
class FiredEvent:
    """An event as fired: the rendered Event (its source is the track it came from) and the
    head's probability."""

    event: Event
    probability: float


class ContactSynth(EventStream[ContactTier, FiredEvent]):
    """The `contacts` kind's stream (service.pipeline.event_stream): objects located, tracked
    and their contacts decided by the head, each voiced by its material's modes."""

    def __init__(
        self, tier: ContactTier, backend: Backend, *, timer: StageTimer | None = None
    ) -> None:
        renderer = EventRenderer(ModalVoices(tier.renderer, tier.sample_rate))
        super().__init__(tier, backend, renderer, timer)
        self.config = tier.head_config
        self.keep = history(self.config) + 2
        self.cuts = CutDetector()
        self.picture = PictureBox()
        self.tracker = Tracker()
        self.times: list[float] = []  # the last few frame times, from t0
        self.previous: np.ndarray | None = None
        self.states: dict[int, _TrackState] = {}
        self._kept: list[float] = []  # recent event times, for merging across tracks
        self._shot_frames = 0  # frames since the last cut
        self._settled_s = -np.inf  # events before this time (after a cut) stay silent

    @property
    def event_times_s(self) -> tuple[float, ...]:
        return tuple(f.event.time_s for f in self.fired)

    @property
    def markers(self) -> tuple[ContactMarker, ...]:
        """The events fired, in time order, as the timeline sees them."""
        return tuple(
            self.marker_of(e) for e in sorted((f.event for f in self.fired), key=lambda e: e.time_s)
        )

    def marker_of(self, event: Event) -> ContactMarker:
        return ContactMarker(
            event.time_s, "impact", event.impulse, self.tier.materials[event.material]
        )

    def push(self, pts_s: np.ndarray, rgb: np.ndarray) -> Iterator[np.ndarray]:
        """The frames are taken at once (not lazily); the audio that became final comes out in
        pieces of at most a second as the result is iterated."""
        frames = self.prepare(pts_s, rgb)
        if frames is None:
            return iter(())
        with self.timer("localiser"):
            found = self.backend.run("localiser", frames.inputs)
        return self.follow(frames, found)

    def prepare(self, pts_s: np.ndarray, rgb: np.ndarray) -> Frames | None:
        """The localiser's input for these frames (`push` in two halves, so a caller can run
        the localiser once for several streams: `locate`)."""
        if not len(pts_s):
            return None
        if self.t0 is None:
            self.t0 = float(pts_s[0])
        times = np.asarray(pts_s, np.float64) - self.t0
        if (self.times and times[0] <= self.times[-1]) or np.any(np.diff(times) <= 0):
            raise ValueError("frames must come in increasing time order")
        with self.timer("preprocess"):
            cut = np.array([self.cuts.push(f, t) for f, t in zip(rgb, times, strict=True)])
            self.picture.push(rgb)
            x = rgb.astype(np.float32).transpose(0, 3, 1, 2) / np.float32(255.0)
            before = x[:1] if self.previous is None else self.previous[None]
            previous = np.concatenate([before, x[:-1]])
            previous[cut] = x[cut]  # no motion across a cut
            self.previous = x[-1]
        return Frames(times, cut, {"frames": x, "previous": previous})

    def follow(self, frames: Frames, found: dict[str, np.ndarray]) -> Iterator[np.ndarray]:
        """The second half of `push`: the localiser's objects into tracks and events at once,
        then the audio, lazily."""
        with self.timer("contacts"):
            for k, t in enumerate(frames.times):
                if frames.cut[k]:
                    self._end_tracks()
                    self._shot_frames, self._settled_s = 0, np.inf
                self._shot_frames += 1
                if self._shot_frames == SHOT_SETTLE_FRAMES and self._settled_s == np.inf:
                    self._settled_s = float(t)
                track_frame(self.tracker, float(t), frames, found, k)
                self.tracker.ended.clear()
                self.times = [*self.times[-2 - self.config.lookahead :], float(t)]
                self.frames += 1
                self._decide(self.tracker.tracks)
        return self._emit(self._final_s())

    def finish(self, duration_s: float) -> Iterator[np.ndarray]:
        """Decide what the lookahead held back and yield the rest of the track, which ends at
        `duration_s` after the first frame."""
        with self.timer("contacts"):
            self._end_tracks()
        yield from self._emit(duration_s, last=True)

    def _end_tracks(self) -> None:
        """Every live track ends here (the clip's end, a shot cut): its last intervals are
        decided with nothing after them."""
        tracks = self.tracker.tracks
        self._decide(tracks, flush=True)
        self.tracker.reset()
        self.tracker.ended.clear()
        self.states.clear()

    def _decide(self, tracks: list[Track], *, flush: bool = False) -> None:
        rows, owners = [], []
        la = self.config.lookahead
        for track in tracks:
            state = self.states.setdefault(track.id, _TrackState())
            dropped = len(track.times_s)
            track.trim(self.keep)
            dropped -= len(track.times_s)
            state.trimmed += dropped
            n = len(track.times_s)
            newest = n - 2 if flush else n - 2 - la
            first = state.decided - state.trimmed + 1
            if track.seen < MIN_TRACK_FRAMES or newest < max(first, 0):
                state.decided = max(state.decided, newest + state.trimmed)
                continue
            times = np.asarray(track.times_s)
            pixels = np.stack(track.xy)
            ks = np.arange(max(first, 0), newest + 1)
            rows.append((times, pixels, ks))
            owners.append((track, state, ks, times, pixels))
            state.decided = newest + state.trimmed
        if not rows:
            return
        with self.timer("head"):
            out = self.backend.run("head", {"features": tracks_features(rows, self.config)})
        probability, u = out["probability"].astype(np.float64), out["u"].astype(np.float64)
        fired: list[FiredEvent] = []
        i = 0
        for track, state, ks, times, pixels in owners:
            radius = np.asarray(track.radius)
            for k in ks:
                p = probability[i]
                when = times[k] + u[i] * (times[k + 1] - times[k])
                i += 1
                approach = slice(max(0, k + 1 - APPROACH_FRAMES), k + 1)
                fires = (
                    p >= self.config.threshold
                    and p >= state.last_probability
                    and when - state.last_event_s >= MERGE_S
                    and not self.picture.cuts(pixels[approach], radius[approach])
                    and when >= self._settled_s
                )
                state.last_probability = p
                if fires:
                    state.last_event_s = when
                    fired.append(self._event(track, int(k), when, p))
        for f in sorted(fired, key=lambda f: -f.probability):
            if all(abs(f.event.time_s - t) >= MERGE_S for t in self._kept):
                self._kept = [*self._kept[-7:], f.event.time_s]
                self.fired.append(f)
                self.renderer.add(f.event)

    def _looks(self, track: Track, k: int) -> tuple[float, int]:
        """(size in metres, material) of a track's object around frame k."""
        around = slice(max(0, k - 8), k + 2)
        material = int(np.argmax(np.mean(track.materials[around], axis=0)))
        return float(np.median(track.size[around])), material

    def _event(self, track: Track, k: int, when: float, probability: float) -> FiredEvent:
        cues = strength.features(
            np.asarray(track.times_s),
            np.stack(track.xy),
            np.asarray(track.radius),
            k,
            self.config,
            self.tier.height,
        )
        size, material = self._looks(track, k)
        impulse = self.tier.strength.impulse(cues, material, len(self.tier.materials))
        event = Event(max(when, 0.0), impulse, material, source=track.id, size_m=size)
        return FiredEvent(event, probability)

    def _final_s(self) -> float:
        """Audio before this time can no longer change: the next interval any track decides
        starts no earlier than times[-2 - lookahead], and its contact no earlier than one
        interval before that."""
        la, t = self.config.lookahead, self.times
        if len(t) < 2 + la:
            return 0.0
        return max(0.0, 2 * t[-2 - la] - t[-1 - la])
