"""Material targets: at the video frame of each impact, which materials meet.

An impact event's sound is chosen at its frame from the generator's trunk, so the trunk must
know there what is hitting what. The sound-side targets (levels, decays) alone did not teach
it: a linear probe on the trunk named the object's material for about a quarter of held-out
impacts (docs/experiments.md). These targets ask for it directly, from the picture, where the
materials differ by colour and shine by design (engines.sim.materials).

Two readouts take these targets. `MaterialHead` reads the trunk; a training signal only,
nothing at inference reads it. An encoder built with `materials` (VisualEncoder) names them
itself from its glimpses, and its features carry what it named to the generator.

Per video frame: the object and the other material (an object's or the surface's) of the
strongest impact of at least SEEN_IMPULSE_NS starting in it, as ids of
engines.sim.materials.MATERIALS; -1 where no impact starts.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from engines.sim.materials import MATERIAL_NAMES

NO_IMPACT = -1


def impact_materials(
    impacts: np.ndarray, frames: int, frame_s: float, min_impulse_ns: float
) -> torch.Tensor:
    """(I,) IMPACT_DTYPE rows -> (frames, 2) int64: per video frame of `frame_s` seconds, the
    (material, other_material) of its strongest impact of at least `min_impulse_ns`."""
    out = torch.full((frames, 2), NO_IMPACT, dtype=torch.int64)
    strongest = np.zeros(frames)
    for row in impacts:
        frame = int(np.floor(float(row["time_s"]) / frame_s))
        impulse = float(row["impulse_ns"])
        if 0 <= frame < frames and impulse >= min_impulse_ns and impulse > strongest[frame]:
            strongest[frame] = impulse
            out[frame, 0] = int(row["material"])
            out[frame, 1] = int(row["other_material"])
    return out


class MaterialHead(nn.Module):
    """Reads the generator's video-rate trunk [B, dim, T] -> logits [B, T, 2, materials] for
    the object's and the other material."""

    def __init__(self, dim: int, materials: int = len(MATERIAL_NAMES)) -> None:
        super().__init__()
        self.materials = materials
        self.proj = nn.Conv1d(dim, 2 * materials, 1)

    def forward(self, trunk: torch.Tensor) -> torch.Tensor:
        b, _, t = trunk.shape
        return self.proj(trunk).transpose(1, 2).reshape(b, t, 2, self.materials)


def material_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the frames and roles with an impact; 0 when the batch has none."""
    hit = target != NO_IMPACT
    if not hit.any():
        return logits.new_zeros(())
    return F.cross_entropy(logits[hit], target[hit])


def material_accuracy(logits: torch.Tensor, target: torch.Tensor) -> tuple[float, float, int]:
    """(object accuracy, other accuracy, impacts) over the frames with an impact."""
    hit = target[..., 0] != NO_IMPACT
    if not hit.any():
        return float("nan"), float("nan"), 0
    right = (logits.argmax(dim=-1) == target)[hit].float().mean(dim=0)
    return float(right[0]), float(right[1]), int(hit.sum())
