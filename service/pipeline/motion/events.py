"""The head's maps for one interval -> contact events, decided as the stream goes.

    HeadMaps(probability [h, w], u [h, w], strength [h, w], material [M, h, w])
    EventPicker(threshold).decide(maps, start_s, end_s) -> list[Peak]

A place fires when its probability reaches the threshold and is the highest of its 3 x 3 cells
(one contact lights a small patch). Its time is start + u * (end - start). A place that fired
stays quiet for REFRACTORY_INTERVALS intervals (and at least MERGE_S) within RADIUS cells: the
head sees a contact from the intervals on either side too, and one contact is one sound.
Peaks at different places closer in time than MERGE_S are one sound as well (two bodies meeting
light both): the most probable is kept. Deterministic; one per stream.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MERGE_S = 0.03  # one onset for contacts closer than this (as the sync reference merges them)
RADIUS = 3  # cells: a place's neighbourhood, for the refractory rule
REFRACTORY_INTERVALS = 1.5
MAX_PEAKS = 4  # per interval: more contacts than this in one frame interval are not told apart
CELL_PX = 8  # picture pixels per cell of the head's maps


@dataclass(frozen=True)
class HeadMaps:
    probability: np.ndarray  # (h, w) in [0, 1]
    u: np.ndarray  # (h, w) in [0, 1]
    strength: np.ndarray  # (h, w)
    material: np.ndarray  # (M, h, w) probabilities


@dataclass(frozen=True)
class Peak:
    time_s: float
    x: float  # picture pixels (the cell's centre)
    y: float
    probability: float
    strength: float
    material: int  # index into the tier's materials
    material_probability: float


def local_peaks(probability: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """(row, col) of cells at or over `threshold` that are the maximum of their 3 x 3, most
    probable first, at most MAX_PEAKS."""
    p = probability
    padded = np.pad(p, 1, constant_values=-1.0)
    h, w = p.shape
    best = np.max(
        np.stack([padded[dy : dy + h, dx : dx + w] for dy in range(3) for dx in range(3)]), axis=0
    )
    rows, cols = np.nonzero((p >= threshold) & (p >= best))
    order = np.argsort(-p[rows, cols], kind="stable")[:MAX_PEAKS]
    return [(int(rows[i]), int(cols[i])) for i in order]


class EventPicker:
    def __init__(self, threshold: float) -> None:
        self.threshold = threshold
        self._recent: list[tuple[float, int, int]] = []  # (quiet until, row, col)
        self._last_s = -np.inf

    def decide(self, maps: HeadMaps, start_s: float, end_s: float) -> list[Peak]:
        """The events of the interval [start_s, end_s), in time order."""
        dt = end_s - start_s
        self._recent = [r for r in self._recent if r[0] > start_s]
        found: list[Peak] = []
        for row, col in local_peaks(maps.probability, self.threshold):
            if any(abs(r - row) <= RADIUS and abs(c - col) <= RADIUS for _, r, c in self._recent):
                continue
            time_s = start_s + float(np.clip(maps.u[row, col], 0.0, 1.0)) * dt
            quiet = max(end_s + REFRACTORY_INTERVALS * dt, time_s + MERGE_S)
            self._recent.append((quiet, row, col))
            m = maps.material[:, row, col]
            found.append(
                Peak(
                    time_s,
                    (col + 0.5) * CELL_PX,
                    (row + 0.5) * CELL_PX,
                    float(maps.probability[row, col]),
                    float(maps.strength[row, col]),
                    int(np.argmax(m)),
                    float(np.max(m)),
                )
            )
        kept: list[Peak] = []
        for peak in found:  # most probable first
            if abs(peak.time_s - self._last_s) >= MERGE_S and all(
                abs(peak.time_s - k.time_s) >= MERGE_S for k in kept
            ):
                kept.append(peak)
        if kept:
            self._last_s = max(k.time_s for k in kept)
        return sorted(kept, key=lambda k: k.time_s)

    def reset(self) -> None:
        """A shot cut: nothing before it holds a place quiet."""
        self._recent.clear()
