"""Per-interval contact scores -> event times: picking per track, merging across tracks.

Everything here is causal: the event of interval k is decided from the scores of intervals
<= k + `after` only, so a detector whose score for interval k reads frames up to k+1+L fires
with L + `after` frames of lookahead past the interval's end.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MERGE_S = 0.03  # as engines.eval.reference.MERGE_S: one onset for contacts closer than this


@dataclass(frozen=True)
class Events:
    """One track's (or a clip's) events: times (E,) s, scores (E,), and `decided` (E,): the
    interval index after whose lookahead each was known (for merging in decision order)."""

    times_s: np.ndarray
    scores: np.ndarray
    decided: np.ndarray

    @staticmethod
    def none() -> Events:
        return Events(np.zeros(0), np.zeros(0), np.zeros(0, np.int64))


def pick(
    score: np.ndarray,
    time_s: np.ndarray,
    threshold: float,
    *,
    after: int = 0,
    refractory_s: float = MERGE_S,
) -> Events:
    """One track's intervals -> its events. Interval k fires when its score reaches
    `threshold`, is not below the previous interval's, is above the next `after` intervals'
    (0: decided at once), and its time is `refractory_s` or more after the track's last
    event (a contact also moves its neighbours' evidence: only its first firing counts)."""
    n = len(score)
    if n == 0:
        return Events.none()
    candidate = score >= threshold
    candidate[1:] &= score[1:] >= score[:-1]
    for d in range(1, after + 1):
        candidate[: n - d] &= score[: n - d] > score[d:]
    times, scores, decided = [], [], []
    last = -np.inf
    for k in np.flatnonzero(candidate):
        if time_s[k] - last >= refractory_s:
            times.append(time_s[k])
            scores.append(score[k])
            decided.append(min(n - 1, k + after))
            last = time_s[k]
    return Events(np.asarray(times, float), np.asarray(scores, float), np.asarray(decided, int))


def merge_tracks(events: list[Events], window_s: float = MERGE_S) -> np.ndarray:
    """Events of all tracks of a clip (on the same frames) -> one sorted list of times, in
    decision order: an event within `window_s` of one already kept is dropped; of events
    decided at the same frame the higher-scoring goes first (two objects hitting each other
    both fire; one sound)."""
    if not events:
        return np.zeros(0)
    times = np.concatenate([e.times_s for e in events])
    scores = np.concatenate([e.scores for e in events])
    decided = np.concatenate([e.decided for e in events])
    kept: list[float] = []
    for i in np.lexsort((-scores, decided)):
        if all(abs(times[i] - t) >= window_s for t in kept):
            kept.append(float(times[i]))
    return np.sort(np.asarray(kept, float))
