"""The soundtrack of a simulated clip: impacts + contact noise, at a fixed gain, soft-limited.

    synthesize(clip, sample_rate=48000, seed=0) -> (round(duration_s * sample_rate),) float32

Sample 0 is t = 0, the time of the clip's first frame. The gain is global (never per clip) so
loudness carries information: a harder impact is louder in every clip. `GAIN` puts a typical
clip's peak around 0.1-0.4; the rare louder ones are caught by a soft limiter that is the
identity below `LIMIT_KNEE` and stays below `LIMIT_CEILING` < 1.0. Deterministic given (clip, seed).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from engines.audio.contact import render_track
from engines.audio.modal import render_impact
from engines.sim.types import Impact, SimClip
from service.pipeline.contacts.render import soft_limit  # the service renders with the same

GAIN = 0.15


def impact_sounds(
    impacts: Sequence[Impact], *, sample_rate: int, seed: int
) -> Iterator[tuple[int, np.ndarray]]:
    """(first sample, samples) of each impact, as `synthesize` mixes them into the track (before
    its GAIN and soft limit): the same sound for the same (impacts, seed)."""
    for i, impact in enumerate(impacts):
        start, samples = render_impact(
            impact, sample_rate=sample_rate, seed=seed, rng=np.random.default_rng([seed, 3, i])
        )
        yield start, samples


def synthesize(clip: SimClip, *, sample_rate: int = 48000, seed: int = 0) -> np.ndarray:
    """The clip's sound, (round(duration_s * sample_rate),) float32 in (-1, 1)."""
    n = round(clip.duration_s * sample_rate)
    out = np.zeros(n)
    for start, samples in impact_sounds(clip.impacts, sample_rate=sample_rate, seed=seed):
        if start < n:
            m = min(len(samples), n - start)
            out[start : start + m] += samples[:m]
    for i, track in enumerate(clip.tracks):
        out += render_track(
            track,
            n_samples=n,
            sample_rate=sample_rate,
            seed=seed,
            rng=np.random.default_rng([seed, 4, i]),
        )
    return soft_limit(GAIN * out).astype(np.float32)
