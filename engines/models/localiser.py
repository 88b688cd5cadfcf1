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
        features = self.features(frames, previous)
        return torch.cat([self.head(features), self.size(features)], dim=1)

    def features(self, frames: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        x = torch.cat([frames, frames - previous], dim=1)
        return F.relu(self.blocks(self.stem(x)))

    def located(self, frames: torch.Tensor, previous: torch.Tensor, k: int = 6) -> Peaks:
        """`peaks(self(frames, previous), k)` with the size branch run at the K peaks only (the
        graph the service runs: over the whole map it would be a sixth of the localiser's work
        for six numbers)."""
        features = self.features(frames, previous)
        maps = self.head(features)
        score, index = _top(maps, k)
        return _read(maps, score, index, self._size_at(features, index))

    def _size_at(self, features: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        """The size branch's log size at flat cell `index` [B, K]: its 3 x 3 dilated
        convolution gathered at those cells, then its 1 x 1."""
        conv, _, out = self.size
        d, p = conv.dilation[0], conv.padding[0]
        b, c, _, w = features.shape
        k = index.shape[1]
        wide = w + 2 * p
        padded = F.pad(features, (p, p, p, p)).reshape(b, c, -1)
        rows, cols = torch.div(index, w, rounding_mode="floor"), index % w
        taps = torch.tensor([i * d * wide + j * d for i in range(3) for j in range(3)])
        cells = (rows * wide + cols)[:, :, None] + taps  # [B, K, 9], padded coordinates
        patches = padded.gather(2, cells.reshape(b, 1, k * 9).expand(b, c, k * 9))
        patches = patches.reshape(b, c, k, 9).transpose(1, 2).reshape(b, k, c * 9)
        hidden = F.relu(patches @ conv.weight.reshape(len(conv.weight), -1).T + conv.bias)
        return (hidden @ out.weight.reshape(1, -1).T + out.bias)[..., 0]


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
    score, index = _top(maps, k)
    return _read(maps[:, :LOG_SIZE], score, index, _gather(maps[:, LOG_SIZE:], index)[:, 0])


def _top(maps: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Score [B, K] and flat cell index [B, K] of the K strongest local maxima."""
    b = maps.shape[0]
    heat = torch.sigmoid(maps[:, HEAT])
    local = heat == F.max_pool2d(heat[:, None], 3, stride=1, padding=1)[:, 0]
    return torch.topk((heat * local).reshape(b, -1), k, dim=1)


def _gather(maps: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """[B, C, K]: the maps at flat cell `index` [B, K]."""
    b, c, h, w = maps.shape
    return maps.reshape(b, c, h * w).gather(2, index[:, None, :].expand(b, c, index.shape[1]))


def _read(
    maps: torch.Tensor, score: torch.Tensor, index: torch.Tensor, log_size: torch.Tensor
) -> Peaks:
    """Peaks from the maps without the size channel, at their cells, with the log size there."""
    at = _gather(maps, index)
    w = maps.shape[-1]
    col = (index % w).float() + at[:, OFFSET_X]
    row = torch.div(index, w, rounding_mode="floor").float() + at[:, OFFSET_Y]
    xy = torch.stack([col, row], dim=-1) * STRIDE
    return Peaks(
        score,
        xy,
        torch.exp(at[:, LOG_RADIUS]),
        torch.softmax(at[:, MATERIAL:].transpose(1, 2), dim=-1),
        torch.exp(log_size),
    )
