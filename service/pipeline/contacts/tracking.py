"""Objects followed from frame to frame: the localiser's detections joined into tracks.

    tracker = Tracker()
    for time_s, detections in frames:
        tracks = tracker.update(time_s, detections)   # the live tracks after this frame

Each frame's detections (engines.models.localiser.peaks, thresholded) are assigned to the live
tracks greedily, nearest first, against where each track's last two positions predict it at
the frame's time (constant velocity over the interval, which the frame rate sets: native frame
times, not a fixed rate). A contact breaks that prediction: a bounce reverses the motion, so a
fast object lands a full stride or more from where it was predicted. Tracks and detections left
over are therefore joined in a second pass, nearest first, by distance from the track's last
sighting: a contact changes an object's direction, not (much more than) its speed, so a
detection within BOUNCE_STRIDES of the track's own stride of its last sighting is the same
object (a track seen once, whose stride is unknown, reaches YOUNG_REACH_PX). A detection
joined to no track starts one; a track unseen for MAX_MISSED frames ends. `reset` forgets every
track (a shot cut: the next picture is another scene, and no motion continues across it).

Deterministic and per stream: one Tracker per stream, not thread-safe.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

MAX_MISSED = 2
MIN_START_SCORE = 0.5  # a new track needs a confident detection; a continuing one less
MIN_SCORE = 0.3
GATE_RADII = 3.0  # how far from its prediction a detection may be, in the object's radii
GATE_MIN_PX = 4.0
BOUNCE_STRIDES = 2.0  # the second pass's reach, in the track's strides per frame interval
YOUNG_REACH_PX = 48.0


@dataclass(frozen=True)
class Detections:
    """One frame's candidates: score (K,), xy (K, 2) model pixels, radius (K,) model pixels,
    materials (K, M) probabilities, size (K,) metres."""

    score: np.ndarray
    xy: np.ndarray
    radius: np.ndarray
    materials: np.ndarray
    size: np.ndarray


@dataclass
class Track:
    """One object's path: a row per frame since it was first seen, in time order; xy is NaN
    (and radius, materials, size repeat the last seen) in frames where it was not found."""

    id: int
    times_s: list[float] = field(default_factory=list)
    xy: list[NDArray[np.float64]] = field(default_factory=list)
    radius: list[float] = field(default_factory=list)
    materials: list[np.ndarray] = field(default_factory=list)
    size: list[float] = field(default_factory=list)
    missed: int = 0
    found: int = 0  # frames where it was found, trimmed rows included
    _seen: list[int] = field(default_factory=list)  # rows where it was found

    def predict(self, time_s: float) -> NDArray[np.float64]:
        last = self._seen[-1]
        if len(self._seen) < 2:
            return self.xy[last]
        before = self._seen[-2]
        dt = self.times_s[last] - self.times_s[before]
        velocity = (self.xy[last] - self.xy[before]) / dt
        return self.xy[last] + velocity * (time_s - self.times_s[last])

    def stride(self) -> float | None:
        """Pixels per frame row between the last two sightings; None when seen once."""
        if len(self._seen) < 2:
            return None
        a, b = self._seen[-2:]
        return float(np.linalg.norm(self.xy[b] - self.xy[a])) / (b - a)

    def gate(self) -> float:
        """How far from its prediction a detection may be: more when it moves fast (its
        prediction is rougher) and when it was not seen for a while."""
        speed = 0.5 * (self.stride() or 0.0)
        return self._size_gate() + speed * (1 + self.missed)

    def reach(self) -> float:
        """The second pass's gate around the last sighting: as far as the object's own speed
        carries it in any direction (a bounce, a deflection)."""
        stride = self.stride()
        if stride is None:
            return max(self._size_gate(), YOUNG_REACH_PX)
        return self._size_gate() + BOUNCE_STRIDES * stride * (1 + self.missed)

    def last_seen(self) -> np.ndarray:
        return self.xy[self._seen[-1]]

    def _size_gate(self) -> float:
        return max(GATE_MIN_PX, GATE_RADII * self.radius[-1])

    def observe(
        self, time_s: float, xy: np.ndarray, radius: float, materials: np.ndarray, size: float
    ) -> None:
        self._seen.append(len(self.times_s))
        self._append(time_s, np.asarray(xy, np.float64), float(radius), materials, float(size))
        self.missed = 0
        self.found += 1

    def miss(self, time_s: float) -> None:
        nan = np.full(2, np.nan)
        self._append(time_s, nan, self.radius[-1], self.materials[-1], self.size[-1])
        self.missed += 1

    def _append(
        self,
        time_s: float,
        xy: NDArray[np.float64],
        radius: float,
        materials: np.ndarray,
        size: float,
    ) -> None:
        self.times_s.append(time_s)
        self.xy.append(xy)
        self.radius.append(radius)
        self.materials.append(np.asarray(materials, np.float64))
        self.size.append(size)

    @property
    def seen(self) -> int:
        """Frames where it was found."""
        return self.found

    def trim(self, keep: int) -> None:
        """Forget all but the newest `keep` rows (a live stream's memory stays bounded); the
        last two sightings stay, for `predict`."""
        drop = len(self.times_s) - keep
        if drop <= 0:
            return
        seen = [r - drop for r in self._seen]
        if (len(seen) >= 2 and seen[-2] < 0) or (seen and seen[-1] < 0):
            return  # not seen for longer than `keep`: it is about to end anyway
        del self.times_s[:drop], self.xy[:drop], self.radius[:drop]
        del self.materials[:drop], self.size[:drop]
        self._seen = [r for r in seen if r >= 0]


class Tracker:
    def __init__(self, max_tracks: int = 6) -> None:
        self.max_tracks = max_tracks
        self.tracks: list[Track] = []
        self.ended: list[Track] = []  # tracks that ended, for offline use; the caller may clear
        self._next_id = 0

    def reset(self) -> None:
        self.ended += self.tracks
        self.tracks = []

    def update(self, time_s: float, found: Detections) -> list[Track]:
        """Join this frame's detections to the tracks; returns the live tracks."""
        keep = found.score >= MIN_SCORE
        xy, radius = found.xy[keep], found.radius[keep]
        score, materials, size = found.score[keep], found.materials[keep], found.size[keep]
        used_t: set[int] = set()
        used_d: set[int] = set()

        def join(pairs: list[tuple[float, int, int, float]]) -> None:
            for distance, t, d, gate in sorted(pairs):
                if t in used_t or d in used_d or distance > gate:
                    continue
                used_t.add(t)
                used_d.add(d)
                self.tracks[t].observe(time_s, xy[d], radius[d], materials[d], size[d])

        join(
            [
                (float(np.linalg.norm(xy[d] - track.predict(time_s))), t, d, track.gate())
                for t, track in enumerate(self.tracks)
                for d in range(len(xy))
            ]
        )
        join(  # what the prediction left: bounces and fast entries
            [
                (float(np.linalg.norm(xy[d] - track.last_seen())), t, d, track.reach())
                for t, track in enumerate(self.tracks)
                if t not in used_t
                for d in range(len(xy))
                if d not in used_d
            ]
        )
        for t, track in enumerate(self.tracks):
            if t not in used_t:
                track.miss(time_s)
        self.ended += [t for t in self.tracks if t.missed > MAX_MISSED]
        self.tracks = [t for t in self.tracks if t.missed <= MAX_MISSED]
        for d in np.argsort(-score):
            if d in used_d or score[d] < MIN_START_SCORE or len(self.tracks) >= self.max_tracks:
                continue
            track = Track(self._next_id)
            self._next_id += 1
            track.observe(time_s, xy[d], radius[d], materials[d], size[d])
            self.tracks.append(track)
        return self.tracks
