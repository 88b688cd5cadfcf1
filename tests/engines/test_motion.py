"""Dense motion targets: known tracks give known speeds and kinks, in model pixels."""

from __future__ import annotations

import math

import numpy as np
import torch

from engines.train.motion import crop_screen, motion_targets

SIZE = (96, 96)
PX = 2 / 96  # one model pixel in normalised device coordinates


def _targets(xy: np.ndarray, scale=(1.0, 1.0)) -> np.ndarray:
    """xy (T, O, 2) in model pixels from the centre -> expm1 of the targets over frames 1..T-2."""
    screen = torch.tensor(xy * PX, dtype=torch.float32)
    crop = crop_screen(screen, 1, len(xy) - 2, screen.shape[1])[None]
    out = motion_targets(crop, torch.tensor([scale]), SIZE)[0]
    return np.expm1(out.numpy())


def test_constant_velocity_has_speed_and_no_kink() -> None:
    xy = np.stack([np.arange(8) * 3.0, np.arange(8) * 4.0], axis=-1)[:, None]
    out = _targets(xy)
    np.testing.assert_allclose(out[:, 0], 5.0, rtol=1e-5)
    np.testing.assert_allclose(out[:, 1], 0.0, atol=1e-5)


def test_a_bounce_is_a_kink_at_the_frame_before_the_reversal() -> None:
    y = np.array([12.0, 8.0, 4.0, 0.0, 3.0, 6.0, 9.0])  # down 4 px a frame, then up 3
    xy = np.stack([np.zeros(7), y], axis=-1)[:, None]
    out = _targets(xy)  # frames 1..5
    np.testing.assert_allclose(out[:, 1], [0.0, 0.0, 7.0, 0.0, 0.0], atol=1e-5)
    np.testing.assert_allclose(out[:, 0], [4.0, 4.0, 4.0, 3.0, 3.0], rtol=1e-5)


def test_the_fastest_visible_object_counts_and_hidden_ones_do_not() -> None:
    slow = np.stack([np.arange(6) * 1.0, np.zeros(6)], axis=-1)
    fast = np.stack([np.arange(6) * 2.0, np.zeros(6)], axis=-1)
    offscreen = fast + np.array([200.0, 0.0])  # 200 px from the centre: out of the frame
    hidden = np.full((6, 2), np.nan)  # behind the camera
    out = _targets(np.stack([slow, offscreen, hidden], axis=1))
    np.testing.assert_allclose(out[:, 0], 1.0, rtol=1e-5)
    out = _targets(np.stack([slow, fast], axis=1))
    np.testing.assert_allclose(out[:, 0], 2.0, rtol=1e-5)
    assert np.all(_targets(np.stack([offscreen, hidden], axis=1)) == 0.0)


def test_the_augmentations_magnification_scales_the_pixels() -> None:
    xy = np.stack([np.arange(6) * 3.0, np.arange(6) * 4.0], axis=-1)[:, None]
    out = _targets(xy, scale=(2.0, 0.5))
    np.testing.assert_allclose(out[:, 0], math.hypot(6.0, 2.0), rtol=1e-5)


def test_crop_edges_repeat_the_first_and_last_frame() -> None:
    screen = torch.arange(10, dtype=torch.float32).reshape(5, 1, 2)
    crop = crop_screen(screen, 0, 5, 2)
    assert crop.shape == (7, 2, 2)
    assert torch.equal(crop[0, 0], screen[0, 0]) and torch.equal(crop[-1, 0], screen[-1, 0])
    assert torch.isnan(crop[:, 1]).all()
