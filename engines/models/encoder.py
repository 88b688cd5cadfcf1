"""Visual encoder: per-frame appearance and motion -> feature vector.

Contract:  frames [B, T, 3, H, W] float32 in [0, 1], age [B, T] float32
           -> features [B, T, D] float32
Feature t sees frames t-1 and t (left_context = 1, right_context = 0); at the first frame of the
input the previous frame is the frame itself (no motion). `age` is how long before model time t
the source frame was captured, in model frames: it tells the generator when a duplicated or early
frame stands for the present, which sub-frame timing needs.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class VisualEncoder(nn.Module):
    left_context = 1
    right_context = 0

    def __init__(
        self,
        *,
        height: int = 64,
        width: int = 64,
        dim: int = 96,
        channels: tuple[int, ...] = (16, 32, 48, 64),
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 6  # the frame and its difference to the previous frame
        for c_out in channels:
            layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.GELU()]
            c_in = c_out
        self.cnn = nn.Sequential(*layers)
        scale = 2 ** len(channels)
        self.proj = nn.Linear(c_in * (height // scale) * (width // scale), dim)
        self.out = nn.Linear(dim + 1, dim)
        self.dim = dim

    def forward(self, frames: torch.Tensor, age: torch.Tensor) -> torch.Tensor:
        b, t, c, h, w = frames.shape
        prev = torch.cat([frames[:, :1], frames[:, :-1]], dim=1)
        x = torch.cat([frames, (frames - prev) * 4.0], dim=2).reshape(b * t, 2 * c, h, w)
        x = self.cnn(x).reshape(b, t, -1)
        x = F.gelu(self.proj(x))
        return self.out(torch.cat([x, age.unsqueeze(-1)], dim=-1))
