"""Reference onsets from the simulator's ground truth: the contact times a listener can hear.

Contacts are impacts and the starts of slides and rolls. A contact counts when the onset
detector, run on the ground-truth track, hears an onset within CONFIRM_S of it: the same ear
judges the reference and the generated track. Contacts closer than MIN_GAP_S merge into one onset
(the first), as two objects meeting give one Impact each at the same instant. The times are the
simulator's contact times, refined below the physics step, so timing errors are measured against
the truth, not against a detector.
"""

from __future__ import annotations

import numpy as np

from engines.eval.onsets import MIN_GAP_S, detect_onsets
from engines.sim.types import SimClip

CONFIRM_S = 0.015
MOVING_MPS = 0.01


def contact_starts(clip: SimClip) -> np.ndarray:
    """Impact times and the times slides and rolls begin, sorted."""
    impacts = np.asarray([impact.time_s for impact in clip.impacts], dtype=np.float64)
    return np.sort(np.concatenate([impacts, track_starts(clip)]))


def track_starts(clip: SimClip) -> np.ndarray:
    """The times slides and rolls begin, over all contact pairs (unsorted)."""
    starts = [motion_starts(t.time_s, t.slide_speed, t.roll_speed) for t in clip.tracks]
    return np.concatenate([np.zeros(0), *starts])


def motion_starts(
    time_s: np.ndarray, slide_speed: np.ndarray, roll_speed: np.ndarray
) -> np.ndarray:
    """The times at which one contact pair's sliding or rolling begins."""
    moving = (slide_speed > MOVING_MPS) | (roll_speed > MOVING_MPS)
    begins = np.flatnonzero(moving & ~np.concatenate([[False], moving[:-1]]))
    return time_s[begins].astype(np.float64)


def reference_onsets(clip: SimClip, truth: np.ndarray, sample_rate: int) -> np.ndarray:
    """Audible contact times in seconds, increasing."""
    return audible(contact_starts(clip), truth, sample_rate)


def audible(times: np.ndarray, truth: np.ndarray, sample_rate: int) -> np.ndarray:
    """The sorted contact `times` the detector hears in `truth`, merged within MIN_GAP_S."""
    heard = detect_onsets(truth, sample_rate)
    onsets: list[float] = []
    for t in times:
        if onsets and t - onsets[-1] < MIN_GAP_S:
            continue
        if len(heard) and np.min(np.abs(heard - t)) <= CONFIRM_S:
            onsets.append(float(t))
    return np.asarray(onsets)
