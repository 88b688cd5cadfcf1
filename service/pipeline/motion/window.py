"""The contact head's input: a short window of intervals around the one it decides.

    stack(interval)                 -> (CHANNELS, h, w) float32, one interval's maps, scaled
    window(stacks, k)               -> (WINDOW * CHANNELS, h, w), interval k with BACK before it
                                       and AHEAD after it

Interval k is the motion from frame k to frame k + 1; a contact between those two frames is
decided once frame k + 1 + AHEAD is in: the intervals after it show whether the motion stopped
or turned (a contact) or eased round (a swing), and how far into the interval it happened.
Intervals missing at a shot's or a stream's edges are zeros (no motion seen), so the first
and last intervals of a shot can still be decided.

Scales put each map near unit range for the head: velocities are picture pixels per 1/30 s
(service.pipeline.motion.flow), which for a drumstick at 320 px reach 10-40.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from service.pipeline.motion.flow import VELOCITY_DT_S, Interval

BACK, AHEAD = 2, 1
WINDOW = BACK + 1 + AHEAD
CHANNELS = 7  # flow x, flow y, speed max, warp error, change, grey, log interval
VELOCITY_SCALE = 1 / 8
ERROR_SCALE = 4.0
GREY_SCALE = 2.0


def stack(interval: Interval) -> np.ndarray:
    """One interval's maps as the head reads them (CHANNELS, h, w) float32."""
    h, w = interval.grey.shape
    rate = math.log(interval.dt_s / VELOCITY_DT_S)
    return np.concatenate(
        [
            interval.flow * np.float32(VELOCITY_SCALE),
            interval.speed_max[None] * np.float32(VELOCITY_SCALE),
            interval.warp_error[None] * np.float32(ERROR_SCALE),
            interval.change[None] * np.float32(ERROR_SCALE),
            interval.grey[None] * np.float32(GREY_SCALE),
            np.full((1, h, w), rate, np.float32),
        ]
    ).astype(np.float32)


def window(stacks: Sequence[np.ndarray | None], k: int) -> np.ndarray:
    """Interval k's window from `stacks` (None or out of range: nothing seen there)."""
    shape = next(s for s in stacks if s is not None).shape
    parts = []
    for j in range(k - BACK, k + AHEAD + 1):
        s = stacks[j] if 0 <= j < len(stacks) else None
        parts.append(np.zeros(shape, np.float32) if s is None else s)
    return np.concatenate(parts)
