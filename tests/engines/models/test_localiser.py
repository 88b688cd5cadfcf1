"""The visual localiser's contract: map shapes, and peaks read back where a centre is."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engines.models.localiser import (
    HEAT,
    LOG_RADIUS,
    LOG_SIZE,
    MATERIAL,
    OFFSET_X,
    STRIDE,
    Localiser,
    peaks,
)
from engines.train.localiser import HEIGHT, WIDTH, FrameTargets, loss_fn, targets


def test_maps_are_at_a_quarter_of_the_frame() -> None:
    model = Localiser(materials=7)
    frames = torch.rand(2, 3, HEIGHT, WIDTH)
    maps = model(frames, frames)
    assert maps.shape == (2, 5 + 7, HEIGHT // STRIDE, WIDTH // STRIDE)


def test_targets_put_a_peak_where_the_object_is_and_peaks_read_it_back() -> None:
    xy = np.array([[[50.3, 20.7], [150.9, 90.2], [np.nan, np.nan]]])
    t = FrameTargets(
        xy=xy,
        radius=np.array([[6.0, 3.0, 4.0]]),
        material=np.array([2, 5, 1]),
        size=np.array([0.05, 0.12, 0.08]),
    )
    target = targets(t, 0, 7)
    assert int((target["heat"] >= 1.0).sum()) == 2
    # Maps made from the targets themselves decode to the exact positions.
    maps = torch.full((1, 5 + 7, HEIGHT // STRIDE, WIDTH // STRIDE), -9.0)
    heat = target["heat"].clamp(1e-4, 1 - 1e-4)
    maps[0, HEAT] = torch.log(heat / (1 - heat))
    maps[0, OFFSET_X : LOG_RADIUS + 1] = target["regress"][:3]
    maps[0, LOG_SIZE] = target["regress"][3]
    maps[0, MATERIAL + 2][target["material"] == 2] = 5.0
    out = peaks(maps, k=2)
    found = sorted(out.xy[0].tolist())
    assert found[0] == pytest.approx([50.3, 20.7], abs=1e-4)
    assert found[1] == pytest.approx([150.9, 90.2], abs=1e-4)
    assert sorted(out.radius[0].tolist()) == pytest.approx([3.0, 6.0], rel=1e-4)
    assert sorted(out.size[0].tolist()) == pytest.approx([0.05, 0.12], rel=1e-4)
    assert loss_fn(maps, {k: v[None] for k, v in target.items()}).item() < 1.0


def test_located_runs_the_size_branch_at_the_peaks_only_and_agrees() -> None:
    """What the service's graph runs (`located`) equals reading the full maps (`peaks`)."""
    torch.manual_seed(0)
    model = Localiser(materials=7).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
        frames, previous = torch.rand(2, 3, HEIGHT, WIDTH), torch.rand(2, 3, HEIGHT, WIDTH)
        expected = peaks(model(frames, previous), k=6)
        got = model.located(frames, previous, k=6)
    for e, g in zip(expected, got, strict=True):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)
