"""Visual encoder: per-frame appearance and motion -> feature vector.

Contract:  frames [B, T, 3, H, W] float32 in [0, 1], age [B, T] float32
           -> features [B, T, D] float32
Feature t sees frames t-1 and t (left_context = 1, right_context = 0); at the first frame of the
input the previous frame is the frame itself (no motion). `step` streams it: its state is the
previous frame's embedding. `age` is how long before model time t
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
        height: int = 96,
        width: int = 96,
        dim: int = 96,
        stem: int = 4,
        channels: tuple[int, ...] = (24, 32, 48, 64),
    ) -> None:
        """A `stem` x `stem` patch embedding (stride `stem`) of each frame, then, on the
        embeddings of the frame and of its difference to the previous frame, a stride-2 3x3
        convolution per further entry of `channels`. The embedding is linear, so the difference
        of two frames' embeddings is the embedding of their difference: each frame is embedded
        once, and a larger input costs little (small objects need the pixels, not a deep stack
        at full resolution)."""
        super().__init__()
        self.stem = nn.Conv2d(3, channels[0], stem, stride=stem)
        layers: list[nn.Module] = []
        c_in = 2 * channels[0]
        for c_out in channels[1:]:
            layers += [nn.Conv2d(c_in, c_out, 3, stride=2, padding=1), nn.GELU()]
            c_in = c_out
        self.cnn = nn.Sequential(*layers)
        scale = stem * 2 ** (len(channels) - 1)
        self.proj = nn.Linear(c_in * (height // scale) * (width // scale), dim)
        self.out = nn.Linear(dim + 1, dim)
        self.dim, self.height, self.width = dim, height, width

    def forward(self, frames: torch.Tensor, age: torch.Tensor) -> torch.Tensor:
        e = self.embed(frames)
        return self._features(e, e[:, :1], age)

    def initial_state(self, batch: int = 1) -> dict[str, torch.Tensor]:
        """`before`: the embedding of the frame before the next call's first; `started`: 0
        until the first call, whose first frame then stands in for its own predecessor (as in
        `forward`)."""
        scale = self.stem.stride[0]
        h, w = self.height // scale, self.width // scale
        zeros = self.stem.weight.new_zeros
        return {"before": zeros(batch, self.stem.out_channels, h, w), "started": zeros(batch, 1)}

    def step(
        self, frames: torch.Tensor, age: torch.Tensor, state: dict[str, torch.Tensor]
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Streaming `forward`: consecutive calls give the features one call over all their
        frames gives. Returns (features, next state)."""
        e = self.embed(frames)
        on = state["started"][:, :, None, None]
        first = on * state["before"] + (1.0 - on) * e[:, 0]
        features = self._features(e, first[:, None], age)
        return features, {"before": e[:, -1], "started": torch.ones_like(state["started"])}

    def embed(self, frames: torch.Tensor) -> torch.Tensor:
        """frames [B, T, 3, H, W] -> patch embeddings [B, T, C, H / stem, W / stem]."""
        b, t, c, h, w = frames.shape
        e = self.stem(frames.reshape(b * t, c, h, w))
        return e.reshape(b, t, *e.shape[1:])

    def _features(self, e: torch.Tensor, before: torch.Tensor, age: torch.Tensor) -> torch.Tensor:
        """Embeddings [B, T, ...] and that of the frame before the first [B, 1, ...] -> features."""
        b, t = e.shape[:2]
        prev = torch.cat([before, e[:, :-1]], dim=1)
        x = F.gelu(torch.cat([e, (e - prev) * 4.0], dim=2)).flatten(0, 1)
        pooled = self.proj(self.cnn(x).reshape(b, t, -1))
        return self.out(torch.cat([F.gelu(pooled), age.unsqueeze(-1)], dim=-1))
