"""The contact rule (engines.motion.rule) on windows built by hand: a body that stops, carries
on, turns back, eases round or leaves the picture, in the window layout the service builds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engines.motion.rule import CHANGE_FLOOR, VelocityLossHead
from service.pipeline.motion.flow import FACTOR
from service.pipeline.motion.window import (
    BACK,
    CHANNELS,
    ERROR_SCALE,
    VELOCITY_SCALE,
    WINDOW,
)

H, W = 45, 80  # blocks of a 320 x 180 picture
SIZE = 3  # the body: SIZE x SIZE blocks


def window(velocities: list[float], *, start: int = 20, row: int = 20, change: float = 0.2):
    """One body moving along x at `velocities[j]` px per 1/30 s in interval j of the window
    (k = BACK is the decided one), every interval 1/30 s long; the picture changes where the
    body is while it moves."""
    assert len(velocities) == WINDOW and BACK == 2  # intervals k - 2, k - 1, k, k + 1
    x = np.zeros((1, WINDOW * CHANNELS, H, W), np.float32)
    place = float(start)
    for j, v in enumerate(velocities):
        left = round(place)
        base = j * CHANNELS
        if 0 <= left < W:
            cols = slice(max(left, 0), min(left + SIZE, W))
            x[0, base, row : row + SIZE, cols] = v * VELOCITY_SCALE
            x[0, base + 4, row : row + SIZE, cols] = (change if v else 0.0) * ERROR_SCALE
        place += v / FACTOR
    return torch.from_numpy(x)


def fired(velocities: list[float], **kwargs) -> tuple[float, float]:
    """(the highest probability, u at its cell) the head gives the decided interval."""
    with torch.no_grad():
        out = VelocityLossHead()(window(velocities, **kwargs))
    p = torch.sigmoid(out["logit"][0, 0])
    at = np.unravel_index(int(torch.argmax(p)), p.shape)
    return float(p.max()), float(out["u"][0, 0][at])


def test_a_body_that_stops_inside_the_interval_fires_when_it_stopped():
    p, u = fired([16, 16, 8, 0])  # half the interval at 16, then at rest
    assert p > 0.5
    assert u == pytest.approx(0.5, abs=0.05)


def test_a_body_that_bounces_back_fires_when_it_met_the_surface():
    # Half the interval in at 16, half out at 8: 8 - 4 = 4 px net; then 8 px back.
    p, u = fired([16, 16, 4, -8])
    assert p > 0.5
    assert u == pytest.approx(0.5, abs=0.05)


def test_a_body_that_carries_on_does_not_fire():
    assert fired([16, 16, 16, 16])[0] < 0.5


def test_a_swing_that_eases_round_does_not_fire():
    assert fired([9, 6, 3, 0])[0] < 0.5
    assert fired([6, 3, 0, -3])[0] < 0.5


def test_the_stop_fires_in_its_own_interval_not_the_one_before_or_after():
    assert fired([20, 20, 20, 6])[0] < 0.5  # it stops in the interval after
    assert fired([16, 8, 0, 0])[0] < 0.5  # it stopped in the interval before


def test_a_body_that_leaves_the_picture_does_not_fire():
    assert fired([16, 16, 0, 0], start=W - SIZE - 8)[0] < 0.5


def test_motion_the_picture_does_not_show_does_not_fire():
    assert fired([16, 16, 8, 0], change=CHANGE_FLOOR / 2)[0] < 0.5


def test_windows_of_another_layout_are_refused():
    with pytest.raises(ValueError, match="channels"):
        VelocityLossHead()(torch.zeros(1, CHANNELS, H, W))
