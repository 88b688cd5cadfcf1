"""The generator's output: frames as a camera delivered them and the contacts they show."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SpriteContact:
    time_s: float  # exact contact time (analytic, not frame-quantised), seconds from frame 0
    xy: tuple[float, float]  # contact point in pixels of `frames` (x right, y down)
    speed_px_s: float  # closing speed along the contact normal just before contact, px/s
    size_px: float  # the moving body's size (longest extent) in px
    material: str | None  # an engines.sim.materials OBJECT_MATERIALS name, or None
    # In view (inside the picture, not in the bars, not hidden), body >= 2 px, audible speed,
    # a frame of the same shot on either side; False contacts are neither right nor wrong to voice.
    required: bool


@dataclass(frozen=True)
class SpriteClip:
    frames: np.ndarray  # (N, H, W, 3) uint8 RGB, as a camera delivered them
    times_s: np.ndarray  # (N,) float64, first 0, strictly increasing (variable rate possible)
    duration_s: float
    contacts: tuple[SpriteContact, ...]  # sorted by time; only contacts inside [0, duration)
    cuts: tuple[int, ...]  # frame indices that begin a new shot (never 0)
    kind: str
    seed: int
