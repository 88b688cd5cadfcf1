"""The sync metric itself, on signals with known answers."""

from __future__ import annotations

import numpy as np
import pytest

from engines.eval.onsets import OnsetScore, Reference, detect_onsets, match_onsets, score_onsets
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
    assert score.f1 == pytest.approx(4 / 7)  # the harmonic mean of 1/2 and 2/3


def test_closest_pairs_match_first() -> None:
    score = match_onsets(np.array([0.12]), np.array([0.10, 0.13]), 0.05)
    assert score.true_positives == 1
    assert score.errors_s[0] == pytest.approx(-0.01)


def test_no_reference_and_no_prediction_is_perfect() -> None:
    assert match_onsets(np.zeros(0), np.zeros(0)).f1 == 1.0


def test_an_oracle_at_every_contact_scores_one_and_shifted_by_60_ms_zero() -> None:
    contacts = np.array([0.40, 0.80, 0.82, 1.30, 2.00])
    # 0.82 was merged into 0.80; 2.00 is out of view: neither is required.
    reference = Reference(np.array([0.40, 0.80, 1.30]), np.array([0.82, 2.00]))
    assert score_onsets(contacts, reference).f1 == 1.0
    assert score_onsets(contacts, reference).ignored == 2
    shifted = score_onsets(contacts + 0.06, reference)
    assert shifted.true_positives == 0 and shifted.f1 == 0.0


def test_onsets_at_dont_care_contacts_count_neither_way() -> None:
    reference = Reference(np.array([0.5]), np.array([1.0]))
    score = score_onsets(np.array([0.51, 1.03, 1.5]), reference)
    assert (score.true_positives, score.false_positives, score.false_negatives) == (1, 1, 0)
    assert score.ignored == 1
    # A second onset at a required contact is false, not ignored.
    double = score_onsets(np.array([0.50, 0.52]), reference)
    assert (double.true_positives, double.false_positives, double.ignored) == (1, 1, 0)


def test_summary_reports_fired_rendered_and_controls() -> None:
    def result(name: str, kind: str, rate: str, fired: OnsetScore, **kw: object) -> ClipResult:
        fields = {
            "control": False,
            "duration_s": 4.0,
            "rendered": fired,
            "truth": OnsetScore(3, 0, 0, np.zeros(3)),
            "clicks": OnsetScore(3, 0, 0, np.zeros(3)),
            "masking": fired,
            "events": 3,
            "heard": 3,
            "render_offsets_s": np.array([0.001, 0.002, 0.003]),
            "early": 0,
            "spurious": 0,
            "spurious_fired": 0,
            "span_s": 0.0,
            "cut_voiced": None,
        } | kw
        return ClipResult(name=name, kind=kind, rate=rate, fired=fired, **fields)

    results = [
        result("a", "drop", "24", OnsetScore(2, 1, 1, np.array([0.001, -0.02]))),
        result("b", "static", "vfr", OnsetScore(0, 0, 0, np.zeros(0)), early=1),
        result(
            "c",
            "cut",
            "30",
            OnsetScore(0, 2, 0, np.zeros(0)),
            control=True,
            duration_s=6.0,
            spurious=1,
            spurious_fired=2,
            span_s=0.25,
            cut_voiced=True,
        ),
    ]
    text = summary(results)
    assert "scenes: 2   required onsets: 3" in text
    assert "true track (ceiling)   1.000 1.000 1.000" in text
    assert "clicks (ceiling)       1.000 1.000 1.000" in text
    assert "      24: 0.667 / 0.667   (1 clips)" in text
    assert "fired events heard in their render: 100% of 6; render offset (median): +2.0 ms" in text
    assert "clips with onsets before the first contact: 1 of 3" in text
    assert "spurious onsets per minute: rendered 240.00, fired 480.00" in text
    assert "       cut: 240.00 / 480.00   (1 clips, 0.2 s)" in text
    assert "cuts voiced: 1 of 1" in text
