"""The sync metric itself, on signals with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from engines.eval.onsets import OnsetScore, detect_onsets, match_onsets
from engines.eval.sync import ClipResult, summary

SR = 48000


def _ring(
    times: list[float],
    seconds: float = 2.0,
    amp: float = 0.3,
    noise: float = 1e-4,
    decay: float = 30.0,
) -> np.ndarray:
    rng = np.random.default_rng(0)
    audio = rng.normal(0, noise, round(seconds * SR))
    n = np.arange(SR // 4)
    for t in times:
        i = round(t * SR)
        seg = amp * np.exp(-n / SR * decay) * np.sin(2 * np.pi * 800 * n / SR + 0.5)
        audio[i : i + len(seg)] += seg[: len(audio) - i]
    return audio.astype(np.float32)


def test_detects_each_hit_within_a_millisecond() -> None:
    times = [0.3, 0.7, 1.2345, 1.6]
    onsets = detect_onsets(_ring(times), SR)
    score = match_onsets(onsets, np.array(times))
    assert score.f1 == 1.0
    assert np.abs(score.errors_s).max() < 0.001


def test_silence_and_steady_noise_have_no_onsets() -> None:
    assert len(detect_onsets(np.zeros(SR, np.float32), SR)) == 0
    noise = np.random.default_rng(1).normal(0, 0.05, 2 * SR).astype(np.float32)
    assert len(detect_onsets(noise, SR)) == 0


def test_quiet_hits_below_the_floor_are_not_onsets() -> None:
    assert len(detect_onsets(_ring([0.5], amp=1e-4, noise=0.0), SR)) == 0


def test_a_hit_during_another_ring_counts_once_it_stands_out() -> None:
    onsets = detect_onsets(_ring([0.3, 0.5], decay=12.0), SR)
    assert match_onsets(onsets, np.array([0.3, 0.5])).f1 == 1.0


def test_matching_is_one_to_one_and_bounded_by_the_tolerance() -> None:
    score = match_onsets(np.array([0.10, 0.11, 0.50, 0.90]), np.array([0.1, 0.45, 1.5]), 0.05)
    assert (score.true_positives, score.false_positives, score.false_negatives) == (2, 2, 1)
    assert sorted(np.round(score.errors_s, 3)) == [0.0, 0.05]
    assert score.precision == 0.5
    assert score.recall == pytest.approx(2 / 3)
    assert score.f1 == pytest.approx(2 * 2 / (2 * 2 + 2 + 1))


def test_closest_pairs_match_first() -> None:
    score = match_onsets(np.array([0.12]), np.array([0.10, 0.13]), 0.05)
    assert score.true_positives == 1
    assert score.errors_s[0] == pytest.approx(-0.01)


def test_no_reference_and_no_prediction_is_perfect() -> None:
    assert match_onsets(np.zeros(0), np.zeros(0)).f1 == 1.0


def test_summary_per_kind_counts_and_undefined_rates() -> None:
    results = [
        ClipResult(1, 30, "static", OnsetScore(0, 0, 0, np.zeros(0))),
        ClipResult(2, 30, "static", OnsetScore(0, 1, 0, np.zeros(0))),
        ClipResult(3, 25, "drop", OnsetScore(2, 1, 1, np.array([0.001, -0.002]))),
    ]
    lines = summary(results).splitlines()
    assert "  static: F1 0.000   precision 0.000   recall -   predicted 1   reference 0" in lines
    assert "  drop: F1 0.667   precision 0.667   recall 0.667   predicted 3   reference 3" in lines
