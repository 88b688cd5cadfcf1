"""Contact detection from trajectories (engines.tracks): data contracts, causality, geometry."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch

from engines.tracks.data import (
    MODEL_SIZE,
    augment,
    film,
    frame_times,
    reference,
    simulate_scene,
    to_pixels,
)
from engines.tracks.head import ContactHead, HeadDetector
from service.pipeline.contacts.events import Events, merge_tracks, pick
from service.pipeline.contacts.features import HeadConfig, track_features
from service.pipeline.contacts.geometry import fit_arcs, fit_split_arcs, narrowed, windows

G_PX = 400.0  # px/s^2: gravity on screen, roughly, for a ~1 m wide view


def ballistic_bounce(
    fps: float, contact_s: float, n: int = 40, restitution: float = 0.6
) -> tuple[np.ndarray, np.ndarray]:
    """A point falling under constant acceleration that bounces off y = floor at contact_s
    (its vertical velocity reversed and scaled), drifting right: times (N,), pixels (N, 2)."""
    times = np.arange(n) / fps
    v_hit = 120.0  # px/s down at the contact
    floor = 80.0
    y = np.empty(n)
    before = times <= contact_s
    tb = times[before] - contact_s
    y[before] = floor + v_hit * tb + 0.5 * G_PX * tb**2
    ta = times[~before] - contact_s
    y[~before] = floor - restitution * v_hit * ta + 0.5 * G_PX * ta**2
    x = 40.0 + 30.0 * times
    return times, np.stack([x, y], axis=1)


def free_fall(fps: float, n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    times = np.arange(n) / fps
    return times, np.stack([30 + 25 * times, 20 - 60 * times + 0.5 * G_PX * times**2], axis=1)


@pytest.fixture(scope="module")
def drop_record():
    """A short sampled drop scene, physics only (cheap: no rendering)."""
    return simulate_scene(3, holdout=False, duration_s=2.0)


def test_film_shapes_and_labels(drop_record) -> None:
    filmed = film(drop_record, frame_times("25", 2.0, 3), "25")
    n, o = len(filmed.times_s), len(drop_record.spec.objects)
    assert n == 50
    assert filmed.screen_xy.shape == (n, o, 2)
    assert filmed.pixels.shape == (n, o, 2)
    assert filmed.label.shape == filmed.offset.shape == filmed.impulse.shape == (n - 1, o)
    positive = filmed.label == 1
    assert np.isfinite(filmed.offset[positive]).all()
    assert ((filmed.offset[positive] >= 0) & (filmed.offset[positive] <= 1)).all()
    assert np.isnan(filmed.offset[~positive]).all()
    inside = np.isfinite(filmed.pixels).all(axis=-1)
    assert (filmed.pixels[inside] >= 0).all()
    assert (filmed.pixels[inside][:, 0] <= MODEL_SIZE[0]).all()
    assert (filmed.pixels[inside][:, 1] <= MODEL_SIZE[1]).all()


def test_every_positive_label_is_a_required_onset(drop_record) -> None:
    filmed = film(drop_record, frame_times("30", 2.0, 3), "30")
    required = reference(drop_record, filmed).required
    k, _ = np.nonzero(filmed.label == 1)
    times = filmed.times_s[k] + filmed.offset[filmed.label == 1] * np.diff(filmed.times_s)[k]
    assert len(times) > 0
    for t in times:
        assert np.min(np.abs(required - t)) < 0.031  # merged within MERGE_S at most


def test_variable_frame_times_are_irregular() -> None:
    times = np.array([float(t) for t in frame_times("vfr", 2.0, 5)])
    steps = np.diff(times)
    assert times[0] == 0 and (steps > 0).all() and steps.std() > 0.1 * steps.mean()
    fixed = frame_times("c", 1.0, 0, fps=Fraction(24000, 1001))
    assert len(fixed) == 24


def test_pixels_are_nan_outside_the_frame() -> None:
    ndc = np.array([[[0.0, 0.0], [1.2, 0.0], [np.nan, np.nan], [-1.0, 1.0]]], np.float32)
    px = to_pixels(ndc)
    assert np.allclose(px[0, 0], [MODEL_SIZE[0] / 2, MODEL_SIZE[1] / 2])
    assert np.isnan(px[0, 1]).all() and np.isnan(px[0, 2]).all()
    assert np.allclose(px[0, 3], [0.0, 0.0])


def test_augment_adds_noise_and_drops() -> None:
    rng = np.random.default_rng(0)
    clean = np.zeros((2000, 2, 2), np.float32)
    noisy = augment(clean, rng, 0.5, drop_p=0.1)
    dropped = np.isnan(noisy).any(axis=-1)
    assert 0.05 < dropped.mean() < 0.15
    assert abs(np.nanstd(noisy) - 0.5) < 0.05


def test_arcs_fit_free_fall_without_a_kink() -> None:
    times, pixels = free_fall(30.0)
    w = windows(times, pixels)
    assert fit_arcs(w).change.max() < 0.01  # px per frame: the ridge only, no kink


def test_narrowed_windows_equal_fresh_ones() -> None:
    times = np.sort(np.random.default_rng(0).uniform(0, 3, 60))
    times[0] = 0.0
    pixels = np.random.default_rng(1).normal(50, 10, (60, 2))
    pixels[[3, 30, 31]] = np.nan
    wide = windows(times, pixels, 8, 1)
    for before in (3, 5, 8):
        a, b = windows(times, pixels, before, 1), narrowed(wide, before)
        assert all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ("s", "xy", "valid"))


def test_a_split_arc_sees_a_bounce_two_frames_after_another() -> None:
    fps, g = 30.0, 400.0
    times = np.arange(40) / fps
    first, second = 15.5 / fps, 18.3 / fps

    def arc(y: float, v: float, d: np.ndarray) -> np.ndarray:
        return y + v * d + 0.5 * g * d * d

    gap = second - first
    y = np.where(times <= first, arc(80, 150, times - first), arc(80, -75, times - first))
    y_second = float(arc(80, -75, np.array(gap)))
    y = np.where(times > second, arc(y_second, -60, times - second), y)
    pixels = np.stack([40 + 30 * times, y], axis=1)
    fit = fit_split_arcs(windows(times, pixels, 8, 1)).fit
    k = 18  # (18/30, 19/30] holds the second contact, 0.3 of the way in
    assert fit.u_raw[k] == pytest.approx(0.3, abs=0.02)
    v_before = -75 + g * gap
    assert fit.change[k] == pytest.approx(abs(-60 - v_before) / fps, rel=0.05)


@pytest.mark.parametrize("lookahead", [1, 2])
def test_head_features_and_output_are_causal(lookahead: int) -> None:
    torch.manual_seed(0)
    config = HeadConfig(lookahead=lookahead)
    head = ContactHead(config).eval()
    times, pixels = ballistic_bounce(25.0, 15.3 / 25)
    pixels = augment(pixels, np.random.default_rng(1), 0.2)
    feats = track_features(times, pixels, config)
    assert feats.shape == (len(times) - 1, config.features)
    assert np.isfinite(feats).all()
    cut = 25
    changed = pixels.copy()
    changed[cut:] += np.random.default_rng(2).normal(0, 3, changed[cut:].shape)
    changed[cut + 3] = np.nan  # and a missed detection
    detector = HeadDetector(head)
    p1, t1 = detector.scores(times, pixels)
    p2, t2 = detector.scores(times, changed)
    last = cut - 2 - lookahead  # interval k reads frames up to k + 1 + lookahead
    assert np.array_equal(p1[: last + 1], p2[: last + 1])
    assert np.array_equal(t1[: last + 1], t2[: last + 1])
    assert not np.array_equal(p1[last + 1 :], p2[last + 1 :])


def test_head_outputs_probability_and_time_near_the_interval() -> None:
    head = ContactHead(HeadConfig()).eval()
    times, pixels = ballistic_bounce(30.0, 0.5)
    prob, when = HeadDetector(head).scores(times, pixels)
    assert prob.shape == when.shape == (len(times) - 1,)
    assert ((prob >= 0) & (prob <= 1)).all()
    dt = np.diff(times)
    assert ((when >= times[:-1] - dt) & (when <= times[1:] + dt)).all()


def test_pick_is_causal_and_refractory() -> None:
    score = np.array([0.1, 0.8, 0.9, 0.2, 0.1, 0.95, 0.1])
    times = np.arange(7) * 0.02
    events = pick(score, times, 0.5)
    # 0.9 at 0.04 s is only 20 ms after 0.8 fired: the same contact
    assert np.allclose(events.times_s, [0.02, 0.10])
    assert list(events.decided) == [1, 5]


def test_merge_keeps_one_event_per_collision() -> None:
    a = Events(np.array([0.500, 1.0]), np.array([0.9, 0.6]), np.array([10, 20]))
    b = Events(np.array([0.505]), np.array([0.95]), np.array([10]))
    assert np.allclose(merge_tracks([a, b]), [0.505, 1.0])
