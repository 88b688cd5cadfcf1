"""Quality metrics of a generated Foley track against the simulator's ground truth, beyond onset
matching (engines.eval.onsets): silence where nothing happens, level that follows the impulse,
continuous sound that follows speed, and spectral closeness against two baselines.

Pure functions of arrays; `bench/eval.py` runs them over a simulated held-out set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from scipy.stats import spearmanr

from engines.eval.onsets import matched_pairs
from engines.models.mel import LogMel
from engines.train.losses import multi_resolution_stft_loss

LEVEL_WINDOW_S = 0.04  # an onset's level: the loudest 5 ms within this much after it
RMS_S = 0.005
QUIET_GUARD_S = 0.1  # time within this of a contact (heard or not) is not "nothing happens"
CLICK_S = 0.01


def rms_db(audio: np.ndarray, sample_rate: int, window_s: float = RMS_S) -> np.ndarray:
    """Level in dBFS per non-overlapping window."""
    n = max(1, round(window_s * sample_rate))
    frames = audio[: len(audio) // n * n].astype(np.float64).reshape(-1, n)
    return 10 * np.log10(np.mean(frames**2, axis=1) + 1e-12)


def onset_levels(audio: np.ndarray, sample_rate: int, times_s: np.ndarray) -> np.ndarray:
    """The level (dBFS) of the loudest 5 ms window in the LEVEL_WINDOW_S after each time."""
    n = round(RMS_S * sample_rate)
    levels = rms_db(audio, sample_rate)
    out = []
    for t in np.asarray(times_s, float):
        first = max(0, int(t * sample_rate) // n)
        last = max(first + 1, int((t + LEVEL_WINDOW_S) * sample_rate) // n)
        window = levels[first:last]
        out.append(float(window.max()) if len(window) else -120.0)
    return np.asarray(out)


def rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho; NaN with fewer than three pairs or a constant side."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return float("nan")
    return float(spearmanr(a, b).statistic)


@dataclass(frozen=True)
class LevelPairs:
    """Matched (ground-truth quantity, generated level in dB) pairs, pooled over clips."""

    truth: np.ndarray
    level_db: np.ndarray

    def __add__(self, other: LevelPairs) -> LevelPairs:
        return LevelPairs(
            np.concatenate([self.truth, other.truth]),
            np.concatenate([self.level_db, other.level_db]),
        )

    @property
    def rho(self) -> float:
        return rank_correlation(self.truth, self.level_db)


def impulse_levels(
    generated: np.ndarray,
    sample_rate: int,
    detected_s: np.ndarray,
    impact_times_s: np.ndarray,
    impulses: np.ndarray,
    tolerance_s: float = 0.05,
) -> LevelPairs:
    """For each impact matched by a detected onset of the generated track: its impulse and the
    generated level there."""
    pairs = matched_pairs(detected_s, impact_times_s, tolerance_s)
    if not pairs:
        return LevelPairs(np.zeros(0), np.zeros(0))
    found = np.asarray([detected_s[i] for i, _ in pairs])
    return LevelPairs(
        np.asarray([impulses[j] for _, j in pairs], float),
        onset_levels(generated, sample_rate, found),
    )


def speed_levels(
    generated: np.ndarray,
    sample_rate: int,
    track_times_s: np.ndarray,
    speed: np.ndarray,
    contact_times_s: np.ndarray,
    bin_s: float = 0.05,
) -> LevelPairs:
    """Continuous contact (rolling, sliding): per `bin_s` bin with the object moving and no
    contact start within QUIET_GUARD_S, the ground-truth speed and the generated level."""
    truth, level = [], []
    levels = rms_db(generated, sample_rate, bin_s)
    for k in range(len(levels)):
        t0, t1 = k * bin_s, (k + 1) * bin_s
        inside = (track_times_s >= t0) & (track_times_s < t1)
        if not inside.any():
            continue
        v = float(speed[inside].mean())
        near = np.abs(np.asarray(contact_times_s) - (t0 + t1) / 2) < QUIET_GUARD_S + bin_s / 2
        if v > 0.02 and not near.any():
            truth.append(v)
            level.append(levels[k])
    return LevelPairs(np.asarray(truth), np.asarray(level))


def spurious_onsets(
    detected_s: np.ndarray,
    contact_times_s: np.ndarray,
    sounding: np.ndarray,
    duration_s: float,
) -> tuple[int, float]:
    """Onsets where nothing happens: (count, seconds of such time). Nothing happens at times
    more than QUIET_GUARD_S from every contact start (heard or not) and outside continuous
    contact (`sounding`: (N, 2) intervals of rolling or sliding)."""
    step = 0.001
    t = np.arange(0.0, duration_s, step)
    quiet = np.ones(len(t), bool)
    for c in np.asarray(contact_times_s, float):
        quiet &= np.abs(t - c) > QUIET_GUARD_S
    for a, b in np.asarray(sounding, float).reshape(-1, 2):
        quiet &= (t < a - QUIET_GUARD_S) | (t > b + QUIET_GUARD_S)
    index = np.clip(np.round(np.asarray(detected_s, float) / step).astype(int), 0, len(t) - 1)
    return int(quiet[index].sum()) if len(index) else 0, float(quiet.sum() * step)


def moving_intervals(track_times_s: np.ndarray, speed: np.ndarray) -> np.ndarray:
    """(N, 2) [start, end) intervals where `speed` (one contact pair) is over 1 cm/s."""
    moving = np.asarray(speed) > 0.01
    edges = np.flatnonzero(np.diff(np.concatenate([[0], moving.astype(int), [0]])))
    step = float(track_times_s[1] - track_times_s[0]) if len(track_times_s) > 1 else 0.01
    starts, ends = edges[::2], edges[1::2]
    return (
        np.stack([track_times_s[starts], track_times_s[ends - 1] + step], axis=1)
        if len(starts)
        else np.zeros((0, 2))
    )


def click_track(onsets_s: np.ndarray, num_samples: int, sample_rate: int) -> np.ndarray:
    """The click baseline: the same short decaying noise burst at every onset."""
    n = round(CLICK_S * sample_rate)
    click = np.random.default_rng(0).standard_normal(n) * np.exp(-np.arange(n) / (n / 5)) * 0.3
    out = np.zeros(num_samples)
    for t in np.asarray(onsets_s, float):
        start = int(t * sample_rate)
        m = max(0, min(n, num_samples - start))
        out[start : start + m] += click[:m]
    return out.astype(np.float32)


@dataclass(frozen=True)
class SpectralDistance:
    log_mel: float  # mean |log-mel difference| (natural log of power)
    stft: float  # multi-resolution STFT loss (spectral convergence + log magnitude)


def spectral_distance(generated: np.ndarray, truth: np.ndarray, mel: LogMel) -> SpectralDistance:
    n = min(len(generated), len(truth))
    g = torch.from_numpy(np.ascontiguousarray(generated[:n], np.float32))[None]
    t = torch.from_numpy(np.ascontiguousarray(truth[:n], np.float32))[None]
    with torch.no_grad():
        log_mel = float((mel(g) - mel(t)).abs().mean())
        stft = float(multi_resolution_stft_loss(g, t))
    return SpectralDistance(log_mel, stft)
