"""Simulation contracts: frame timing, contact ground truth, scene sampling, determinism."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest

from engines.sim import SCENE_KINDS, sample_scene, simulate
from engines.sim.camera import HOLDOUT_PITCH_DEG, TRAIN_PITCH_DEG
from engines.sim.physics import PHYSICS_HZ
from engines.sim.render import SceneRenderer
from engines.sim.scene import HOLDOUT_SIZE_M, TRAIN_SHAPES
from engines.sim.simulate import screen_track
from tests.engines.scenes import drop_scene

DT = 1.0 / PHYSICS_HZ


def _sim(spec, duration_s=1.5, fps=24, width=32, height=18):
    return simulate(spec, duration_s=duration_s, fps=fps, width=width, height=height)


@pytest.mark.parametrize("height", [0.2, 0.5, 1.0])
def test_first_impact_at_free_fall_time(height: float) -> None:
    clip = _sim(drop_scene(height), duration_s=0.6)
    expected = math.sqrt(2 * height / 9.81)
    assert clip.impacts, "a dropped sphere must hit the floor"
    # Semi-implicit Euler runs ~dt/2 ahead of the analytic fall; allow one step plus 0.5 ms.
    assert abs(clip.impacts[0].time_s - expected) <= DT + 5e-4
    assert clip.impacts[0].speed_mps == pytest.approx(math.sqrt(2 * 9.81 * height), rel=0.05)


def test_release_delays_the_fall() -> None:
    clip = _sim(drop_scene(0.3, release_s=0.5), duration_s=1.2)
    assert abs(clip.impacts[0].time_s - (0.5 + math.sqrt(2 * 0.3 / 9.81))) <= 2 * DT + 5e-4


def test_bounces_have_positive_impulses_and_the_first_is_largest() -> None:
    clip = _sim(drop_scene(0.5, material="rubber"), duration_s=2.5)
    impulses = [i.impulse_ns for i in clip.impacts]
    assert len(impulses) >= 3
    assert all(j > 0 for j in impulses)
    assert impulses[0] == max(impulses)
    assert all(np.diff([i.time_s for i in clip.impacts]) > 0)
    assert all(i.other_material == "wood_floor" and i.other_id == -1 for i in clip.impacts)


def test_frames_at_exact_times_for_any_rate() -> None:
    for fps, n in ((24, 36), (25, 38), (Fraction(30000, 1001), 45)):
        clip = _sim(drop_scene(0.2), duration_s=1.5, fps=fps, width=40, height=30)
        assert clip.frames.shape == (n, 30, 40, 3) and clip.frames.dtype == np.uint8
        assert clip.times_s[0] == 0.0
        np.testing.assert_allclose(clip.times_s, np.arange(n) / float(Fraction(fps)))


def test_static_scenes_have_no_impacts_and_no_motion() -> None:
    for seed in range(4):
        spec = sample_scene(np.random.default_rng(seed), kind="static")
        clip = _sim(spec, duration_s=1.0)
        assert clip.impacts == []
        for track in clip.tracks:
            assert track.slide_speed.max() < 0.02 and track.roll_speed.max() < 0.02


def test_rolling_and_sliding_are_measured() -> None:
    roll = _sim(sample_scene(np.random.default_rng(3), kind="roll"), duration_s=1.5)
    slide = _sim(sample_scene(np.random.default_rng(3), kind="slide"), duration_s=1.5)
    assert max(t.roll_speed.max() for t in roll.tracks) > 0.1
    assert max(t.slide_speed.max() for t in slide.tracks) > 0.3
    assert all(t.roll_speed.max() == 0 for t in slide.tracks)  # boxes tumble, not roll


def test_simulation_is_deterministic() -> None:
    spec = sample_scene(np.random.default_rng(11), kind="multi")
    a, b = _sim(spec), _sim(spec)
    assert np.array_equal(a.frames, b.frames)
    assert a.impacts == b.impacts
    for ta, tb in zip(a.tracks, b.tracks, strict=True):
        assert np.array_equal(ta.slide_speed, tb.slide_speed)


def test_same_generator_state_gives_same_scene() -> None:
    for kind in SCENE_KINDS:
        a = sample_scene(np.random.default_rng(5), kind=kind)
        b = sample_scene(np.random.default_rng(5), kind=kind)
        assert a == b and a.kind == kind


def test_holdout_scenes_use_only_reserved_parameters() -> None:
    for seed in range(40):
        train = sample_scene(np.random.default_rng(seed))
        held = sample_scene(np.random.default_rng(seed), holdout=True)
        assert TRAIN_PITCH_DEG[0] <= train.camera.pitch_deg <= TRAIN_PITCH_DEG[1]
        assert HOLDOUT_PITCH_DEG[0] <= held.camera.pitch_deg <= HOLDOUT_PITCH_DEG[1]
        for obj in train.objects:
            assert obj.shape in TRAIN_SHAPES and obj.size_m <= HOLDOUT_SIZE_M[0] + 1e-9
        for obj in held.objects:
            assert obj.shape == "capsule" or obj.size_m >= HOLDOUT_SIZE_M[0] - 1e-9


def test_unknown_kind_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown scene kind"):
        sample_scene(np.random.default_rng(0), kind="explode")


def test_projected_centre_is_where_the_object_is_drawn() -> None:
    spec = drop_scene(0.3)
    # A blue ball on an orange floor: its pixels are told apart from its (orange) blob shadow.
    ball = dataclasses.replace(spec.objects[0], colour=(0.05, 0.1, 0.9))
    spec = dataclasses.replace(spec, objects=(ball,))
    width, height = 160, 90
    with SceneRenderer(spec, width, height) as renderer:
        orientation = np.array([[0.0, 0.0, 0.0, 1.0]])
        for centre in ([0.0, 0.0, 0.3], [0.12, -0.05, 0.1], [-0.1, 0.1, 0.2]):
            at = np.array([centre])
            shown = renderer.render(at, orientation, 0.0).astype(int)
            empty = renderer.render(np.array([[0.0, 0.0, -5.0]]), orientation, 0.0).astype(int)
            changed = np.abs(shown - empty).sum(axis=-1) > 100
            rows, cols = np.nonzero(changed & (shown[..., 2] > shown[..., 0] + 60))
            x, y = renderer.project(at, 0.0)[0]
            assert abs(cols.mean() + 0.5 - (x + 1) / 2 * width) < 1.0
            assert abs(rows.mean() + 0.5 - (1 - y) / 2 * height) < 1.0
        target = np.array([spec.camera.target])
        np.testing.assert_allclose(renderer.project(target, 0.0), [[0.0, 0.0]], atol=1e-6)
        behind = 2 * renderer_eye(spec) - np.array(spec.camera.target)
        assert np.isnan(renderer.project(behind[None], 0.0)).all()


def renderer_eye(spec) -> np.ndarray:
    """The camera's position at t = 0."""
    target, distance, yaw, pitch = spec.camera.at(0.0)
    yaw_r, pitch_r = math.radians(yaw), math.radians(pitch)
    back = np.array(
        [
            math.sin(yaw_r) * math.cos(pitch_r),
            -math.cos(yaw_r) * math.cos(pitch_r),
            -math.sin(pitch_r),
        ]
    )
    return np.array(target) + distance * back


def test_screen_positions_follow_the_fall_and_match_a_replay() -> None:
    spec = drop_scene(0.3)
    clip = _sim(spec, duration_s=0.6, fps=30)
    y = clip.screen_xy[:, 0, 1]
    assert clip.screen_xy.shape == (18, 1, 2) and np.isfinite(clip.screen_xy).all()
    falling = clip.times_s < clip.impacts[0].time_s
    assert np.all(np.diff(y[falling]) < 0)  # screen y points up: a falling ball goes down
    replayed = screen_track(
        spec, duration_s=0.6, times_s=clip.times_s, aspect=clip.width / clip.height
    )
    np.testing.assert_array_equal(replayed, clip.screen_xy)
