"""Where a scene is filmed from: a look-at camera that may orbit or dolly slowly."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

Vec3 = tuple[float, float, float]

TRAIN_PITCH_DEG = (-38.0, -8.0)
HOLDOUT_PITCH_DEG = (-52.0, -40.0)  # evaluation only: a higher, steeper view


@dataclass(frozen=True)
class CameraSpec:
    """A look-at camera orbiting `target`; yaw and distance may drift linearly with time."""

    target: Vec3
    distance: float
    yaw_deg: float
    pitch_deg: float
    fov_deg: float  # vertical field of view
    yaw_rate_dps: float = 0.0
    distance_rate_mps: float = 0.0

    def at(self, t: float) -> tuple[Vec3, float, float, float]:
        """(target, distance, yaw_deg, pitch_deg) at time t."""
        return (
            self.target,
            self.distance + self.distance_rate_mps * t,
            self.yaw_deg + self.yaw_rate_dps * t,
            self.pitch_deg,
        )

    @property
    def moving(self) -> bool:
        return self.yaw_rate_dps != 0.0 or self.distance_rate_mps != 0.0


def sample_camera(
    rng: np.random.Generator, roi: np.ndarray, size_m: float, holdout: bool, moving_p: float
) -> CameraSpec:
    """A camera that keeps the region of interest (ROI) in view, unless that would make the
    largest object smaller than ~1/11 of the frame height (~6 px of a 64 px model input)."""
    lo, hi = roi.min(axis=0), roi.max(axis=0)
    centre = (lo + hi) / 2
    radius = max(float(np.linalg.norm(hi - lo)) / 2, 0.12)
    fov = float(rng.uniform(40, 60))
    tan_half = math.tan(math.radians(fov) / 2)
    distance = min(radius / tan_half * float(rng.uniform(1.05, 1.4)), 5.5 * size_m / tan_half)
    pitch = float(rng.uniform(*(HOLDOUT_PITCH_DEG if holdout else TRAIN_PITCH_DEG)))
    yaw = float(rng.uniform(-180, 180))
    target = (float(centre[0]), float(centre[1]), float(centre[2]) * 0.8)
    yaw_rate = dist_rate = 0.0
    if rng.random() < moving_p:
        yaw_rate = float(rng.choice([-1, 1]) * rng.uniform(3, 12))
        dist_rate = float(rng.uniform(-0.04, 0.04)) * distance
    return CameraSpec(
        target=target,
        distance=distance,
        yaw_deg=yaw,
        pitch_deg=pitch,
        fov_deg=fov,
        yaw_rate_dps=yaw_rate,
        distance_rate_mps=dist_rate,
    )
