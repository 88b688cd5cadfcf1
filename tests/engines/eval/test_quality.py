"""Quality metrics on synthetic signals with known answers."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from engines.eval.material import MaterialClassifier, event_features, isolated_impacts
from engines.eval.quality import (
    click_track,
    impulse_levels,
    moving_intervals,
    onset_levels,
    rank_correlation,
    spectral_distance,
    speed_levels,
    spurious_onsets,
)
from engines.models.config import ModelConfig
from engines.sim import GROUND, Impact, SimClip
from engines.sim.materials import OBJECT_MATERIALS
from engines.train.data import log_mel

SR = 48000


def _bursts(times: list[float], amplitudes: list[float], duration_s: float = 3.0) -> np.ndarray:
    audio = np.zeros(int(duration_s * SR), np.float32)
    t = np.arange(int(0.02 * SR)) / SR
    for start, a in zip(times, amplitudes, strict=True):
        i = int(start * SR)
        audio[i : i + len(t)] += a * np.sin(2 * np.pi * 1000 * t)
    return audio


def test_onset_level_is_the_bursts_rms() -> None:
    audio = _bursts([0.5, 1.5], [0.5, 0.05])
    levels = onset_levels(audio, SR, np.array([0.5, 1.5, 2.5]))
    expected = 20 * np.log10(np.array([0.5, 0.05]) / np.sqrt(2))
    np.testing.assert_allclose(levels[:2], expected, atol=0.3)
    assert levels[2] < -100  # nothing there


def test_rank_correlation() -> None:
    x = np.array([1.0, 2.0, 3.0, 4.0])
    assert rank_correlation(x, x**3) == pytest.approx(1.0)
    assert rank_correlation(x, -x) == pytest.approx(-1.0)
    assert np.isnan(rank_correlation(x[:2], x[:2]))


def test_levels_that_follow_the_impulse_correlate_fully() -> None:
    times, impulses = [0.3, 0.9, 1.6, 2.2], [0.05, 0.8, 0.2, 0.4]
    audio = _bursts(times, [0.5 * j**0.7 for j in impulses])
    detected = np.array(times) + 0.004  # found within the matching tolerance
    pairs = impulse_levels(audio, SR, detected, np.array(times), np.array(impulses))
    assert len(pairs.truth) == 4 and pairs.rho == pytest.approx(1.0)
    flat = impulse_levels(
        _bursts(times, [0.3] * 4), SR, detected, np.array(times), np.array(impulses)
    )
    assert np.isnan(flat.rho)  # a level that ignores the impulse says nothing


def test_continuous_level_that_follows_speed_correlates() -> None:
    track_t = np.arange(0, 3.0, 0.01)
    speed = np.where(track_t < 2.5, 0.1 + track_t, 0.0)
    noise = np.random.default_rng(0).standard_normal(3 * SR).astype(np.float32)
    audio = noise * np.interp(np.arange(3 * SR) / SR, track_t, speed).astype(np.float32) * 0.05
    pairs = speed_levels(audio, SR, track_t, speed, np.array([0.0]))
    assert len(pairs.truth) > 30 and pairs.rho > 0.95
    assert pairs.truth.min() > 0.02  # bins without motion are left out


def test_spurious_onsets_count_only_where_nothing_happens() -> None:
    detected = np.array([0.5, 1.05, 2.5, 4.0])
    count, quiet_s = spurious_onsets(detected, np.array([1.0]), np.array([[2.0, 3.0]]), 5.0)
    assert count == 2  # 0.5 and 4.0; 1.05 is a contact, 2.5 is rolling
    assert quiet_s == pytest.approx(5.0 - 0.2 - 1.2, abs=0.01)


def test_moving_intervals() -> None:
    t = np.arange(10) * 0.01
    speed = np.array([0, 0.5, 0.5, 0, 0, 0.2, 0.2, 0.2, 0, 0])
    np.testing.assert_allclose(moving_intervals(t, speed), [[0.01, 0.03], [0.05, 0.08]])
    assert moving_intervals(t, np.zeros(10)).shape == (0, 2)


def test_click_track_puts_the_same_click_at_each_onset() -> None:
    audio = click_track(np.array([0.1, 0.5]), SR, SR)
    a, b = int(0.1 * SR), int(0.5 * SR)
    n = int(0.01 * SR)
    np.testing.assert_array_equal(audio[a : a + n], audio[b : b + n])
    assert np.abs(audio[a + n : b]).max() == 0 and np.abs(audio[a : a + n]).max() > 0.1


def test_spectral_distance_is_zero_for_the_truth_and_grows_with_difference() -> None:
    mel = log_mel(ModelConfig())
    truth = _bursts([0.3, 1.2], [0.4, 0.2])
    same = spectral_distance(truth, truth, mel)
    assert same.log_mel == pytest.approx(0.0, abs=1e-6) and same.stft == pytest.approx(
        0.0, abs=1e-4
    )
    near = spectral_distance(truth * 0.9, truth, mel)
    silence = spectral_distance(np.zeros_like(truth), truth, mel)
    assert 0 < near.log_mel < silence.log_mel and 0 < near.stft < silence.stft


def test_material_features_ignore_level_and_the_classifier_learns_separable_classes() -> None:
    mel = log_mel(ModelConfig())
    t = np.arange(int(0.2 * SR)) / SR
    tones = {0: (800, 60.0), 1: (3000, 8.0)}  # (Hz, decay per second): a dull and a ringing hit
    audio = np.zeros(4 * SR, np.float32)
    times, labels = [], []
    for k in range(16):
        label = k % 2
        hz, decay = tones[label]
        start = int((0.1 + 0.24 * k) * SR)
        amplitude = 0.05 + 0.02 * k  # the level varies; the material does not
        audio[start : start + len(t)] += amplitude * np.sin(2 * np.pi * hz * t) * np.exp(-decay * t)
        times.append(start / SR)
        labels.append(label)
    x = event_features(audio, np.array(times), mel, SR)
    louder = event_features(audio * 3, np.array(times), mel, SR)
    bands = mel.bank.shape[0]
    strong = x[:, :bands] > -6  # above the log floor's reach, the level cancels out
    np.testing.assert_allclose(x[:, :bands][strong], louder[:, :bands][strong], atol=0.05)
    np.testing.assert_allclose(x[:, bands:][strong], louder[:, bands:][strong], atol=0.05)
    y = np.array(labels)
    classifier = MaterialClassifier.fit(x[:12], y[:12], steps=200)
    assert (classifier.predict(x[12:]) == y[12:]).all()


def test_isolated_impacts_leave_out_masked_and_object_on_object_hits() -> None:
    def impact(t: float, other: int = GROUND) -> Impact:
        return Impact(t, 0.1, 1.0, 0, other, "wood", "wood_floor", 0.05, "sphere")

    clip = SimClip(
        spec=None,  # type: ignore[arg-type]
        frames=np.zeros((0, 0, 0, 3), np.uint8),
        times_s=np.zeros(0),
        fps=Fraction(30),
        duration_s=3.0,
        physics_hz=240,
        impacts=[impact(0.5), impact(1.0), impact(1.05), impact(2.0, other=1)],
        tracks=[],
        screen_xy=np.zeros((0, 1, 2), np.float32),
    )
    assert isolated_impacts(clip) == [(0.5, OBJECT_MATERIALS.index("wood"))]
