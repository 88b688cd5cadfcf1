"""Visual localiser: where each object is in a frame, finer than a pixel, and what it is made of.

Contract:  frames [B, 3, H, W] float32 in [0, 1] (H x W = 108 x 192, the picture letterboxed into
           it), previous [B, 3, H, W] (the frame before; the frame itself at a stream's start)
           -> maps [B, C, H / STRIDE, W / STRIDE] float32, C = 5 + materials:
              0      centre logit (a peak per object: CenterNet's heatmap)
              1, 2   the centre's offset inside its cell, x and y, in cells ([0, 1) at targets)
              3      log of the object's apparent radius in model pixels
              4 ...  object-material logits
              last   log of the object's size in metres (its largest extent)
`peaks(maps)` reads the objects out: positions in model pixels, radius, material probabilities,
size.

The frame difference is an input because a moving object is easiest to find where the picture
changes, and a small object far from the camera is a few pixels of colour otherwise.

Size in metres is what sets an object's pitch, and the apparent radius cannot tell it: the camera
may be near a small object or far from a large one. The floor around the object can: its pattern
has a fixed size in the world, so how many pixels it spans near the object is the picture's
scale there. A separate branch reads it from the trunk's features (`size`), trained after the
trunk with the trunk fixed (engines.train.localiser --size-only), so adding it leaves the
positions, radii and materials as they were.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import nn
from torch.nn import functional as F

STRIDE = 4
HEAT, OFFSET_X, OFFSET_Y, LOG_RADIUS, MATERIAL, LOG_SIZE = 0, 1, 2, 3, 4, -1


class Residual(nn.Module):
    def __init__(self, channels: int, dilation: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=dilation, dilation=dilation)
        self.conv2 = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(F.relu(self.conv1(x)))


class Localiser(nn.Module):
    def __init__(
        self, *, materials: int, channels: tuple[int, int] = (24, 48), dilations=(1, 2, 4, 1)
    ) -> None:
        super().__init__()
        c1, c2 = channels
        self.stem = nn.Sequential(
            nn.Conv2d(6, c1, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(c1, c2, 3, stride=2, padding=1),
            nn.ReLU(),
        )
        self.blocks = nn.Sequential(*(Residual(c2, d) for d in dilations))
        self.head = nn.Conv2d(c2, 4 + materials, 1)
        self.size = nn.Sequential(
            nn.Conv2d(c2, c2, 3, padding=2, dilation=2), nn.ReLU(), nn.Conv2d(c2, 1, 1)
        )
        self.materials = materials
        with torch.no_grad():
            self.head.bias.zero_()
            self.head.bias[HEAT] = -4.0  # few cells hold a centre

    def forward(self, frames: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        x = torch.cat([frames, frames - previous], dim=1)
        features = F.relu(self.blocks(self.stem(x)))
        return torch.cat([self.head(features), self.size(features)], dim=1)


class Peaks(NamedTuple):
    """Up to K objects per frame, strongest first: score [B, K] (the centre probability),
    xy [B, K, 2] (model pixels from the top-left corner), radius [B, K] (model pixels),
    materials [B, K, M] (probabilities), size [B, K] (metres)."""

    score: torch.Tensor
    xy: torch.Tensor
    radius: torch.Tensor
    materials: torch.Tensor
    size: torch.Tensor


def peaks(maps: torch.Tensor, k: int = 6) -> Peaks:
    """The K highest local maxima (3 x 3) of the centre map, with what the other maps say there."""
    b, c, h, w = maps.shape
    heat = torch.sigmoid(maps[:, HEAT])
    local = heat == F.max_pool2d(heat[:, None], 3, stride=1, padding=1)[:, 0]
    score, index = torch.topk((heat * local).reshape(b, -1), k, dim=1)
    flat = maps.reshape(b, c, h * w)
    at = flat.gather(2, index[:, None, :].expand(b, c, k))  # [B, C, K]
    col = (index % w).float() + at[:, OFFSET_X]
    row = torch.div(index, w, rounding_mode="floor").float() + at[:, OFFSET_Y]
    xy = torch.stack([col, row], dim=-1) * STRIDE
    return Peaks(
        score,
        xy,
        torch.exp(at[:, LOG_RADIUS]),
        torch.softmax(at[:, MATERIAL:LOG_SIZE].transpose(1, 2), dim=-1),
        torch.exp(at[:, LOG_SIZE]),
    )
