"""Procedural scenes where nothing sounds (engines.train.distractors)."""

from __future__ import annotations

import torch

from engines.train.distractors import MAX_PAN_PX, MAX_ZOOM_RATE, camera_path, distractor_clip


def test_a_clip_has_the_layout_of_training_frames_and_is_reproducible() -> None:
    a = distractor_clip(12, 48, 64, torch.Generator().manual_seed(3))
    b = distractor_clip(12, 48, 64, torch.Generator().manual_seed(3))
    assert a.shape == (12, 48, 64, 3) and a.dtype == torch.uint8
    assert torch.equal(a, b)
    assert a.float().std() > 5  # a picture, not a flat field


def test_the_camera_moves_within_its_limits_and_is_sometimes_still() -> None:
    gen = torch.Generator().manual_seed(0)
    width = height = 96
    still = 0
    for _ in range(200):
        theta = camera_path(40, height, width, gen)
        # One frame pixel is 1 / width of the canvas's normalised coordinates (a view spans half).
        pan_px = (theta[1:, :, 2] - theta[:-1, :, 2]).abs() * torch.tensor([width, height])
        zoom = (theta[1:, 0, 0] / theta[:-1, 0, 0]).log().abs()
        assert pan_px.max() <= MAX_PAN_PX + 1e-4
        assert zoom.max() <= MAX_ZOOM_RATE + 1e-6
        still += bool(torch.all(theta == theta[:1]))
    assert 40 < still < 120  # about a third are held still
