"""Onset detection and matching: the sync metric.

The same detector runs on the ground-truth track and on the generated one; a generated onset
matches a reference onset within `tolerance_s` (one-to-one, closest pairs first), as in
CondFoleyGen's onset accuracy. Thresholds are absolute levels, not relative to the clip: a silent
clip must produce no onsets, and a quiet generated track must not have its noise promoted.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

HOP_S = 0.001
WINDOW_S = 0.005
MIN_GAP_S = 0.03
# An onset is a rise of RISE_DB over the loudest level of BASELINE_S before it (ending GAP_S
# before it, so an attack spread over a few ms still counts as one rise). Taking the loudest,
# not the mean, keeps the level wobble of rolling or sliding noise from reading as onsets.
RISE_DB = 10.0
BASELINE_S = (0.012, 0.035)
FLOOR_DB = -55.0  # and the new level reaches at least this (dBFS, RMS over the window)


def level_db(audio: np.ndarray, sample_rate: int) -> tuple[np.ndarray, float]:
    """RMS level in dBFS over WINDOW_S windows every HOP_S; returns (levels, hop seconds)."""
    hop = max(1, round(HOP_S * sample_rate))
    win = max(hop, round(WINDOW_S * sample_rate))
    n = max(0, (len(audio) - win) // hop + 1)
    if n == 0:
        return np.zeros(0), hop / sample_rate
    power = np.convolve(audio.astype(np.float64) ** 2, np.ones(win) / win, mode="valid")[::hop][:n]
    return 10 * np.log10(power + 1e-12), hop / sample_rate


def detect_onsets(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """Onset times in seconds: where the short-time level jumps by RISE_DB above its recent past."""
    levels, hop_s = level_db(audio, sample_rate)
    if len(levels) == 0:
        return np.zeros(0)
    near, far = (round(s / hop_s) for s in BASELINE_S)
    # Before the track starts the level is unknown, not silent: a sound already playing at
    # t = 0 is no onset.
    padded = np.concatenate([np.full(far, levels[0]), levels])
    windows = np.lib.stride_tricks.sliding_window_view(padded, far - near + 1)
    before = windows[: len(levels)].max(axis=1)
    rise = levels - np.maximum(before, FLOOR_DB - RISE_DB)
    candidates = np.flatnonzero((rise >= RISE_DB) & (levels >= FLOOR_DB))
    onsets: list[float] = []
    last = -np.inf
    for i in candidates:
        t = i * hop_s  # window [t, t + WINDOW_S) is the first to carry the new level
        if t - last >= MIN_GAP_S:
            onsets.append(_refine(audio, sample_rate, t))
            last = t
    return np.asarray(onsets)


def _refine(audio: np.ndarray, sample_rate: int, t: float) -> float:
    """Sample-accurate onset inside the detecting window: the first sample whose magnitude
    reaches a fifth of the new peak and stands clear of the background before it."""
    start = max(0, round((t - 0.002) * sample_rate))
    end = min(len(audio), round((t + WINDOW_S + 0.005) * sample_rate))
    segment = np.abs(audio[start:end].astype(np.float64))
    if len(segment) == 0:
        return t
    past = audio[max(0, start - round(0.01 * sample_rate)) : start].astype(np.float64)
    background = float(np.sqrt(np.mean(past**2))) if len(past) else 0.0
    threshold = max(0.2 * float(segment.max()), 4.0 * background)
    first = int(np.argmax(segment >= threshold))
    return (start + first) / sample_rate


@dataclass(frozen=True)
class OnsetScore:
    true_positives: int
    false_positives: int
    false_negatives: int
    errors_s: np.ndarray  # predicted - reference, per match
    ignored: int = 0  # unmatched onsets at a contact that was not required (neither way)

    @property
    def precision(self) -> float:
        return self.true_positives / max(1, self.true_positives + self.false_positives)

    @property
    def recall(self) -> float:
        return self.true_positives / max(1, self.true_positives + self.false_negatives)

    @property
    def f1(self) -> float:
        denom = 2 * self.true_positives + self.false_positives + self.false_negatives
        return 1.0 if denom == 0 else 2 * self.true_positives / denom

    def __add__(self, other: OnsetScore) -> OnsetScore:
        return OnsetScore(
            self.true_positives + other.true_positives,
            self.false_positives + other.false_positives,
            self.false_negatives + other.false_negatives,
            np.concatenate([self.errors_s, other.errors_s]),
            self.ignored + other.ignored,
        )


def combined(scores: list[OnsetScore]) -> OnsetScore:
    """The scores of several clips as one."""
    total = scores[0]
    for score in scores[1:]:
        total = total + score
    return total


def match_onsets(
    predicted: np.ndarray, reference: np.ndarray, tolerance_s: float = 0.05
) -> OnsetScore:
    """One-to-one matching, closest pairs first, pairs further apart than tolerance never match."""
    pairs = matched_pairs(predicted, reference, tolerance_s)
    errors = [predicted[i] - reference[j] for i, j in pairs]
    tp = len(errors)
    return OnsetScore(tp, len(predicted) - tp, len(reference) - tp, np.asarray(errors, float))


@dataclass(frozen=True)
class Reference:
    """What a generated track is scored against: the `required` onsets (s, increasing), which a
    track must hit, and the times of every other simulated contact (`dont_care`), where an onset
    is neither rewarded nor counted false."""

    required: np.ndarray
    dont_care: np.ndarray


def score_onsets(
    predicted: np.ndarray, reference: Reference, tolerance_s: float = 0.05
) -> OnsetScore:
    """`match_onsets` against the required onsets; an unmatched onset within `tolerance_s` of a
    don't-care contact is `ignored`, every other unmatched one is false."""
    pairs = matched_pairs(predicted, reference.required, tolerance_s)
    false = len(false_onsets(predicted, reference, tolerance_s, pairs=pairs))
    errors = np.asarray([predicted[i] - reference.required[j] for i, j in pairs], float)
    return OnsetScore(
        len(pairs),
        false,
        len(reference.required) - len(pairs),
        errors,
        ignored=len(predicted) - len(pairs) - false,
    )


def false_onsets(
    predicted: np.ndarray,
    reference: Reference,
    tolerance_s: float = 0.05,
    *,
    pairs: list[tuple[int, int]] | None = None,
) -> np.ndarray:
    """The onsets `score_onsets` counts false: matching no required onset and further than
    `tolerance_s` from every don't-care contact. `pairs`: the matching, where already made."""
    if pairs is None:
        pairs = matched_pairs(predicted, reference.required, tolerance_s)
    matched = {i for i, _ in pairs}
    rest = np.asarray([p for i, p in enumerate(predicted) if i not in matched], float)
    if len(rest) and len(reference.dont_care):
        gaps = np.abs(rest[:, None] - np.asarray(reference.dont_care)[None, :])
        rest = rest[gaps.min(axis=1) > tolerance_s]
    return rest


def matched_pairs(
    predicted: np.ndarray, reference: np.ndarray, tolerance_s: float = 0.05
) -> list[tuple[int, int]]:
    """The (predicted, reference) index pairs of `match_onsets`."""
    candidates = sorted(
        (abs(p - r), i, j)
        for i, p in enumerate(predicted)
        for j, r in enumerate(reference)
        if abs(p - r) <= tolerance_s
    )
    used_p: set[int] = set()
    used_r: set[int] = set()
    pairs = []
    for _, i, j in candidates:
        if i in used_p or j in used_r:
            continue
        used_p.add(i)
        used_r.add(j)
        pairs.append((i, j))
    return pairs
