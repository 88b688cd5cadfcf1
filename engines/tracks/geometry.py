"""The non-learned contact detector on one track, the baseline the learned head is measured
against (engines.tracks.study): the arcs of service.pipeline.contacts.geometry, fired on a
threshold of the velocity jump, segment by segment.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from service.pipeline.contacts.events import Events
from service.pipeline.contacts.geometry import (
    BEFORE,
    LOOKAHEAD,
    fit_arcs,
    narrowed,
    noise_level,
    windows,
)


@dataclass(frozen=True)
class ArcDetector:
    """The geometric detector on one track, run as a live tracker would: interval by interval,
    causal, `lookahead` frames past each interval's end.

    An arc is fitted only to frames of the current segment: after a contact fires, the frames
    before it belong to another arc (an arc fitted across a bounce sees a huge false kink for
    the next `before` frames), so the segment restarts at the frame after the contact; it needs
    `min_before` frames before it can judge again. An interval fires when its velocity change
    (px per frame) reaches `threshold` and `noise_factor` times the track's running noise level
    (`noise_level`, which the detector measures itself; noisier tracks need larger changes).
    """

    # Chosen on validation scenes (seeds 990000+) for the best mean F1 over noise 0-0.5 px.
    threshold: float = 2.5
    before: int = BEFORE
    min_before: int = 3
    lookahead: int = LOOKAHEAD
    refractory_s: float = 0.03
    noise_factor: float = 2.0
    late: float = 0.97  # a kink fitted this close to the interval's end may be the next one's

    def scores(self, times_s: np.ndarray, pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(score, time_s) per interval (N-1,), with the segment restarts of the events
        `events` fires (a score of 0 where the segment is too short)."""
        return self._run(times_s, pixels)[:2]

    def events(self, times_s: np.ndarray, pixels: np.ndarray) -> Events:
        return self._run(times_s, pixels)[2]

    def _run(
        self, times_s: np.ndarray, pixels: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, Events]:
        n = len(times_s) - 1
        w = windows(times_s, pixels, self.before, self.lookahead)
        fits = {b: fit_arcs(narrowed(w, b)) for b in range(self.min_before, self.before + 1)}
        t0, dt = w.t0, w.dt
        bar = np.maximum(
            self.threshold, self.noise_factor * noise_level(times_s, pixels, self.lookahead)
        )
        score = np.zeros(max(n, 0))
        when = np.zeros(max(n, 0))
        times, scores, decided = [], [], []
        start, last = 0, -np.inf
        for k in range(n):
            b = min(self.before, k - start + 1)
            if b < self.min_before:
                when[k] = t0[k] + 0.5 * dt[k]
                continue
            fit = fits[b]
            score[k] = fit.change[k]
            when[k] = t0[k] + fit.u[k] * dt[k]
            fires = score[k] >= bar[k] and fit.u_raw[k] <= self.late
            if fires and when[k] - last >= self.refractory_s:
                times.append(when[k])
                scores.append(score[k])
                decided.append(k)
                last = when[k]
                # The next arc starts at the first frame clearly after the contact (a contact
                # fitted at a frame's time may be just after it).
                start = int(np.searchsorted(times_s, when[k] + 0.25 * dt[k], side="right"))
        events = Events(np.asarray(times, float), np.asarray(scores), np.asarray(decided, int))
        return score, when, events
