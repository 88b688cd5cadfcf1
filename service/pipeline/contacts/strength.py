"""How hard a contact was, from the track that fired it: its impulse (N s), estimated.

The renderer makes an event as loud as the simulator makes an impact of that impulse
(level ~ loudness * impulse ** 0.8), so level follows the impulse when the estimate does.

The picture gives the velocity jump and the object's apparent radius in pixels, both scaled by
the camera's distance; impulse is mass times velocity change. A model linear in the cues
(`features`), their squares and products and the material (`design`) is fitted for the log of the
impulse on the localiser's real tracks of simulated scenes (engines.tracks.strength) and shipped
as weights in the tier's config.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from service.pipeline.contacts.features import HeadConfig
from service.pipeline.contacts.geometry import (
    NOISE_PER_SIGMA,
    fit_split_arcs,
    narrowed,
    noise_level,
    windows,
)

ARC_FRAMES = 4
NAMES = ("log_jump_px_s", "log_radius_px", "y", "log_speed_px_s", "quadratic", "material")


def design(cues: np.ndarray, material: int, materials: int) -> np.ndarray:
    """The model's inputs: the cues, every product of two of them (squares included), and the
    material one-hot (which carries the constant)."""
    i, j = np.triu_indices(len(cues))
    onehot = np.zeros(materials)
    onehot[material] = 1.0
    return np.concatenate([cues, cues[i] * cues[j], onehot])


@dataclass(frozen=True)
class StrengthModel:
    """log impulse = weights . design(cues, material)."""

    weights: tuple[float, ...]

    def impulse(self, cues: np.ndarray, material: int, materials: int) -> float:
        x = design(cues, material, materials)
        return float(np.exp(np.clip(np.dot(self.weights, x), -12.0, 4.0)))


def features(
    times_s: np.ndarray,
    pixels: np.ndarray,
    radius: np.ndarray,
    k: int,
    config: HeadConfig,
    height: int,
) -> np.ndarray:
    """Cues of interval k's contact on one track (rows: frames of the track)."""
    rows = np.array([k])
    w = windows(times_s, pixels, config.context, config.lookahead, rows)
    noise = noise_level(times_s, pixels, config.lookahead, rows)
    fit = fit_split_arcs(narrowed(w, ARC_FRAMES), noise / NOISE_PER_SIGMA).fit
    dt = float(w.dt[0])
    r = max(float(np.median(radius[max(0, k - 4) : k + 2])), 0.5)
    ys = pixels[max(0, k - 3) : k + 2, 1]
    y = float(np.nanmean(ys)) / height if np.isfinite(ys).any() else 0.5
    return np.array(
        [
            np.log(max(float(fit.change[0]) / dt, 1.0)),
            np.log(r),
            y,
            np.log(max(float(fit.speed[0]) / dt, 1.0)),
        ]
    )
