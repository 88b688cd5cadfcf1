"""Dense motion targets from the simulator: how fast each object moves across the picture, and
how sharply that motion changes, at every video frame.

A contact is a change of velocity, and whether a later, smaller bounce is seen at all depends on
how many pixels that change spans. The onset labels give the model a few positives per clip (and
only the audible contacts); these targets tell it at every frame how objects move on screen, so
its trunk learns to measure motion rather than to guess from appearance. They are training
signals only: nothing at inference reads them.

Per frame j of a crop, in model pixels (the augmentation's zoom and squash applied), over the
objects in view:
    speed[j] = max |P[j] - P[j-1]|
    kink[j]  = max |P[j+1] - 2 P[j] + P[j-1]|     (frame j+1 is the one frame of lookahead)
both as log1p. A frame with no object in view has zero targets.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

VISIBLE_NDC = 1.2  # an object centre a little outside the frame still shows part of it


def crop_screen(screen: torch.Tensor, start: int, frames: int, width: int) -> torch.Tensor:
    """A clip's (T, O, 2) positions for frames start-1 .. start+frames (edges repeated), padded
    with NaN objects to `width` objects: (frames + 2, width, 2)."""
    index = torch.arange(start - 1, start + frames + 1).clamp(0, len(screen) - 1)
    out = torch.full((frames + 2, width, 2), float("nan"))
    out[:, : screen.shape[1]] = screen[index]
    return out


def motion_targets(
    screen: torch.Tensor, scale: torch.Tensor, size: tuple[int, int]
) -> torch.Tensor:
    """screen [B, T+2, O, 2] (normalised device coordinates, from `crop_screen`), scale [B, 2]
    (the augmentation's magnification in x and y), size = the model's (width, height) ->
    targets [B, T, 2] = log1p(speed, kink)."""
    seen = (screen.abs() <= VISIBLE_NDC).all(dim=-1)  # NaN compares False: not in view
    visible = seen[:, :-2] & seen[:, 1:-1] & seen[:, 2:]
    half = torch.tensor(size, dtype=screen.dtype) / 2
    pixels = screen * half * scale[:, None, None, :]
    before, now, after = pixels[:, :-2], pixels[:, 1:-1], pixels[:, 2:]
    speed = torch.linalg.vector_norm(now - before, dim=-1)
    kink = torch.linalg.vector_norm(after - 2 * now + before, dim=-1)
    speed = torch.where(visible, speed, 0.0).amax(dim=-1)
    kink = torch.where(visible, kink, 0.0).amax(dim=-1)
    return torch.log1p(torch.stack([speed, kink], dim=-1))


class MotionHead(nn.Module):
    """Reads the generator's video-rate trunk [B, dim, T] -> predicted targets [B, T, 2]."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.proj = nn.Conv1d(dim, 2, 1)

    def forward(self, trunk: torch.Tensor) -> torch.Tensor:
        return self.proj(trunk).transpose(1, 2)


def motion_loss(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    return F.smooth_l1_loss(predicted, target)
