"""Registration steadies a tracked object's frame-to-frame motion: a shaded ball moved by a
sub-pixel step is found at that step, and a noisy detection is pulled towards the truth."""

from __future__ import annotations

import numpy as np

from service.pipeline.contacts.refine import LOST_PX, displacements, refined, steady
from service.pipeline.contacts.tracking import Detections, Tracker

H, W, R = 60, 80, 5.0


def _ball(cx: float, cy: float) -> np.ndarray:
    """A shaded ball (lit from the top left, anti-aliased edge) on a textured floor, C x H x W."""
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    floor = 0.3 + 0.05 * np.sin(0.7 * x) * np.cos(0.5 * y)
    d = np.hypot(x - cx, y - cy)
    cover = np.clip(R - d + 0.5, 0.0, 1.0)
    shade = 0.9 - 0.06 * ((x - cx) + (y - cy))
    grey = cover * shade + (1 - cover) * floor
    return np.stack([grey, 0.8 * grey, 0.5 * grey]).astype(np.float32)


def test_a_sub_pixel_step_is_registered_to_a_tenth_of_a_pixel() -> None:
    for step in ((0.3, -0.2), (2.4, 1.7), (-3.6, 0.45)):
        a, b = _ball(40.0, 30.0), _ball(40.0 + step[0], 30.0 + step[1])
        (d,) = displacements(a, b, np.array([[40.0, 30.0]]), np.array([R]), np.round([step]))
        assert np.allclose(d, step, atol=0.1), (step, d)
    flat = np.full((3, H, W), 0.5, np.float32)  # nothing to register
    assert np.isnan(
        displacements(flat, flat, np.array([[40.0, 30.0]]), np.array([R]), [[1, 0]])
    ).all()


def test_a_noisy_detection_moves_towards_the_truth_and_a_lost_one_stands() -> None:
    a, b = _ball(40.0, 30.0), _ball(42.0, 31.0)
    truth = np.array([42.0, 31.0])
    noisy = truth + np.array([0.6, -0.5])
    # A detection far from where the ball went (another object): registration is not trusted.
    elsewhere = truth + np.array([LOST_PX + 3.0, 0.0])
    before = np.array([[40.0, 30.0], [40.0, 30.0]])
    better, kept = refined(a, b, before, np.stack([noisy, elsewhere]), np.array([R, R]))
    assert np.linalg.norm(better - truth) < 0.5 * np.linalg.norm(noisy - truth)
    assert np.array_equal(kept, elsewhere)


def test_steady_refines_only_tracks_seen_in_both_frames() -> None:
    def found(*xy: tuple[float, float]) -> Detections:
        n = len(xy)
        return Detections(
            np.full(n, 0.9),
            np.asarray(xy, float).reshape(n, 2),
            np.full(n, R),
            np.ones((n, 7)),
            np.full(n, 0.1),
        )

    tracker = Tracker()
    tracker.update(0.0, found((40.0, 30.0)))
    tracks = tracker.update(0.04, found((42.5, 30.6), (10.0, 10.0)))  # the second is new
    steady(tracks, _ball(40.0, 30.0), _ball(42.0, 31.0))
    moving, new = sorted(tracks, key=lambda t: t.id)
    assert np.linalg.norm(moving.xy[-1] - (42.0, 31.0)) < 0.3
    assert np.array_equal(new.xy[-1], (10.0, 10.0))
